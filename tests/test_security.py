"""Untrusted input cannot run code, read attributes, escape the output folder or leak secrets.

* YAML is loaded safely everywhere: ``!!python/...`` tags in a config, a base config, a skill
  registry, a curve file or an experiment file are rejected (exit 2) and never constructed.
* Memory templates (registry skills and config events) are plain ``{name}`` placeholders only:
  attribute access, indexing, conversions and nested fields are load errors.
* Run and experiment names cannot contain paths, so run directories stay inside ``--out``.
* The LLM API key goes only into the ``Authorization`` header, never into any file; a key
  pasted where the name of its environment variable belongs is refused without being shown.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulation.cli import main
from simulation.decisions.llm.testing import DEFAULT_DECISION, FakeOpenAIServer, Fault
from simulation.skills import RegistryError, SkillRegistry
from simulation.skills.templates import TemplateError, render

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
REGISTRY = ROOT / "skill_registry.yaml"
ERROR_PREFIX = "floodsim: error: "
SMALL = ["--set", "households.count=30", "--set", "years=2"]
SECRET = "sk-SECRET-1234567890"
KEY_ENV = "FLOODSIM_TEST_KEY"
DO_NOTHING_TEMPLATE = '"Year {year}: I chose to wait and not take protective action"'


def call(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_bad_input(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, one stderr line with the error prefix; returns that line."""
    assert code == 2, err
    assert "Traceback" not in err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR_PREFIX), err
    return lines[0]


def all_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def small_config(
    folder: Path, body: str = "", name: str = "config.yaml", households: int = 30
) -> Path:
    """A small 2-year run config in ``folder`` inheriting configs/default.yaml."""
    path = folder / name
    path.write_text(
        f"base: {DEFAULT}\nhouseholds: {{count: {households}}}\nyears: 2\n{body}",
        encoding="utf-8",
    )
    return path


# ------------------------------------------------------------------------------- safe YAML
def os_system(marker: Path) -> str:
    return f'!!python/object/apply:os.system ["echo pwned > {marker}"]'


def subprocess_touch(marker: Path) -> str:
    return f'!!python/object/new:subprocess.check_output [["touch", "{marker}"]]'


@pytest.mark.parametrize("payload", [os_system, subprocess_touch], ids=["os.system", "subprocess"])
@pytest.mark.parametrize(
    "where", ["config-value", "config-document", "base-config", "registry", "curves", "experiment"]
)
def test_python_yaml_tags_are_rejected_and_never_run(capsys, tmp_path, monkeypatch, where, payload):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    evil = payload(marker)
    command = "run"
    if where == "config-value":
        target = small_config(tmp_path, f"seed: {evil}\n")
    elif where == "config-document":
        target = tmp_path / "config.yaml"
        target.write_text(f"{evil}\n", encoding="utf-8")
    elif where == "base-config":
        (tmp_path / "base.yaml").write_text(f"base: {DEFAULT}\nseed: {evil}\n", encoding="utf-8")
        target = tmp_path / "config.yaml"
        target.write_text("base: base.yaml\nhouseholds: {count: 30}\nyears: 2\n", encoding="utf-8")
    elif where == "registry":
        registry = REGISTRY.read_text(encoding="utf-8").replace("version: 1", f"version: {evil}")
        (tmp_path / "registry.yaml").write_text(registry, encoding="utf-8")
        target = small_config(tmp_path, "registry: registry.yaml\n")
    elif where == "curves":
        (tmp_path / "curves.yaml").write_text(f"source: {evil}\n", encoding="utf-8")
        target = small_config(tmp_path, "damage: {curves: curves.yaml}\n")
    else:
        command = "batch"
        target = tmp_path / "experiment.yaml"
        target.write_text(
            f"name: evil\nbase: {DEFAULT}\nset: {{households.count: 30, years: 2}}\n"
            f"replicates: {evil}\n",
            encoding="utf-8",
        )
    before = all_files(tmp_path)

    for argv in ([command, target, "--out", tmp_path / "out"], ["validate", target]):
        code, out, err = call(capsys, *argv)
        line = assert_bad_input(code, out, err)
        assert "python/" in line  # the message names the refused tag
        assert not marker.exists()
    assert all_files(tmp_path) == before
    assert not (tmp_path / "out").exists()


def test_python_tags_in_a_registry_are_a_registry_error(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "registry.yaml"
    path.write_text(f"version: {os_system(marker)}\n", encoding="utf-8")
    with pytest.raises(RegistryError, match="python/object/apply") as info:
        SkillRegistry.load(path)
    assert str(path) in str(info.value)
    assert not marker.exists()


# ------------------------------------------------------------------------- memory templates
UNSAFE_TEMPLATES = [
    "{year.__class__.__mro__}",
    "{state[0]}",
    "{year!r}",
    "{year.__init__.__globals__}",
    "{premium:{year}}",
    "{0}",
    "{}",
]


def registry_with_template(folder: Path, template: str) -> Path:
    text = REGISTRY.read_text(encoding="utf-8")
    assert text.count(DO_NOTHING_TEMPLATE) == 1
    path = folder / "registry.yaml"
    path.write_text(text.replace(DO_NOTHING_TEMPLATE, json.dumps(template)), encoding="utf-8")
    return path


@pytest.mark.parametrize("template", UNSAFE_TEMPLATES)
def test_registry_template_cannot_reach_attributes_indexes_or_calls(tmp_path, template):
    path = registry_with_template(tmp_path, template)
    with pytest.raises(RegistryError) as info:
        SkillRegistry.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: skill 'do_nothing': memory.template: "), message
    assert template in message
    assert "\n" not in message


@pytest.mark.parametrize("template", UNSAFE_TEMPLATES[:3])
def test_cli_rejects_a_registry_with_an_unsafe_template(capsys, tmp_path, monkeypatch, template):
    monkeypatch.chdir(tmp_path)
    registry = registry_with_template(tmp_path, template)
    config = small_config(tmp_path, "registry: registry.yaml\n")
    for argv in (["run", config, "--out", tmp_path / "out"], ["validate", config]):
        code, out, err = call(capsys, *argv)
        line = assert_bad_input(code, out, err)
        assert line.startswith(f"{ERROR_PREFIX}{config}: registry: {registry}: "), line
        assert "skill 'do_nothing': memory.template: " in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("event", "template"),
    [
        ("claim_paid", "{payout.__class__}"),
        ("flood_major", "{damage[0]}"),
        ("neighbor_adaptation", "{action!s}"),
        ("premium_change", "{old.__class__.__init__.__globals__}"),
    ],
)
def test_event_template_cannot_reach_attributes(capsys, tmp_path, monkeypatch, event, template):
    monkeypatch.chdir(tmp_path)
    config = small_config(tmp_path, f"events:\n  {event}:\n    template: {json.dumps(template)}\n")
    for argv in (["run", config, "--out", tmp_path / "out"], ["validate", config]):
        code, out, err = call(capsys, *argv)
        line = assert_bad_input(code, out, err)
        assert line.startswith(f"{ERROR_PREFIX}{config}: events.{event}.template: "), line
        assert template in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("template", UNSAFE_TEMPLATES)
def test_render_never_resolves_attributes(template):
    with pytest.raises(TemplateError):
        render(template, {"year": 1, "state": "x", "premium": 1.0})


# -------------------------------------------------------------------------------- run names
@pytest.mark.parametrize("name", ["../../escape", "/etc/x", "a/b", "..", "./x"])
def test_run_name_cannot_escape_the_output_folder(capsys, tmp_path, monkeypatch, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    argv = ["run", DEFAULT, *SMALL, "--set", f"name={name}", "--out", work / "out"]
    code, out, err = call(capsys, *argv)
    line = assert_bad_input(code, out, err)
    assert line.startswith(f"{ERROR_PREFIX}--set name={name}: name: "), line
    assert all_files(tmp_path) == []
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a", "b"]
    assert not list(Path("/etc").glob("x-s*"))


def test_run_name_in_the_config_file_cannot_escape(capsys, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    config = small_config(work, "name: ../escape\n")
    code, out, err = call(capsys, "run", config, "--out", work / "out")
    line = assert_bad_input(code, out, err)
    assert line.startswith(f"{ERROR_PREFIX}{config}: name: "), line
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["config.yaml", "work"]


@pytest.mark.parametrize("name", ["../x", "/tmp/x", "a/b"])
def test_experiment_name_cannot_escape(capsys, tmp_path, monkeypatch, name):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # batch without --out writes to outputs/<name> under the cwd
    experiment = work / "experiment.yaml"
    experiment.write_text(
        f"name: {json.dumps(name)}\nbase: {DEFAULT}\nset: {{households.count: 30, years: 2}}\n"
        "sweep: {grid: {memory.decay_rate: [0.9]}}\nreplicates: 1\n",
        encoding="utf-8",
    )
    for argv in (["batch", experiment, "--quiet"], ["validate", experiment]):
        code, out, err = call(capsys, *argv)
        line = assert_bad_input(code, out, err)
        assert line.startswith(f"{ERROR_PREFIX}{experiment}: name: "), line
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["experiment.yaml", "work"]


# ----------------------------------------------------------------------------------- secrets
def llm_config(folder: Path, base_url: str, audit_level: str) -> Path:
    return small_config(
        folder,
        "decision:\n"
        "  policy: llm\n"
        "  llm:\n"
        f"    base_url: {base_url}\n"
        "    model: fake-model\n"
        f"    api_key_env: {KEY_ENV}\n"
        "    mode: record\n"
        "    retries: 0\n"
        "    timeout_s: 10\n"
        f"audit: {{level: {audit_level}}}\n",
        name="llm.yaml",
        households=20,
    )


def assert_secret_in_no_file(folder: Path) -> None:
    files = all_files(folder)
    assert files
    for path in files:
        data = path.read_bytes()
        assert SECRET.encode() not in data, path
        assert SECRET.removeprefix("sk-").encode() not in data, path


@pytest.mark.parametrize("audit_level", ["standard", "full"])
def test_api_key_is_sent_but_never_written(capsys, tmp_path, monkeypatch, audit_level):
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.chdir(tmp_path)
    with FakeOpenAIServer() as server:
        config = llm_config(tmp_path, server.base_url, audit_level)
        code, out, err = call(capsys, "run", config, "--out", tmp_path / "out", "--quiet")
        requests = server.requests
    assert code == 0, err
    assert SECRET not in out + err
    assert len(requests) == 20 * 2  # every household decides every year
    assert {r.authorization for r in requests} == {f"Bearer {SECRET}"}
    assert all(SECRET not in json.dumps(r.body) for r in requests)

    run_dir = Path(out.strip())
    assert run_dir.parent == tmp_path / "out"
    assert (run_dir / "llm_calls.jsonl").is_file()
    assert (tmp_path / "llm_cache.sqlite").is_file()
    resolved = (run_dir / "config.resolved.yaml").read_text(encoding="utf-8")
    assert "api_key_env" in resolved
    assert KEY_ENV in resolved
    assert_secret_in_no_file(tmp_path)


def test_api_key_echoed_in_an_error_reply_is_never_written(capsys, tmp_path, monkeypatch):
    # Some endpoints echo the rejected key: "Incorrect API key provided: sk-...".
    monkeypatch.setenv(KEY_ENV, SECRET)
    monkeypatch.chdir(tmp_path)
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    rejected = Fault("http_error", status=401, body=body)
    with FakeOpenAIServer(faults=lambda _index, _body: rejected) as server:
        config = llm_config(tmp_path, server.base_url, "full")
        code, out, err = call(capsys, "run", config, "--out", tmp_path / "out", "--quiet")
        requests = server.requests
    assert requests
    assert {r.authorization for r in requests} == {f"Bearer {SECRET}"}
    assert SECRET not in out + err
    assert code in (0, 1, 2), err
    assert "Traceback" not in err
    assert_secret_in_no_file(tmp_path)


def test_fake_server_default_reply_is_a_do_nothing_decision():
    # The secret tests rely on households choosing do_nothing (nothing else changes the run).
    assert DEFAULT_DECISION["skill"] == "do_nothing"


@pytest.mark.parametrize(
    "pasted",
    [
        SECRET,
        "gsk_4fTq9ZxW2mLp7RvB1nKc",  # Groq
        "hf_aB3dE5fG7hJ9kL1mN3pQ5r",  # Hugging Face
        "AKIAIOSFODNN7EXAMPLE",  # AWS access key id
        "q8Hf3KzP1wYt6RmB9xLc2VnD4sGj7TaE",  # a bare random token
    ],
)
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_key_pasted_as_api_key_env_is_refused_and_never_shown(
    capsys, tmp_path, monkeypatch, pasted, command
):
    monkeypatch.chdir(tmp_path)
    body = f"decision:\n  policy: llm\n  llm:\n    api_key_env: {pasted}\n"
    config = small_config(tmp_path, body)
    extra = ["--out", tmp_path / "out"] if command == "run" else []
    code, out, err = call(capsys, command, config, *extra)
    line = assert_bad_input(code, out, err)
    assert "decision.llm.api_key_env: looks like an API key" in line
    assert pasted not in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://user:hunter2secret@localhost:11434/v1",
        "https://api.example.org/v1?api_key=hunter2secret",
        "https://api.example.org/v1?x=1&token=hunter2secret",
    ],
)
@pytest.mark.parametrize("given", ["file", "flag"])
def test_a_base_url_holding_a_key_is_refused_and_never_shown(capsys, tmp_path, url, given):
    """The resolved config is written into the run directory: a key in the URL would be too."""
    body = "decision:\n  policy: llm\n" + (
        f"  llm:\n    base_url: '{url}'\n" if given == "file" else ""
    )
    config = small_config(tmp_path, body)
    flags = ["--set", f"decision.llm.base_url={url}"] if given == "flag" else []
    code, out, err = call(capsys, "run", config, "--out", tmp_path / "out", *flags)
    line = assert_bad_input(code, out, err)
    assert "decision.llm.base_url: holds a password or a key" in line
    assert "hunter2secret" not in line
    assert not (tmp_path / "out").exists()


def test_a_base_url_with_other_query_parameters_is_accepted(capsys, tmp_path):
    url = "https://example.openai.azure.com/v1?api-version=2024-02-01"
    body = f"decision:\n  policy: llm\n  llm:\n    base_url: '{url}'\n"
    code, _, err = call(capsys, "validate", small_config(tmp_path, body))
    assert (code, err) == (0, ""), err


@pytest.mark.parametrize("name", ["OPENAI_API_KEY", KEY_ENV, "HF_TOKEN", "LLM_KEY_2024", "key2"])
def test_variable_names_are_accepted_as_api_key_env(capsys, tmp_path, name):
    body = f"decision:\n  policy: llm\n  llm:\n    api_key_env: {name}\n"
    code, out, err = call(capsys, "validate", small_config(tmp_path, body))
    assert code == 0, err
    assert "ok" in out


def test_an_api_key_env_that_is_no_variable_name_is_refused_without_echo(capsys, tmp_path):
    body = "decision:\n  llm:\n    api_key_env: 'my key!'\n"
    code, out, err = call(capsys, "validate", small_config(tmp_path, body))
    line = assert_bad_input(code, out, err)
    assert "api_key_env: must name an environment variable" in line
    assert "my key!" not in line


def test_a_set_value_for_api_key_env_that_is_no_yaml_is_refused_without_echo(capsys, tmp_path):
    # A key with a YAML-breaking character (here ': ' and a quote) fails before validation does.
    pasted = "sk-live: 'q8Hf3KzP1wYt6RmB9xLc2VnD4sGj7TaE"
    override = f"decision.llm.api_key_env={pasted}"
    code, out, err = call(capsys, "validate", small_config(tmp_path, ""), "--set", override)
    line = assert_bad_input(code, out, err)
    assert "decision.llm.api_key_env: cannot parse value (value not shown)" in line
    assert "q8Hf3KzP1wYt6RmB9xLc2VnD4sGj7TaE" not in line

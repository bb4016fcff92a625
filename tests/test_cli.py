"""Tests for the ``floodsim`` command: run directories, determinism, validate and bad input."""

from __future__ import annotations

import csv
import errno
import hashlib
import io
import json
import os
import re
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

import simulation
from simulation.cli import build_parser, main
from simulation.config import load_config
from simulation.runner import config_hash, default_run_id

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
BAD = Path(__file__).resolve().parent / "bad_inputs"
SMALL = ["--set", "households.count=60", "--set", "years=5"]
METRIC_COLUMNS = (
    "year",
    "insured_share",
    "elevated_share",
    "relocated_share",
    "flooded_households",
    "total_damage",
    "claims_paid",
    "premium_rate",
    "subsidy_share",
    "mean_tp",
    "mean_working",
    "mean_episodic",
)
ERROR_PREFIX = "floodsim: error: "


def call(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read_metrics(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "model_years.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def assert_bad_input(code: int, out: str, err: str) -> str:
    """Exit 2, nothing on stdout, one stderr line with the error prefix; returns that line."""
    assert code == 2, err
    assert out == ""
    assert err.endswith("\n")
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(ERROR_PREFIX), err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------------------- run
@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One small run of default.yaml: exit code, stdout, stderr and the --out folder."""
    out_root = tmp_path_factory.mktemp("out")
    stdout, stderr = io.StringIO(), io.StringIO()
    with redirect_stdout(stdout), redirect_stderr(stderr):
        code = main(["run", str(DEFAULT), *SMALL, "--out", str(out_root)])
    return code, stdout.getvalue(), stderr.getvalue(), out_root


def test_run_exits_0_and_prints_the_run_directory_last(small_run):
    code, out, err, out_root = small_run
    assert code == 0, err
    assert err == ""
    run_dir = Path(out.splitlines()[-1])
    assert run_dir.parent == out_root
    assert run_dir.is_dir()
    assert sorted(p.name for p in out_root.iterdir()) == [run_dir.name]  # no .partial left
    assert sorted(p.name for p in run_dir.iterdir()) == [
        "config.resolved.yaml",
        "consolidation.jsonl",
        "household_traces.jsonl",
        "households.csv",
        "manifest.json",
        "memory_updates.jsonl",
        "model_years.csv",
        "skill_registry.yaml",
        "tool_invocations.jsonl",
    ]


def test_run_prints_the_summary_before_the_path(small_run):
    _, out, _, _ = small_run
    lines = out.splitlines()
    assert "60 households" in lines[0]
    assert "5 years" in lines[0]
    assert "seed 42" in lines[0]
    assert "engine arrays" in lines[0]  # default.yaml's engine: auto, resolved
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["year"])
    assert "insured" in lines[header].split()
    assert "flooded" in lines[header].split()
    rows = lines[header + 1 : header + 6]
    assert [row.split()[0] for row in rows] == ["1", "2", "3", "4", "5"]
    assert header + 6 == len(lines) - 1  # the table ends right before the run directory


def test_run_names_its_engine_before_the_first_year(tmp_path, monkeypatch, capsys):
    """The line came once the run had ended: a long run did not say its engine while it ran."""
    from simulation.model import FloodAdaptationModel

    def stopped(*_: object) -> None:
        raise KeyboardInterrupt  # as if Ctrl-C in year 1

    monkeypatch.setattr(FloodAdaptationModel, "step", stopped)
    settings = ["--set", "households.count=20", "--set", "years=2", "--out", str(tmp_path)]
    line = "floodsim: default, 20 households, 2 years, seed 42, engine arrays\n"
    assert main(["run", str(DEFAULT), *settings]) == 130
    assert capsys.readouterr().out == line
    (run_dir,) = tmp_path.iterdir()
    assert main(["run", "--resume", str(run_dir)]) == 130  # a resumed run names it too
    assert capsys.readouterr().out == line
    assert main(["run", "--resume", str(run_dir), "--quiet"]) == 130
    assert capsys.readouterr().out == ""


def test_manifest(small_run):
    _, out, _, _ = small_run
    run_dir = Path(out.splitlines()[-1])
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    config, _ = load_config(DEFAULT, ["households.count=60", "years=5"])
    assert manifest["status"] == "complete"
    assert manifest["counts"] == {"households": 60, "years": 5, "household_years": 300}
    assert manifest["seed"] == 42
    assert manifest["name"] == "default"
    resolved, _ = load_config(run_dir / "config.resolved.yaml")
    assert manifest["config_hash"] == config_hash(resolved)
    registry = (run_dir / "skill_registry.yaml").read_bytes()
    assert registry == (DEFAULT.parent / config.registry).read_bytes()
    assert manifest["registry_sha256"] == hashlib.sha256(registry).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["config_hash"])
    assert manifest["input_sha256"] == {"registry": manifest["registry_sha256"]}
    assert re.fullmatch(r"default-s42-[0-9a-f]{8}", manifest["run_id"])
    assert manifest["run_id"] == run_dir.name
    versions = manifest["versions"]
    assert versions["floodsim"] == simulation.__version__
    assert {"mesa", "numpy", "python"} <= set(versions)
    assert all(isinstance(v, str) and v for v in versions.values())
    assert manifest["duration_s"] >= 0


def test_resolved_config_loads_back(small_run):
    _, out, _, _ = small_run
    run_dir = Path(out.splitlines()[-1])
    resolved, _ = load_config(run_dir / "config.resolved.yaml")
    config, _ = load_config(DEFAULT, ["households.count=60", "years=5"])
    assert resolved == config.model_copy(update={"registry": "skill_registry.yaml"})
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert config_hash(resolved) == manifest["config_hash"]


def test_resolved_config_reruns_from_the_run_directory(small_run, capsys, tmp_path):
    _, out, _, _ = small_run
    run_dir = Path(out.splitlines()[-1])
    code, _, err = call(capsys, "validate", run_dir / "config.resolved.yaml")
    assert code == 0, err
    code, again, err = call(capsys, "run", run_dir / "config.resolved.yaml", "--out", tmp_path)
    assert code == 0, err
    rerun = Path(again.splitlines()[-1])
    assert rerun.name == run_dir.name
    assert (rerun / "model_years.csv").read_bytes() == (run_dir / "model_years.csv").read_bytes()


def test_a_resolved_config_reruns_into_its_own_run_directory(capsys, tmp_path):
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, "--out", tmp_path, "--quiet")
    assert code == 0, err
    run_dir = Path(out.splitlines()[-1])
    metrics = (run_dir / "model_years.csv").read_bytes()
    # The same config, files and seed: the same run id, so the run is replaced by its equal.
    resolved = run_dir / "config.resolved.yaml"
    code, again, err = call(capsys, "run", resolved, "--out", tmp_path, "--quiet")
    assert code == 0, err
    assert Path(again.splitlines()[-1]) == run_dir
    assert (run_dir / "model_years.csv").read_bytes() == metrics
    assert (run_dir / "skill_registry.yaml").read_bytes() == (
        ROOT / "skill_registry.yaml"
    ).read_bytes()
    assert json.loads((run_dir / "manifest.json").read_bytes())["status"] == "complete"


def test_an_edited_input_file_gives_a_new_run(capsys, tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_bytes((ROOT / "skill_registry.yaml").read_bytes())
    argv = ["run", DEFAULT, *SMALL, "--set", f"registry={registry}", "--out", tmp_path / "out"]
    code, out, err = call(capsys, *argv, "--quiet")
    assert code == 0, err
    first = Path(out.splitlines()[-1])
    with registry.open("a", encoding="utf-8") as file:
        file.write("# edited\n")
    code, out, err = call(capsys, *argv, "--quiet")
    assert code == 0, err
    second = Path(out.splitlines()[-1])
    assert second != first
    assert (first / "manifest.json").exists()  # the earlier run is kept
    digests = [
        json.loads((run / "manifest.json").read_bytes())["input_sha256"]["registry"]
        for run in (first, second)
    ]
    assert digests[1] == hashlib.sha256(registry.read_bytes()).hexdigest() != digests[0]


def test_a_relative_set_path_is_relative_to_the_current_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the config file's folder
    (tmp_path / "decisions.csv").write_text("agent_id,year,skill_id\n", encoding="utf-8")
    scripted = ["--set", "decision.policy=scripted", "--set", "decision.script=decisions.csv"]
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, *scripted, "--out", "out")
    assert code == 0, err
    resolved = load_config(Path(out.splitlines()[-1]) / "config.resolved.yaml")[0]
    assert resolved.decision.script == str(tmp_path.resolve() / "decisions.csv")


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("decision.script=missing.csv", "file not found"),
        ("decision={policy: scripted, script: missing.csv}", "file not found"),
        ("registry=missing.yaml", ""),
    ],
)
def test_a_missing_set_path_names_the_flag_and_the_path_meant(
    capsys, tmp_path, monkeypatch, override, problem
):
    monkeypatch.chdir(tmp_path)
    policy = (
        []
        if "policy" in override or "registry" in override
        else ["--set", "decision.policy=scripted"]
    )
    code, out, err = call(capsys, "validate", DEFAULT, *policy, "--set", override)
    line = assert_bad_input(code, out, err)
    missing = override.rpartition(" ")[2].rstrip("}").rpartition("=")[2]
    assert line.startswith(f"{ERROR_PREFIX}--set {override}: "), line
    assert str(tmp_path.resolve() / missing) in line
    assert str(DEFAULT) not in line
    assert problem in line


def test_a_warning_about_a_set_decision_table_names_the_flag(capsys, tmp_path):
    script = tmp_path / "decisions.csv"
    script.write_text("agent_id,year,skill_id\nH00001,40,relocate\n", encoding="utf-8")
    flags = ["--set", "decision.policy=scripted", "--set", f"decision.script={script}"]
    code, _, err = call(capsys, "validate", DEFAULT, *SMALL, *flags)
    assert code == 0, err
    assert f"warning: --set decision.script={script}: decision.script: 1 entry is for" in err


def test_an_unknown_audited_id_names_the_flag_that_listed_it(capsys):
    override = "audit.sample=[H00002, H99999]"
    code, out, err = call(capsys, "validate", DEFAULT, *SMALL, "--set", override)
    line = assert_bad_input(code, out, err)
    problem = "audit.sample: 'H99999' is not a household of this run (1 of 2 listed ids"
    assert line.startswith(f"{ERROR_PREFIX}--set {override}: {problem}"), line


def test_a_file_missing_beside_a_base_config_names_that_base(capsys, tmp_path):
    (tmp_path / "base").mkdir()
    base = tmp_path / "base" / "base.yaml"
    base.write_text(f"base: {DEFAULT}\nregistry: skills.yaml\n", encoding="utf-8")
    child = tmp_path / "child.yaml"
    child.write_text("base: base/base.yaml\nseed: 3\n", encoding="utf-8")
    line = assert_bad_input(*call(capsys, "validate", str(child), *SMALL))
    assert line.startswith(f"{ERROR_PREFIX}{base}: registry: {tmp_path / 'base' / 'skills.yaml'}")


def test_an_unreadable_prompt_file_is_bad_input(capsys, tmp_path):
    llm = ["--set", "decision.policy=llm", "--set", "decision.llm.mode=replay"]
    prompt = tmp_path / "prompt.txt"
    prompt.write_bytes(b"You are a household in caf\xe9 country.\n")
    for path, problem in ((tmp_path / "missing.txt", "prompt file not found"), (prompt, "UTF-8")):
        argv = ["validate", DEFAULT, *SMALL, *llm, "--set", f"decision.llm.prompt={path}"]
        code, _, err = call(capsys, *argv)
        assert code == 2
        assert len(err.strip().splitlines()) == 1
        assert "decision.llm.prompt" in err
        assert str(path) in err
        assert problem in err


def test_a_prompt_format_spec_that_does_not_fit_its_value_is_bad_input(capsys, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You live in zone {flood_zone:.2f}.\n{skills}\n", encoding="utf-8")
    llm = ["--set", "decision.policy=llm", "--set", f"decision.llm.prompt={prompt}"]
    line = assert_bad_input(*call(capsys, "validate", DEFAULT, *SMALL, *llm))
    assert f"decision.llm.prompt: {prompt}: placeholder 'flood_zone': format spec '.2f'" in line


def test_an_empty_prompt_is_bad_input_and_one_without_skills_is_warned_of(capsys, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n", encoding="utf-8")
    llm = ["--set", "decision.policy=llm", "--set", "decision.llm.mode=live"]
    line = assert_bad_input(
        *call(capsys, "validate", DEFAULT, *SMALL, *llm, "--set", f"decision.llm.prompt={empty}")
    )
    assert f"decision.llm.prompt: {empty}: empty: the prompt would ask nothing" in line
    blind = tmp_path / "blind.txt"
    blind.write_text("You are household {agent_id}. Choose a skill.\n", encoding="utf-8")
    argv = ["validate", DEFAULT, *SMALL, *llm, "--set", f"decision.llm.prompt={blind}"]
    code, _, err = call(capsys, *argv)
    assert code == 0
    # Named by what set the prompt, as the errors about it are (it lacked the prefix).
    assert err == (
        f"floodsim: warning: --set decision.llm.prompt={blind}: decision.llm.prompt: {blind}: "
        "has no {skills} placeholder, so the model is not shown the skills the household may "
        "choose this year\n"
    )


def test_a_replay_cache_that_cannot_replay_is_bad_input(capsys, tmp_path):
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database\n", encoding="utf-8")
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()  # a database without recorded replies
    folder = tmp_path / "cache"
    folder.mkdir()
    cases = (
        (tmp_path / "missing.sqlite", "not found"),
        (not_sqlite, "not an SQLite database"),
        (empty, "holds no recorded replies"),
        (folder, "is a folder"),
    )
    llm = ["--set", "decision.policy=llm", "--set", "decision.llm.mode=replay"]
    for path, problem in cases:
        argv = ["run", DEFAULT, *SMALL, *llm, "--set", f"decision.llm.cache={path}"]
        code, out, err = call(capsys, *argv, "--out", tmp_path / "out")
        line = assert_bad_input(code, out, err)
        assert "decision.llm.cache" in line
        assert str(path) in line
        assert problem in line
        assert not (tmp_path / "out").exists()


def test_a_record_cache_that_is_not_a_cache_is_bad_input_and_a_new_one_is_not_created(
    capsys, tmp_path
):
    not_sqlite = tmp_path / "notes.txt"
    not_sqlite.write_text("not a database\n", encoding="utf-8")
    llm = ["--set", "decision.policy=llm", "--set", "decision.llm.mode=record"]
    for path, problem in ((not_sqlite, "not an SQLite database"), (tmp_path, "is a folder")):
        argv = ["validate", DEFAULT, *SMALL, *llm, "--set", f"decision.llm.cache={path}"]
        line = assert_bad_input(*call(capsys, *argv))
        assert "decision.llm.cache" in line
        assert str(path) in line
        assert problem in line
    assert not_sqlite.read_text(encoding="utf-8") == "not a database\n"
    # A database without replies yet, or no file at all, is where a recording starts.
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    for path in (empty, tmp_path / "new.sqlite"):
        argv = ["validate", DEFAULT, *SMALL, *llm, "--set", f"decision.llm.cache={path}"]
        code, _, err = call(capsys, *argv)
        assert code == 0, err
    assert not (tmp_path / "new.sqlite").exists()  # validating creates nothing


def test_floodsims_own_warnings_are_one_line(capsys, tmp_path):
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, "--out", tmp_path, "--quiet")
    assert code == 0, err
    updates = Path(out.splitlines()[-1]) / "memory_updates.jsonl"
    partial = b'{"schema_version": 1, "run_id": "cut sh'  # an interrupted writer's last line
    with updates.open("ab") as file:
        file.write(partial)
    agent = ["--agent", "H00001", "--year", "5"]
    code, _, err = call(capsys, "audit", "memory", updates.parent, *agent)
    assert code == 0
    last = updates.read_bytes().count(b"\n") + 1
    expected = (
        f"floodsim: warning: {updates}: skipped truncated last line {last} "
        f"({len(partial)} bytes; the run was probably interrupted)"
    )
    assert err.splitlines() == [expected]


def test_model_years_csv(small_run):
    _, out, _, _ = small_run
    rows = read_metrics(Path(out.splitlines()[-1]))
    assert len(rows) == 5
    assert set(METRIC_COLUMNS) <= set(rows[0])
    assert [int(row["year"]) for row in rows] == [1, 2, 3, 4, 5]
    for row in rows:
        values = {name: float(row[name]) for name in METRIC_COLUMNS}
        for share in ("insured_share", "elevated_share", "relocated_share", "subsidy_share"):
            assert 0.0 <= values[share] <= 1.0
        assert 0 <= values["flooded_households"] <= 60
        assert values["total_damage"] >= 0
        assert values["premium_rate"] > 0


def test_quiet_prints_only_the_run_directory(capsys, tmp_path):
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, "--out", tmp_path, "--quiet")
    assert code == 0, err
    assert out.splitlines() == [str(next(tmp_path.iterdir()))]


def test_run_again_into_the_same_folder_replaces_the_run(capsys, tmp_path):
    first = call(capsys, "run", DEFAULT, *SMALL, "--out", tmp_path, "--quiet")
    second = call(capsys, "run", DEFAULT, *SMALL, "--out", tmp_path, "--quiet")
    assert first[0] == second[0] == 0
    assert first[1] == second[1]
    run_dir = Path(second[1].strip())
    assert [p.name for p in tmp_path.iterdir()] == [run_dir.name]
    assert len(read_metrics(run_dir)) == 5


@pytest.mark.parametrize("gzip", [False, True])
def test_replacing_a_run_keeps_the_users_files_and_says_so(capsys, tmp_path, gzip):
    small = [*SMALL, "--set", f"audit.gzip={str(gzip).lower()}"]
    code, out, err = call(capsys, "run", DEFAULT, *small, "--out", tmp_path, "--quiet")
    assert code == 0, err
    run_dir = Path(out.strip())
    (run_dir / "my_notes.txt").write_text("important\n", encoding="utf-8")
    (run_dir / "analysis").mkdir()
    (run_dir / "analysis" / "fit.py").write_text("x = 1\n", encoding="utf-8")
    # What floodsim wrote about the earlier run is stale beside the new one.
    code, _, err = call(capsys, "report", run_dir)
    assert code == 0, err
    (run_dir / "checkpoint.json").write_text("{}", encoding="utf-8")
    (run_dir / "behaviour.csv").write_text("target\n", encoding="utf-8")
    for config in (DEFAULT, run_dir / "config.resolved.yaml"):  # README suggests the second
        argv = [config, *(small if config == DEFAULT else []), "--out", tmp_path, "--quiet"]
        code, again, err = call(capsys, "run", *argv)
        assert code == 0, err
        assert again == out
        kept = "kept 2 files floodsim did not write (analysis, my_notes.txt)"
        assert err.splitlines() == [f"floodsim: warning: {run_dir}: {kept}"]
        streams = ["consolidation", "household_traces", "memory_updates", "tool_invocations"]
        suffix = ".jsonl.gz" if gzip else ".jsonl"
        assert sorted(p.name for p in run_dir.iterdir()) == sorted(
            [
                "analysis",
                "config.resolved.yaml",
                "households.csv",
                "manifest.json",
                "model_years.csv",
                "my_notes.txt",
                "skill_registry.yaml",
                *(f"{name}{suffix}" for name in streams),
            ]
        )
        assert (run_dir / "my_notes.txt").read_text(encoding="utf-8") == "important\n"
        assert (run_dir / "analysis" / "fit.py").is_file()
        assert json.loads((run_dir / "manifest.json").read_bytes())["status"] == "complete"


def test_run_creates_a_nested_out_folder(capsys, tmp_path):
    out_root = tmp_path / "a" / "b"
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, "--out", out_root, "--quiet")
    assert code == 0, err
    assert Path(out.strip()).parent == out_root


# ---------------------------------------------------------------------------------- determinism
def test_same_seed_same_bytes_other_seed_other_results(capsys, tmp_path):
    # 80 households over 8 years of the default hazard: floods happen with both seeds.
    args = ["--set", "households.count=80", "--set", "years=8", "--quiet"]
    run_dirs = []
    for seed, folder in ((42, "a"), (42, "b"), (7, "c")):
        code, out, err = call(
            capsys, "run", DEFAULT, *args, "--seed", seed, "--out", tmp_path / folder
        )
        assert code == 0, err
        run_dirs.append(Path(out.strip()))
    first, again, other = ((d / "model_years.csv").read_bytes() for d in run_dirs)
    assert first == again
    assert first != other
    for run_dir in (run_dirs[0], run_dirs[2]):
        assert sum(int(row["flooded_households"]) for row in read_metrics(run_dir)) > 0
    assert run_dirs[0].name.startswith("default-s42-")
    assert run_dirs[2].name.startswith("default-s7-")


# --------------------------------------------------------------------------------------- validate
def test_validate_prints_ok_and_writes_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = call(capsys, "validate", DEFAULT, *SMALL)
    assert code == 0, err
    assert err == ""
    (line,) = out.splitlines()
    assert line.startswith(f"{DEFAULT}: ok")
    assert "60 households" in line
    assert "5 years" in line
    assert list(tmp_path.iterdir()) == []


def test_validate_default_config(capsys):
    code, out, _ = call(capsys, "validate", DEFAULT)
    assert code == 0
    assert "ok (1000 households, 30 years" in out


def test_validate_counts_one_household_and_one_year_in_the_singular(capsys):
    code, out, _ = call(
        capsys, "validate", DEFAULT, "--set", "households.count=1", "--set", "years=1"
    )
    assert code == 0
    assert "ok (1 household, 1 year, hazard" in out


@pytest.mark.parametrize(
    ("overrides", "engine"),
    [
        ([], "decisions pmt, engine arrays)"),
        (["engine=objects"], "decisions pmt, engine objects)"),  # chosen, though arrays runs it
        (
            ["memory.retention.policy=tiered", "memory.reflection.enabled=true"],
            "decisions pmt, engine arrays)",
        ),
        (
            ["decision.policy=llm", "memory.retention.policy=tiered"],
            "decisions llm, engine objects (arrays does not implement decision.policy llm))",
        ),
        (
            # "Never forget": arrays would set aside 8 GB a household and end in a MemoryError.
            ["memory.episodic_capacity=1000000000"],
            (
                "engine objects (arrays does not implement memory capacities of 1,000,000,007 "
                "items a household (it sets aside every item's place when a run starts, up to "
                "8,192)))"
            ),
        ),
    ],
)
def test_validate_names_what_keeps_a_config_off_the_arrays_engine(capsys, overrides, engine):
    """engine: auto picks the slower object path for some configs: the summary says why."""
    sets = [arg for key in overrides for arg in ("--set", key)]
    code, out, _ = call(capsys, "validate", DEFAULT, *sets)
    assert code == 0
    assert out.rstrip("\n").endswith(engine)


def test_memory_capacities_past_what_arrays_sets_aside_run_on_objects(capsys, tmp_path):
    huge = ["--set", "memory.episodic_capacity=1000000000", "--out", tmp_path, "--quiet"]
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, *huge)
    assert code == 0, err
    assert "engine: objects" in (Path(out.strip()) / "config.resolved.yaml").read_text()
    line = assert_bad_input(*call(capsys, "run", DEFAULT, *SMALL, *huge, "--set", "engine=arrays"))
    assert "arrays does not implement memory capacities of 1,000,000,007 items" in line
    assert line.endswith("; use engine: objects (got 'arrays')")


# ------------------------------------------------------------------------------------ bad input
@dataclass(frozen=True)
class Case:
    """A broken config in tests/bad_inputs and what its error must name."""

    config: str
    culprit: str | None  # file under bad_inputs the message must name; None: the config itself
    keys: tuple[str, ...]  # key, field, line or value the message must name
    bug: str | None = None  # known bug: exit code, one line or nothing written is wrong
    message_bug: str | None = None  # known bug: the message misses the file or key

    @property
    def path(self) -> Path:
        return BAD / self.config

    @property
    def culprit_path(self) -> Path:
        return BAD / self.culprit if self.culprit else self.path


CASES = (
    Case("yaml_syntax_error.yaml", None, ("line 7", "YAML")),
    Case("top_level_list.yaml", None, ("top level", "list")),
    Case("unknown_key.yaml", None, ("memory.retrieval.strategi", "unknown key")),
    Case("wrong_type.yaml", None, ("memory.working_capacity", "ten")),
    Case("out_of_range.yaml", None, ("memory.decay_rate", "1.5")),
    Case(
        "decreasing_curve.yaml",
        "files/decreasing_curves.yaml",
        ("structure.damage_fraction", "non-decreasing"),
    ),
    Case(
        "curve_yaml_syntax_error.yaml",
        "files/curves_unclosed_brace.yaml",
        ("line 3",),
    ),
    Case(
        "registry_unknown_field.yaml",
        "files/registry_unknown_field.yaml",
        ("elevate_house", "preconditions[1]", "elevatd"),
    ),
    Case(
        "registry_unknown_placeholder.yaml",
        "files/registry_unknown_placeholder.yaml",
        ("buy_insurance", "memory.template", "premum"),
    ),
    Case(
        "registry_state_change.yaml",
        "files/registry_state_change.yaml",
        ("elevate_house", "allowed_state_changes", "flood_wall"),
    ),
    Case(
        "missing_registry.yaml",
        None,
        ("registry", "skill_regsitry.yaml"),
    ),
    Case("raster_missing_grid.yaml", None, ("hazard", "year 1", "no_such_depth_year1.asc")),
    Case(
        "raster_malformed_grid.yaml",
        "files/depth_year1_typo.asc",
        ("line 7", "O.5"),
    ),
    Case(
        "missing_household_table.yaml",
        None,
        ("households.table", "househods.csv"),
    ),
    Case(
        "malformed_household_table.yaml",
        "files/households_bad_income.csv",
        ("row 4", "income", "67k"),
    ),
)


def cases(bug_field: str) -> list:
    params = []
    for case in CASES:
        reason = getattr(case, bug_field)
        marks = [pytest.mark.xfail(strict=True, reason=f"bug: {reason}")] if reason else []
        params.append(pytest.param(case, id=case.config.removesuffix(".yaml"), marks=marks))
    return params


def test_cases_exist_in_the_corpus():
    # tests/test_bad_inputs.py covers the whole corpus; these are the CLI's own cases.
    assert {case.config for case in CASES} <= {p.name for p in BAD.glob("*.yaml")}


@pytest.mark.parametrize("case", cases("bug"))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(capsys, tmp_path, case):
    out_root = tmp_path / "out"
    code, out, err = call(capsys, "run", case.path, "--out", out_root)
    assert_bad_input(code, out, err)
    assert not out_root.exists() or list(out_root.iterdir()) == []


@pytest.mark.parametrize("case", cases("message_bug"))
def test_bad_input_message_names_the_file_and_key(capsys, tmp_path, case):
    _, _, err = call(capsys, "run", case.path, "--out", tmp_path)
    starts = (f"{ERROR_PREFIX}{case.culprit_path}: ", f"{ERROR_PREFIX}{case.path}: ")
    assert err.startswith(starts), err
    assert str(case.culprit_path) in err
    for key in case.keys:
        assert key in err


@pytest.mark.parametrize("case", cases("bug"))
def test_validate_rejects_bad_input(capsys, case):
    code, out, err = call(capsys, "validate", case.path)
    assert_bad_input(code, out, err)


@pytest.mark.parametrize(
    ("args", "named", "key"),
    [
        (["--set", "years=-1"], "--set years=-1", ": years: "),
        (["--set", "years"], "--set 'years'", "KEY=VALUE"),  # the flag alone: the file is fine
        (["--set", "memory.decay_rate=2"], "--set memory.decay_rate=2", ": memory.decay_rate: "),
        # Checked against the registry once the model is built: the flag gave the value.
        (
            ["--set", "memory.retrieval.top_k=20"],
            "--set memory.retrieval.top_k=20",
            ": memory.retrieval.top_k: top_k 20 exceeds max_retrieve 10 ",
        ),
        (
            ["--set", "households.colour=red"],
            "--set households.colour=red",
            ": households.colour: ",
        ),
        (["--seed", "-1"], "--seed -1", ": seed: "),
    ],
    ids=["negative-years", "no-equals", "decay-above-1", "top-k-above-registry", "unknown", "seed"],
)
def test_bad_override_exits_2(capsys, tmp_path, args, named, key):
    code, out, err = call(capsys, "run", DEFAULT, *SMALL, *args, "--out", tmp_path)
    line = assert_bad_input(code, out, err)
    assert line.startswith(f"{ERROR_PREFIX}{named}: ")
    assert key in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_bad_set_value_names_the_override_not_the_file(capsys, tmp_path, command):
    out = [] if command == "validate" else ["--out", tmp_path]
    code, output, err = call(capsys, command, DEFAULT, "--set", "years=abc", *out)
    line = assert_bad_input(code, output, err)
    assert line.startswith(f"{ERROR_PREFIX}--set years=abc: years: Input should be a valid integer")
    assert str(DEFAULT) not in line  # the file is right: the command line is to fix


EXPERIMENT = ROOT / "configs" / "experiments" / "decay_sweep.yaml"
CALIBRATION = ROOT / "configs" / "calibration" / "baseline.yaml"


@pytest.mark.parametrize(
    ("command", "path", "what", "use"),
    [
        ("batch", DEFAULT, "a run config (it sets years)", "floodsim run"),
        ("calibrate", DEFAULT, "a run config (it sets years)", "floodsim run"),
        ("run", EXPERIMENT, "an experiment file", "floodsim batch"),
        ("calibrate", EXPERIMENT, "an experiment file", "floodsim batch"),
        ("run", CALIBRATION, "a calibration file", "floodsim calibrate"),
        ("batch", CALIBRATION, "a calibration file", "floodsim calibrate"),
    ],
)
def test_a_file_for_another_command_names_the_right_one(capsys, tmp_path, command, path, what, use):
    code, out, err = call(capsys, command, path, "--out", tmp_path / "out")
    line = assert_bad_input(code, out, err)
    assert line.startswith(f"{ERROR_PREFIX}{path}: this is {what}, not ")
    assert line.endswith(f"; run it with {use}")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("out", ["", "  "])
@pytest.mark.parametrize(
    "command",
    [
        ["run", str(DEFAULT), *SMALL],
        ["batch", str(EXPERIMENT)],
        ["calibrate", str(CALIBRATION)],
        ["report", str(ROOT)],
        ["check-behaviour", str(ROOT), "--targets", str(ROOT / "configs" / "targets" / "x.yaml")],
    ],
    ids=lambda command: command[0],
)
def test_a_blank_out_folder_is_refused_not_read_as_the_current_one(
    capsys, tmp_path, monkeypatch, command, out
):
    # Most often an unset shell variable (--out "$OUT"): outputs would land where one stood.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*command, "--out", out])
    assert info.value.code == 2
    assert f"argument --out: expected a folder, got {out!r}" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_the_command_loads_no_model_code_before_a_subcommand_needs_it():
    # `floodsim --help`, `audit` and `report` never build a model: loading Mesa (with scipy
    # and networkx) for them would double their start-up time.
    probe = (
        "import sys, simulation.cli; "
        "print(' '.join(m for m in ('mesa', 'scipy', 'simulation.runner') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert out.strip() == ""


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        (["run", str(DEFAULT), "--se", "years=2"], "--se"),
        (["batch", str(EXPERIMENT), "--worker", "2"], "--worker"),
        (["audit", "summarize", str(ROOT), "--no-sch"], "--no-sch"),
        (["calibrate", str(CALIBRATION), "--resum"], "--resum"),
    ],
    ids=lambda value: value[0] if isinstance(value, list) else value,
)
def test_an_option_is_taken_only_by_its_whole_name(capsys, command, prefix):
    # argparse would read a prefix as the one option it begins: a script using one would
    # change meaning, or break, once a later release adds an option sharing the prefix.
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(command)
    assert info.value.code == 2
    assert f"unrecognized arguments: {prefix}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (["run", str(DEFAULT), "--seed", "abc"], "argument --seed: expected an integer, got 'abc'"),
        (["run", str(DEFAULT), "--seed", "\u0663"], "argument --seed: expected an integer"),
        (["batch"], "the following arguments are required: experiment"),
        (["run", str(DEFAULT), "--checkpoint-every", "0"], "argument --checkpoint-every: "),
        (["nope"], "argument command: invalid choice: 'nope'"),
    ],
    ids=["seed-text", "seed-arabic-digit", "missing-argument", "checkpoint-zero", "no-command"],
)
def test_a_command_line_mistake_is_one_line_as_every_bad_input_is(capsys, command, error):
    """argparse would print its usage block first; the line points to --help instead."""
    with pytest.raises(SystemExit) as info:
        main(command)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"floodsim: error: {error}")
    assert lines[0].endswith(" --help)")


def test_ctrl_c_while_the_command_line_is_read_is_one_line(monkeypatch, capsys):
    from simulation import cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["run", str(DEFAULT)]) == 130
    assert capsys.readouterr().err == "floodsim: interrupted\n"


@pytest.mark.parametrize("flag", [("--set", "memory.decay_rate=2"), ("--seed", "3")])
@pytest.mark.parametrize("path", [EXPERIMENT, CALIBRATION])
def test_validate_refuses_set_for_experiment_and_calibration_files(capsys, path, flag):
    # --set and --seed would be ignored there: the file has its own `set:` and `seed:`.
    code, out, err = call(capsys, "validate", path, *flag)
    line = assert_bad_input(code, out, err)
    own = "`set:`" if flag[0] == "--set" else "`seed:`"
    assert line.startswith(f"{ERROR_PREFIX}{path}: {flag[0]}: applies to run configs; "), line
    assert f"files have their own {own}" in line


def test_validate_names_floodsims_other_files_given_as_a_config(capsys, tmp_path):
    """A registry, a run's manifest or a batch's record: not 'unknown key' in a run config."""
    registry = Path(DEFAULT).parents[1] / "skill_registry.yaml"
    line = assert_bad_input(*call(capsys, "validate", registry))
    assert line == (
        f"{ERROR_PREFIX}{registry}: this is a skill registry, not a config; a run config names "
        "it with registry:"
    )
    code, out, _ = call(capsys, "run", DEFAULT, *SMALL, "--out", tmp_path, "--quiet")
    assert code == 0
    manifest = Path(out.strip().splitlines()[-1]) / "manifest.json"
    line = assert_bad_input(*call(capsys, "validate", manifest))
    assert line.startswith(f"{ERROR_PREFIX}{manifest}: this is a run's manifest, not a config")
    record = tmp_path / "experiment.json"
    record.write_text('{"schema_version": 1, "experiment": {}, "runs": []}', encoding="utf-8")
    line = assert_bad_input(*call(capsys, "batch", record, "--out", tmp_path / "b"))
    assert line.startswith(f"{ERROR_PREFIX}{record}: this is a batch's record (experiment.json)")


def test_validate_refuses_a_seed_for_a_targets_file_without_pointing_to_a_set(capsys):
    targets = Path(DEFAULT).parent / "targets" / "stylized_facts.yaml"
    code, out, err = call(capsys, "validate", targets, "--seed", "3")
    line = assert_bad_input(code, out, err)
    assert line == f"{ERROR_PREFIX}{targets}: --seed: applies to run configs, not to a targets file"


def test_validate_takes_the_seed_and_overrides_that_run_would(capsys):
    assert main(["validate", str(DEFAULT), "--seed", "7", "--set", "years=4"]) == 0
    assert "4 years" in capsys.readouterr().out
    code, out, err = call(capsys, "validate", DEFAULT, "--seed", "-1")
    assert "seed" in assert_bad_input(code, out, err)


def test_a_batch_output_folder_that_cannot_exist_exits_2(capsys, tmp_path):
    # test_checkpoint covers `run`; a batch checks its folder once every run is planned.
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder", encoding="utf-8")
    out = blocker / "out"
    code, output, err = call(capsys, "batch", EXPERIMENT, "--out", out, "--quiet")
    line = assert_bad_input(code, output, err)
    assert f"{out}" in line
    assert "cannot create the output folder" in line


@pytest.mark.parametrize("command", ["validate", "run", "batch", "calibrate"])
@pytest.mark.parametrize("text", ["", "# settings to come\n"], ids=["0-bytes", "comments"])
def test_an_empty_file_exits_2_saying_it_is_empty(capsys, tmp_path, command, text):
    empty = tmp_path / "empty.yaml"
    empty.write_text(text, encoding="utf-8")
    out = [] if command == "validate" else ["--out", tmp_path / "out"]
    code, output, err = call(capsys, command, empty, *out)
    line = assert_bad_input(code, output, err)
    assert (
        line == f"{ERROR_PREFIX}{empty}: the file is empty (nothing but blank lines and comments)"
    )
    assert not (tmp_path / "out").exists()


ENABLED_1 = "memory.reflection.enabled: Input should be a valid boolean (got 1)"


@pytest.mark.parametrize(
    ("setting", "named", "problem"),
    [
        (["--set", "memory.reflection.enabled=1"], "--set memory.reflection.enabled=1", ENABLED_1),
        ([], None, ENABLED_1),  # in the file
        (["--set", 'years="10"'], '--set years="10"', "years: Input should be a valid integer"),
    ],
    ids=["set-bool", "file-bool", "set-quoted-int"],
)
def test_a_number_for_a_boolean_or_a_string_for_a_number_exits_2(
    capsys, tmp_path, setting, named, problem
):
    config = tmp_path / "c.yaml"
    config.write_text(f"base: {DEFAULT}\nmemory: {{reflection: {{enabled: 1}}}}\n", "utf-8")
    code, out, err = call(capsys, "validate", DEFAULT if setting else config, *setting)
    line = assert_bad_input(code, out, err)
    assert line.startswith(f"{ERROR_PREFIX}{named or config}: {problem}")


LLM_SCENARIO = ROOT / "configs" / "scenarios" / "llm_households.yaml"
LLM_IGNORED = (
    "decision.llm.mode and decision.llm.cache are ignored because decision.policy is pmt, not llm"
)


def test_llm_settings_under_another_policy_print_one_warning(capsys):
    code, out, err = call(capsys, "validate", LLM_SCENARIO, "--set", "decision.policy=pmt")
    assert code == 0, err
    assert "decisions pmt" in out
    assert err.splitlines() == [f"floodsim: warning: {LLM_SCENARIO}: {LLM_IGNORED}"]
    code, out, err = call(capsys, "validate", LLM_SCENARIO)  # policy llm reads them
    assert (code, err) == (0, "")


def test_an_experiment_warns_once_of_llm_settings_its_points_ignore(capsys, tmp_path):
    experiment = tmp_path / "exp.yaml"
    experiment.write_text(
        f"name: llm_off\nbase: {LLM_SCENARIO}\n"
        "set: {decision.policy: pmt, households.count: 8, years: 2}\n"
        # Two damage curve sets: each design point's files are checked with a model of its own.
        "sweep: {grid: {damage.curves: [usace_one_story_no_basement, jrc_north_america]}}\n"
        "replicates: 2\nexecutor: {kind: serial}\n",
        encoding="utf-8",
    )
    code, out, err = call(capsys, "validate", experiment)
    assert code == 0, err
    assert "2 design points" in out
    assert err.splitlines() == [f"floodsim: warning: {experiment}: {LLM_IGNORED}"]


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ("memory.retrieval.w_recency=2", "memory.retrieval: w_recency: only read by strategy"),
        ("social.k=4", "social.k: only read by neighborhood small_world (neighborhood is moore)"),
    ],
)
def test_a_setting_the_configured_strategy_would_not_read_exits_2(capsys, override, problem):
    code, out, err = call(capsys, "validate", DEFAULT, "--set", override)
    assert problem in assert_bad_input(code, out, err)


def test_missing_config_file_exits_2(capsys, tmp_path):
    missing = tmp_path / "no_such.yaml"
    code, out, err = call(capsys, "run", missing, "--out", tmp_path / "out")
    line = assert_bad_input(code, out, err)
    assert line.startswith(f"{ERROR_PREFIX}{missing}: ")
    assert not (tmp_path / "out").exists()


def test_a_folder_given_as_the_config_is_named_as_one(capsys, tmp_path):
    run_dir = tmp_path / "default-s42-12345678"
    run_dir.mkdir()
    code, out, err = call(capsys, "validate", run_dir)
    assert (
        assert_bad_input(code, out, err) == f"{ERROR_PREFIX}{run_dir}: a folder, not a config file"
    )
    (run_dir / "config.resolved.yaml").write_text("name: x\n", encoding="utf-8")
    code, out, err = call(capsys, "run", run_dir, "--out", tmp_path / "out")
    line = assert_bad_input(code, out, err)
    assert line == (
        f"{ERROR_PREFIX}{run_dir}: a run directory, not a config file: run its config again with "
        f"floodsim run {run_dir / 'config.resolved.yaml'}, or continue it with "
        f"floodsim run --resume {run_dir}"
    )
    assert not (tmp_path / "out").exists()


def test_a_file_of_a_run_directory_that_became_a_folder_is_bad_input(capsys, tmp_path, monkeypatch):
    from simulation.model import FloodAdaptationModel

    step = FloodAdaptationModel.step

    def interrupted_in_year_3(model: FloodAdaptationModel) -> None:
        if model.steps < 3:  # Mesa counts the step being taken before calling it
            step(model)
            return
        raise KeyboardInterrupt

    monkeypatch.setattr(FloodAdaptationModel, "step", interrupted_in_year_3)
    argv = ["run", str(DEFAULT), "--out", str(tmp_path), "--set", "households.count=30"]
    assert main([*argv, "--set", "years=4", "--checkpoint-every", "1", "--quiet"]) == 130
    (run_dir,) = tmp_path.iterdir()
    checkpoint = run_dir / "checkpoint.json"
    checkpoint.unlink()
    checkpoint.mkdir()
    capsys.readouterr()
    code, out, err = call(capsys, "run", "--resume", run_dir)
    assert assert_bad_input(code, out, err) == f"{ERROR_PREFIX}{checkpoint}: Is a directory"


@pytest.mark.parametrize(
    ("error", "code", "line"),
    [
        (
            PermissionError(errno.EACCES, "Permission denied", "in/x.csv"),
            2,
            "in/x.csv: Permission denied",
        ),
        (NotADirectoryError(errno.ENOTDIR, "Not a directory", "a/b"), 2, "a/b: Not a directory"),
        (OSError(errno.EROFS, "Read-only file system", "out"), 2, "out: Read-only file system"),
        (
            OSError(errno.ENOSPC, "No space left on device", "o/f"),
            1,
            "No space left on device (o/f)",
        ),
        (OSError(errno.EIO, "Input/output error"), 1, "Input/output error"),
        # multiprocessing on a host whose /dev/shm refuses semaphores: no path to mend
        (PermissionError(errno.EACCES, "Permission denied"), 1, "Permission denied"),
    ],
    ids=["permission", "not-a-folder", "read-only", "disk-full", "device", "no-path-named"],
)
def test_a_path_that_cannot_be_used_is_bad_input_and_a_failing_machine_is_not(
    capsys, tmp_path, monkeypatch, error, code, line
):
    """Exit 2 tells a script to mend its arguments; 1 that the same command can be rerun."""
    import simulation.runner

    def failing(*_: object) -> None:
        raise error

    monkeypatch.setattr(simulation.runner, "build_model", failing)
    assert main(["run", str(DEFAULT), "--out", str(tmp_path / "out")]) == code
    assert capsys.readouterr().err == f"{ERROR_PREFIX}{line}\n"


def test_a_run_directory_made_unwritable_while_the_run_goes_can_be_resumed(
    capsys, tmp_path, monkeypatch
):
    from simulation.model import FloodAdaptationModel

    def refused(_: FloodAdaptationModel) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", "x")

    monkeypatch.setattr(FloodAdaptationModel, "step", refused)
    assert main(["run", str(DEFAULT), "--out", str(tmp_path), "--quiet"]) == 1
    (run_dir,) = tmp_path.iterdir()
    err = capsys.readouterr().err
    assert err == (
        f"{ERROR_PREFIX}Permission denied (x); run directory: {run_dir}, resume with: "
        f"floodsim run --resume {run_dir}\n"
    )


def test_a_batch_folder_made_unwritable_while_the_batch_goes_can_be_resumed(
    capsys, tmp_path, monkeypatch
):
    """Exit 1, not 2: the command was right, and --resume continues it once mended."""
    from simulation.experiments import batch

    experiment = tmp_path / "tiny.yaml"
    experiment.write_text(
        f"name: tiny\nbase: {DEFAULT}\nset: {{households.count: 20, years: 2}}\n"
        "sweep: {grid: {memory.decay_rate: [0.8, 0.9]}}\nreplicates: 1\nseed: 1\n"
        "executor: {kind: serial}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    write_json, writes = batch._write_json, []

    def refused_after_the_first(path: Path, data: dict) -> None:
        writes.append(path)
        if len(writes) > 1:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        write_json(path, data)

    monkeypatch.setattr(batch, "_write_json", refused_after_the_first)
    assert main(["batch", str(experiment), "--out", str(out), "--quiet"]) == 1
    assert capsys.readouterr().err == (
        f"{ERROR_PREFIX}Permission denied ({out / 'experiment.json'}); results so far in {out}: "
        "continue with the same command and --resume (complete runs are kept)\n"
    )
    monkeypatch.setattr(batch, "_write_json", write_json)
    assert main(["batch", str(experiment), "--out", str(out), "--quiet", "--resume"]) == 0
    assert "2 of 2 runs complete (1 kept from an earlier attempt)" in capsys.readouterr().out


# ----------------------------------------------------------------------------------- memory-demo
def test_memory_demo(capsys):
    code, out, err = call(capsys, "memory-demo")
    assert code == 0, err
    assert "retrieved for next year's decision" in out
    retrieved = re.findall(r"^\s+\d\.\d{3} \[(\w+)\s*\] Year \d+: .+$", out, flags=re.MULTILINE)
    assert {"working", "episodic"} <= set(retrieved)
    assert "flood" in out
    assert "reflection:" in out
    assert out.rstrip().splitlines()[-1].startswith("CognitiveMemory(")


# ------------------------------------------------------------------------ the real console script
def floodsim_command() -> list[str]:
    script = Path(sys.executable).with_name("floodsim")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "simulation.cli"]


def test_console_script_exit_codes(tmp_path):
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    good = subprocess.run(
        [*floodsim_command(), "run", str(DEFAULT), *SMALL, "--out", "out", "--quiet"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert good.returncode == 0, good.stderr
    run_dir = tmp_path / good.stdout.strip()
    assert (run_dir / "manifest.json").is_file()

    bad = subprocess.run(
        [sys.executable, "-m", "simulation.cli", "run", str(BAD / "unknown_key.yaml")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.splitlines() == [
        f"{ERROR_PREFIX}{BAD / 'unknown_key.yaml'}: memory.retrieval.strategi: unknown key"
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_ctrl_c_to_a_process_batch_leaves_one_line_and_no_run_going(tmp_path):
    """Ctrl-C reaches the terminal's whole foreground group: the batch and its workers."""
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\n"
        "set: {households.count: 3000, years: 100, audit.level: minimal}\n"
        "replicates: 2\nseed: 1\nexecutor: {kind: process, workers: 2}\n",
        encoding="utf-8",
    )
    manifests = [tmp_path / "out" / "runs" / f"p000-r00{n}" / "manifest.json" for n in (0, 1)]
    batch = subprocess.Popen(
        [*floodsim_command(), "batch", str(path), "--out", str(tmp_path / "out"), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # a group of its own, as a terminal's foreground job has
    )
    give_up = time.monotonic() + 120
    while not all(m.exists() for m in manifests):  # both workers in a run
        assert batch.poll() is None, batch.stderr.read().decode()
        assert time.monotonic() < give_up, "the runs did not start"
        time.sleep(0.02)
    os.killpg(batch.pid, signal.SIGINT)
    _, err = batch.communicate(timeout=120)
    assert batch.returncode == 130
    assert err.decode() == (  # no worker's traceback or warning after it
        "floodsim: interrupted; continue with the same command and --resume (complete runs are "
        "kept)\n"
    )
    # Killed, not waited for (a run takes seconds): --resume runs them again.
    assert [json.loads(m.read_text())["status"] for m in manifests] == ["running", "running"]


def test_ctrl_c_to_a_dask_batch_leaves_one_line_no_worker_and_a_batch_to_resume(tmp_path):
    """As for the process pool, with the LocalCluster a dask batch starts for itself."""
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("distributed")
    path = tmp_path / "exp.yaml"
    # Runs of a few seconds each: one worker may start its run a second after the other, and
    # the first must still be running when the second's manifest appears.
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\n"
        "set: {households.count: 5000, years: 100, audit.level: minimal}\n"
        "replicates: 2\nseed: 1\nexecutor: {kind: dask, workers: 2}\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    manifests = [out / "runs" / f"p000-r00{n}" / "manifest.json" for n in (0, 1)]
    command = [*floodsim_command(), "batch", str(path), "--out", str(out), "--quiet"]
    batch = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    give_up = time.monotonic() + 120
    while not all(m.exists() for m in manifests):  # both workers in a run
        assert batch.poll() is None, batch.stderr.read().decode()
        assert time.monotonic() < give_up, "the runs did not start"
        time.sleep(0.02)
    children = psutil.Process(batch.pid).children(recursive=True)  # workers, resource tracker
    os.killpg(batch.pid, signal.SIGINT)
    interrupted_at = time.monotonic()
    _, err = batch.communicate(timeout=120)
    took = time.monotonic() - interrupted_at
    assert batch.returncode == 130
    assert err.decode() == (  # nothing from distributed or its workers
        "floodsim: interrupted; continue with the same command and --resume (complete runs are "
        "kept)\n"
    )
    assert took < 5, f"{took:.1f} s to stop"
    _, alive = psutil.wait_procs(children, timeout=5)
    assert alive == []
    assert [json.loads(m.read_text())["status"] for m in manifests] == ["running", "running"]
    runs = json.loads((out / "experiment.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["pending", "pending"]

    resumed = subprocess.run(
        [*command, "--resume"], capture_output=True, text=True, timeout=300, check=False
    )
    assert resumed.returncode == 0, resumed.stderr
    runs = json.loads((out / "experiment.json").read_text())["runs"]
    assert [r["status"] for r in runs] == ["complete", "complete"]


#: The console command, started as its entry point starts it (its SIGTERM handler included).
LAUNCHER = [sys.executable, "-c", "from simulation.launcher import main; raise SystemExit(main())"]


def _wait_for(paths: list[Path], process: subprocess.Popen) -> None:
    """Wait until every one of ``paths`` exists, failing if ``process`` ends first."""
    give_up = time.monotonic() + 120
    while not all(path.exists() for path in paths):
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < give_up, f"{paths} did not appear"
        time.sleep(0.02)


def test_sigterm_to_a_run_ends_it_as_ctrl_c_does_resumable(tmp_path):
    """A scheduler's time limit sends SIGTERM: one line, exit 143, and the run resumes."""
    argv = ["run", str(DEFAULT), "--out", str(tmp_path), "--set", "households.count=2000"]
    argv += ["--set", "years=200", "--checkpoint-every", "1", "--quiet"]
    run = subprocess.Popen([*LAUNCHER, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    give_up = time.monotonic() + 120
    while not list(tmp_path.glob("*/checkpoint.json")):
        assert run.poll() is None, run.stderr.read().decode()
        assert time.monotonic() < give_up, "no checkpoint was written"
        time.sleep(0.02)
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=120)
    (run_dir,) = tmp_path.iterdir()
    assert run.returncode == 143
    assert err.decode() == (
        f"floodsim: terminated; continue it with: floodsim run --resume {run_dir} (from its last "
        "checkpoint, or from the start without one)\n"
    )
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "failed"


def _slow_batch(tmp_path: Path) -> tuple[Path, list[Path]]:
    """A process batch of two long runs, and the manifests its runs write when they start."""
    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\n"
        "set: {households.count: 3000, years: 100, audit.level: minimal}\n"
        "replicates: 4\nseed: 1\nexecutor: {kind: process, workers: 2}\n",
        encoding="utf-8",
    )
    runs = tmp_path / "out" / "runs"
    return path, [runs / f"p000-r00{n}" / "manifest.json" for n in (0, 1)]


def _started_slow_batch(tmp_path: Path) -> subprocess.Popen[bytes]:
    """:func:`_slow_batch` started as a floodsim process, once its first runs have begun."""
    path, manifests = _slow_batch(tmp_path)
    argv = ["batch", str(path), "--out", str(tmp_path / "out"), "--quiet"]
    batch = subprocess.Popen([*LAUNCHER, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_for(manifests, batch)
    return batch


def test_sigterm_to_a_process_batch_stops_its_workers_and_says_how_to_continue(tmp_path):
    psutil = pytest.importorskip("psutil")
    batch = _started_slow_batch(tmp_path)
    workers = psutil.Process(batch.pid).children(recursive=True)
    batch.send_signal(signal.SIGTERM)  # the batch's process alone, as `kill PID` sends it
    _, err = batch.communicate(timeout=120)
    assert batch.returncode == 143
    assert err.decode() == (
        "floodsim: terminated; continue with the same command and --resume (complete runs are "
        "kept)\n"
    )
    _assert_ended(psutil, workers)


def _assert_ended(psutil: Any, workers: list[Any]) -> None:
    """Assert that ``workers`` end within 10 s; kill those that do not, not to leak them."""
    _, alive = psutil.wait_procs(workers, timeout=10)
    for worker in alive:
        worker.kill()
    assert alive == []


def test_a_batch_killed_outright_takes_its_workers_with_it(tmp_path):
    """SIGKILL runs no cleanup: the kernel ends the workers, which would go on writing runs."""
    psutil = pytest.importorskip("psutil")
    batch = _started_slow_batch(tmp_path)
    workers = [
        worker
        for worker in psutil.Process(batch.pid).children()
        if "resource_tracker" not in " ".join(worker.cmdline())
    ]
    assert len(workers) == 2
    batch.kill()
    batch.communicate(timeout=120)
    _assert_ended(psutil, workers)


def test_ctrl_c_early_in_a_resume_still_says_how_to_continue(capsys, tmp_path, monkeypatch):
    import simulation.runner
    from simulation.model import FloodAdaptationModel

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(FloodAdaptationModel, "step", interrupted)
    argv = ["run", str(DEFAULT), "--out", str(tmp_path), "--set", "households.count=30"]
    assert main([*argv, "--set", "years=3"]) == 130
    (run_dir,) = tmp_path.iterdir()
    capsys.readouterr()
    monkeypatch.setattr(simulation.runner, "build_model", interrupted)  # before the run goes
    assert main(["run", "--resume", str(run_dir)]) == 130
    assert capsys.readouterr().err == (
        f"floodsim: interrupted; continue it with: floodsim run --resume {run_dir} (from its "
        "last checkpoint, or from the start without one)\n"
    )


def test_ctrl_c_during_a_run_says_how_to_continue_it(capsys, tmp_path, monkeypatch):
    from simulation.model import FloodAdaptationModel

    step = FloodAdaptationModel.step

    def interrupted_in_year_2(model: FloodAdaptationModel) -> None:
        if model.steps == 1:  # Mesa counts the step being taken before calling it
            step(model)
            return
        raise KeyboardInterrupt

    monkeypatch.setattr(FloodAdaptationModel, "step", interrupted_in_year_2)
    argv = ["run", str(DEFAULT), "--out", str(tmp_path), "--set", "households.count=30"]
    assert main([*argv, "--set", "years=3", "--checkpoint-every", "1"]) == 130
    err = capsys.readouterr().err.strip()
    (run_dir,) = tmp_path.iterdir()
    assert err == (
        f"floodsim: interrupted; continue it with: floodsim run --resume {run_dir} (from its "
        "last checkpoint, or from the start without one)"
    )
    monkeypatch.setattr(FloodAdaptationModel, "step", step)
    assert main(["run", "--resume", str(run_dir)]) == 0
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "complete"


def test_ctrl_c_before_the_run_directory_exists_points_to_none(capsys, tmp_path, monkeypatch):
    import simulation.runner

    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(simulation.runner, "build_model", interrupted)
    assert main(["run", str(DEFAULT), "--out", str(tmp_path / "out")]) == 130
    err = capsys.readouterr().err.strip()
    assert err == "floodsim: interrupted before its run directory was written"
    assert not (tmp_path / "out").exists()


def test_ctrl_c_during_a_batch_says_how_to_continue_it(capsys, tmp_path, monkeypatch):
    from simulation.experiments import executors

    def interrupted(task: executors.RunTask) -> executors.RunOutcome:
        raise KeyboardInterrupt

    path = tmp_path / "exp.yaml"
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\nset: {{households.count: 30, years: 2}}\n"
        "replicates: 2\nseed: 1\nexecutor: {kind: serial}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(executors, "execute_run", interrupted)
    assert main(["batch", str(path), "--out", str(tmp_path / "out")]) == 130
    assert capsys.readouterr().err.strip() == (
        "floodsim: interrupted; continue with the same command and --resume (complete runs are "
        "kept)"
    )


def test_ctrl_c_during_a_calibration_says_how_to_continue_it(capsys, tmp_path, monkeypatch):
    from simulation.calibration import fit

    def interrupted(*_: object, **__: object) -> None:
        raise KeyboardInterrupt

    path = tmp_path / "calibration.yaml"
    path.write_text(
        f"name: tiny\nbase: {DEFAULT}\nset: {{households.count: 30, years: 16}}\n"
        f"targets: {ROOT / 'configs' / 'targets' / 'stylized_facts.yaml'}\n"
        "parameters: {memory.decay_rate: {start: 0.9, low: 0.7, high: 0.99}}\n"
        "replicates: 1\nmax_evaluations: 2\nexecutor: {kind: serial}\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(fit, "run_experiment", interrupted)
    assert main(["calibrate", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "floodsim: interrupted; continue with the same command and --resume (finished "
        "evaluations are read back)"
    )


def test_the_command_line_loads_plotting_and_statistics_only_when_a_command_needs_them() -> None:
    """matplotlib and scipy.stats take most of a second to import: `floodsim run` and
    `validate` never draw or fit, so they must not wait for them."""
    heavy = "{'matplotlib', 'scipy.stats'}"
    probe = f"import sys, simulation.cli; print(sorted({heavy} & set(sys.modules)))"
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert loaded.strip() == "[]"


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path: Path) -> None:
    """`floodsim run ... | head -0`: exit 141 (SIGPIPE's code), no error, no traceback.

    The reader is gone before the first line: closing it after a line would race the run,
    which may print everything into the pipe's buffer and exit 0 first.
    """
    command = [sys.executable, "-u", "-m", "simulation.cli", "run", str(DEFAULT)]
    command += ["--set", "households.count=30", "--set", "years=3", "--out", str(tmp_path)]
    reader, writer = os.pipe()
    os.close(reader)
    try:
        process = subprocess.run(
            command,
            stdout=writer,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(writer)
    assert process.returncode == 141
    assert process.stderr == b""


def test_a_few_fallbacks_are_not_reported_as_none() -> None:
    import pandas as pd

    from simulation.runner import fallback_summary

    metrics = pd.DataFrame(
        {
            "invalid_proposals": [5, 0],
            "decisions_do_nothing": [990, 992],
            "decisions_relocate": [5, 5],
        }
    )
    assert "5 of 1,992 decisions (0.3%) fell back" in fallback_summary(metrics, "do_nothing")
    metrics["invalid_proposals"] = [500, 496]
    assert "996 of 1,992 decisions (50%) fell back" in fallback_summary(metrics, "do_nothing")


@pytest.mark.parametrize(
    ("signal_it", "code", "said"),
    [
        ("raise KeyboardInterrupt", 130, "interrupted"),
        ("os.kill(os.getpid(), signal.SIGTERM)", 143, "terminated"),
    ],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_while_floodsim_loads_ends_the_command_quietly(signal_it, code, said) -> None:
    """The console command's entry point imports the CLI, a second's work a signal may cut."""
    script = (
        "import builtins, os, signal, sys\n"
        "real = builtins.__import__\n"
        "def signalled(name, *args, **kwargs):\n"
        "    if name == 'simulation.cli':\n"
        f"        {signal_it}\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = signalled\n"
        "from simulation.launcher import main\n"
        "sys.exit(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True
    )
    assert (done.returncode, done.stderr, done.stdout) == (code, f"floodsim: {said}\n", "")


def test_the_console_command_is_the_launcher_and_runs_the_cli() -> None:
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert scripts["floodsim"] == "simulation.launcher:main"
    launch = "from simulation.launcher import main; raise SystemExit(main())"
    done = subprocess.run(
        [sys.executable, "-c", launch, "--help"], check=False, capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "usage: floodsim" in done.stdout


# ------------------------------------------------------------------------------- README
def readme_commands() -> list[list[str]]:
    """The arguments of every ``floodsim`` command in the README's code blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [
        shlex.split(line, comments=True)[1:]
        for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
        for line in block.splitlines()
        if line.startswith("floodsim ")
    ]


@pytest.mark.parametrize("argv", readme_commands(), ids=" ".join)
def test_the_readmes_commands_take_the_flags_and_files_they_show(argv, capsys, monkeypatch):
    # Readers copy these lines: a flag renamed or a config key moved would fail them first.
    monkeypatch.chdir(ROOT)
    args = build_parser().parse_args(argv)  # argparse exits 2 on a flag it does not know
    shipped = [a for a in argv if a.startswith("configs/")]
    for path in shipped:
        assert (ROOT / path).is_file(), path
    if args.command in ("run", "validate") and args.config is not None:
        checked = ["validate", args.config, *(f"--set={s}" for s in args.set)]
        checked += [] if args.seed is None else ["--seed", str(args.seed)]
    elif args.command in ("batch", "calibrate"):
        checked = ["validate", args.experiment if args.command == "batch" else args.file]
    elif args.command == "check-behaviour":
        checked = ["validate", args.targets]
    else:  # reads a run directory that the README's earlier commands would have written
        assert not shipped, argv
        return
    code, _, err = call(capsys, *checked)
    assert code == 0, err


def test_the_readmes_run_directory_is_the_one_make_run_writes():
    """Its report, audit, notebook and resume lines are copied as they stand: the registry or
    the default config edited changes the id, and the README must follow."""
    shown = set(re.findall(r"default-s\d+-[0-9a-f]{8}", (ROOT / "README.md").read_text("utf-8")))
    assert shown == {default_run_id(*load_config(ROOT / "configs" / "default.yaml"))}


def test_the_readme_shows_every_subcommand():
    shown = {argv[0] for argv in readme_commands()}
    assert shown >= {"run", "validate", "batch", "report", "audit", "check-behaviour", "calibrate"}

"""Checkpoints and resume: killed, failed and resumed runs end with the outputs of a clean run."""

from __future__ import annotations

import errno
import gzip
import os
import random
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import simulation.checkpoint as checkpoint_module
import simulation.runner as runner_module
from simulation.audit import writer as audit_writer
from simulation.audit.commands import summarize_run
from simulation.checkpoint import CHECKPOINT_FILE, read_checkpoint
from simulation.cli import main
from simulation.code_digest import code_digest
from simulation.config import ConfigWarning, load_config
from simulation.runner import build_model, config_hash, resume_run, run_simulation, same_config

if TYPE_CHECKING:
    from collections.abc import Callable

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
SETTINGS_YEARS = 9
SETTINGS = ["households.count=150", f"years={SETTINGS_YEARS}", "audit.timestamps=false"]
# Manifest fields that record wall-clock time or the history of the attempt, not the results.
ATTEMPT_FIELDS = {
    "started_at",
    "finished_at",
    "duration_s",
    "resumed",
    "checkpoint_every",
    "checkpoint_year",
}


def manifest(run_dir: Path) -> dict:
    return orjson.loads((run_dir / "manifest.json").read_bytes())


def assert_same_outputs(expected: Path, got: Path) -> None:
    names = sorted(p.name for p in expected.iterdir())
    assert sorted(p.name for p in got.iterdir()) == names
    for name in names:
        if name == "manifest.json":
            a, b = manifest(expected), manifest(got)
            assert {k: v for k, v in a.items() if k not in ATTEMPT_FIELDS} == {
                k: v for k, v in b.items() if k not in ATTEMPT_FIELDS
            }
        else:  # gzip streams too: their members end at year ends, whatever was checkpointed
            wanted, written = (expected / name).read_bytes(), (got / name).read_bytes()
            if wanted != written:
                pytest.fail(_difference(name, wanted, written))


def _difference(name: str, wanted: bytes, written: bytes) -> str:
    """Where two files differ: the first line that does, or only a gzip stream's compression.

    Byte-identical gzip streams differed once in CI and never again: this says what differed.
    """
    if name.endswith(".gz"):
        wanted, written = gzip.decompress(wanted), gzip.decompress(written)
        if wanted == written:
            return f"{name}: the same lines, compressed to other bytes"
    pairs = zip(wanted.splitlines(), written.splitlines(), strict=False)
    for number, (line, other) in enumerate(pairs, 1):
        if line != other:
            return f"{name}: line {number}: {line!r} != {other!r}"
    return f"{name}: {len(wanted)} bytes != {len(written)} bytes"


def clean_run(tmp_path: Path, *extra: str):
    config, base = load_config(DEFAULT, [*SETTINGS, *extra])
    return run_simulation(config, base, tmp_path / "clean", progress=False)


def interrupted_run(tmp_path: Path, stop_after: int, *extra: str, error=KeyboardInterrupt):
    """Run with checkpoints every 2 years and raise ``error`` after year ``stop_after``."""
    config, base = load_config(DEFAULT, [*SETTINGS, *extra])
    model = build_model(config, base)
    step = model.step

    def failing_step() -> None:
        step()
        if model.steps == stop_after:
            raise error("simulated crash")

    model.step = failing_step
    with pytest.raises(error):
        run_simulation(
            config, base, tmp_path / "crash", progress=False, model=model, checkpoint_every=2
        )
    (run_dir,) = (tmp_path / "crash").iterdir()
    return run_dir


@pytest.mark.parametrize(
    "extra",
    [
        (),
        ("audit.gzip=true",),
        ("audit.level=full",),
        # Every home in the floodplain: zone X's take-up is NaN every year (JSON has no NaN).
        ("households.bfe_ft=100",),
        ("memory.retention.policy=tiered", "memory.retention.demote_below=0.6"),
        ("memory.reflection.enabled=true",),
        # Nobody audited: no line in any year, so no gzip member to start either.
        ("audit.gzip=true", "audit.sample=0.001"),
    ],
    ids=["standard", "gzip", "full", "nan-metrics", "tiered", "reflection", "gzip-nobody-sampled"],
)
def test_resume_from_checkpoint_gives_identical_outputs(tmp_path, extra):
    clean = clean_run(tmp_path, *extra)
    run_dir = interrupted_run(tmp_path, 5, *extra)
    assert manifest(run_dir)["status"] == "failed"
    assert "simulated crash" in manifest(run_dir)["error"]
    assert read_checkpoint(run_dir)["year"] == 4
    resumed = resume_run(run_dir, progress=False)
    assert manifest(run_dir)["status"] == "complete"
    assert manifest(run_dir)["resumed"] == 1
    assert not (run_dir / CHECKPOINT_FILE).exists()
    assert resumed.metrics.equals(clean.metrics)
    assert_same_outputs(clean.run_dir, run_dir)
    # What the checkpoint held came back as the model keeps it (JSON null is not NaN).
    for values in resumed.model.datacollector.model_vars.values():
        assert all(isinstance(v, (int, float)) for v in values)


def test_a_run_interrupted_before_households_csv_existed_has_it_once_resumed(tmp_path):
    """A run started by code that wrote no households.csv gets one, as a fresh run has it."""
    clean = clean_run(tmp_path)
    run_dir = interrupted_run(tmp_path, 5)
    (run_dir / "households.csv").unlink()
    resume_run(run_dir, progress=False)
    assert_same_outputs(clean.run_dir, run_dir)


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_households_that_moved_away_keep_their_latest_decision_across_a_resume(tmp_path, engine):
    # A household that relocates decides no more: after a resume, what it decided last can come
    # only from the checkpoint.
    extra = ("decision.pmt.asc.relocate=-1.0", f"engine={engine}")
    clean = clean_run(tmp_path, *extra)
    moved = [h for h in clean.model.households if h.relocated_in is not None]
    assert any(h.relocated_in <= 4 for h in moved)  # before the checkpoint of year 4
    run_dir = interrupted_run(tmp_path, 5, *extra)
    resumed = resume_run(run_dir, progress=False)
    for expected, got in zip(clean.model.households, resumed.model.households, strict=True):
        assert got.last_decision == expected.last_decision, expected.state.agent_id


def test_gzip_streams_do_not_depend_on_the_checkpoint_schedule(tmp_path):
    config, base = load_config(DEFAULT, [*SETTINGS, "audit.gzip=true"])
    plain = run_simulation(config, base, tmp_path / "plain", progress=False)
    checked = run_simulation(config, base, tmp_path / "checked", progress=False, checkpoint_every=2)
    assert_same_outputs(plain.run_dir, checked.run_dir)
    for stream in plain.run_dir.glob("*.jsonl.gz"):  # one gzip member per year
        assert gzip.decompress(stream.read_bytes()).count(b"\n") > 0
        assert stream.read_bytes().count(b"\x1f\x8b\x08") >= SETTINGS_YEARS


def test_an_unfinished_run_rebuilds_memory_only_for_the_years_it_reached(tmp_path, capsys):
    # The run fails in year 5's step: the manifest vouches for years up to 4 only.
    run_dir = interrupted_run(tmp_path, 5)
    assert manifest(run_dir)["year_reached"] == 4
    agent = ["--agent", "H00001"]
    assert main(["audit", "memory", str(run_dir), *agent, "--year", "4"]) == 0
    capsys.readouterr()
    for year in ("5", "6"):
        assert main(["audit", "memory", str(run_dir), *agent, "--year", year]) == 2
        err = capsys.readouterr().err
        assert (
            f"the run is failed and its audit streams are whole up to year 4, got year {year}"
            in err
        )
    # The trail is whole as far as the run got; the summary says the run is unfinished.
    summary = summarize_run(run_dir)
    assert summary.ok, summary.format()
    assert summary.audit["level"] == "standard"
    assert "the run is failed, not complete" in summary.format()


def test_the_summary_of_a_run_stopped_during_a_year_checks_the_years_written_whole(tmp_path):
    run_dir = interrupted_run(tmp_path, 5)
    # As if it had been killed during year 5's year-end pass: part of the year is missing.
    consolidation = run_dir / "consolidation.jsonl"
    lines = consolidation.read_bytes().splitlines(keepends=True)
    assert orjson.loads(lines[-1])["year"] == 5
    consolidation.write_bytes(b"".join(lines[:-40]))
    summary = summarize_run(run_dir)
    assert summary.ok, summary.format()
    assert "up to year 4 (the last written whole)" in summary.format()


@pytest.mark.parametrize("extra", [(), ("audit.gzip=true",)], ids=["plain", "gzip"])
def test_a_run_stopped_while_its_streams_held_part_of_a_year_summarizes_clean(tmp_path, extra):
    # The object path, which writes a household's trace at a time: stopped after 100 of them.
    config, base = load_config(DEFAULT, [*SETTINGS, *extra, "engine=objects"])
    model = build_model(config, base)
    step = model.step

    def stopped_during_year_five() -> None:
        if model.steps == 4:  # 100 traces of year 5 reach the file; their memory writes do not
            audit, trace, written = model.audit, model.audit.trace, []

            def trace_then_stop(*args, **kwargs) -> None:
                trace(*args, **kwargs)
                written.append(1)
                if len(written) == 100:
                    audit.traces.flush()
                    raise KeyboardInterrupt

            audit.trace = trace_then_stop
        step()

    model.step = stopped_during_year_five
    with pytest.raises(KeyboardInterrupt):
        run_simulation(config, base, tmp_path / "crash", progress=False, model=model)
    (run_dir,) = (tmp_path / "crash").iterdir()
    assert manifest(run_dir)["year_reached"] == 4
    summary = summarize_run(run_dir)
    assert summary.ok, summary.format()
    assert "up to year 4 (the last written whole)" in summary.format()


def test_resume_without_a_checkpoint_starts_over(tmp_path):
    clean = clean_run(tmp_path)
    run_dir = interrupted_run(tmp_path, 1)
    assert read_checkpoint(run_dir) is None
    resume_run(run_dir, progress=False)
    assert_same_outputs(clean.run_dir, run_dir)


def test_disk_full_fails_clearly_and_stays_resumable(tmp_path, monkeypatch, capsys):
    clean = clean_run(tmp_path)
    real_flush = audit_writer._Stream.flush
    calls = {"n": 0}

    def full_disk(stream):
        calls["n"] += 1
        if calls["n"] == 40:  # some years in, after a checkpoint
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(stream.path))
        real_flush(stream)

    monkeypatch.setattr(audit_writer._Stream, "flush", full_disk)
    code = main(
        [
            "run",
            str(DEFAULT),
            *[arg for s in SETTINGS for arg in ("--set", s)],
            "--out",
            str(tmp_path / "full"),
            "--checkpoint-every",
            "2",
            "--quiet",
        ]
    )
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err.count("\n") == 0
    assert "No space left on device" in err
    assert "--resume" in err
    (run_dir,) = (tmp_path / "full").iterdir()
    assert manifest(run_dir)["status"] == "failed"
    monkeypatch.setattr(audit_writer._Stream, "flush", real_flush)
    assert main(["run", "--resume", str(run_dir), "--quiet"]) == 0
    assert_same_outputs(clean.run_dir, run_dir)


def test_unwritable_output_folder_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    code = main(
        [
            "run",
            str(DEFAULT),
            "--set",
            "households.count=20",
            "--set",
            "years=2",
            "--out",
            str(blocker),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2  # a path that cannot be a folder is bad input, like a bad config key
    assert str(blocker) in err
    assert "cannot create the output folder" in err
    assert "Traceback" not in err


def test_resume_refuses_complete_runs_and_non_runs(tmp_path, capsys, monkeypatch):
    clean = clean_run(tmp_path)
    monkeypatch.chdir(tmp_path)  # should a refusal break, the run lands in a scratch folder
    assert main(["run", "--resume", str(clean.run_dir)]) == 2
    assert "already complete" in capsys.readouterr().err
    assert main(["run", "--resume", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert main(["run", str(DEFAULT), "--resume", str(clean.run_dir)]) == 2
    assert "--resume" in capsys.readouterr().err
    # A resumed run stays in its folder: an --out would be silently ignored.
    assert main(["run", "--resume", str(clean.run_dir), "--out", str(tmp_path / "x")]) == 2
    assert "--out" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_resume_refuses_a_run_whose_config_or_inputs_changed(tmp_path, capsys):
    run_dir = interrupted_run(tmp_path, 5)
    resolved = run_dir / "config.resolved.yaml"
    original = resolved.read_text(encoding="utf-8")
    resolved.write_text(original.replace("years: 9", "years: 11"), encoding="utf-8")
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "config.resolved.yaml changed since the run started" in err
    resolved.write_text(original, encoding="utf-8")
    registry = run_dir / "skill_registry.yaml"
    registry.write_text(registry.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert main(["run", "--resume", str(run_dir)]) == 2
    assert "the file of registry changed since the run started" in capsys.readouterr().err
    assert manifest(run_dir)["status"] == "failed"  # untouched: still resumable once restored


def test_a_run_whose_config_reads_otherwise_under_new_code_is_refused_as_such(tmp_path, capsys):
    """A config key added by newer code changes an unedited file's hash: that is said too."""
    run_dir = interrupted_run(tmp_path, 5)
    record = manifest(run_dir)
    # What a run started by other code records; its config hashed without today's new key.
    record["versions"]["code"] = "0" * 64
    record["config_hash"] = "1" * 64
    (run_dir / "manifest.json").write_bytes(orjson.dumps(record))
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        "config.resolved.yaml is not the config the run started with: edited since, or read "
        f"with a config key or default that this floodsim code added or changed (code "
        f"000000000000 then, {code_digest()[:12]} now), so it cannot be resumed"
    ) in err
    # A file written before keys were added: they are named (the upgrade's likeliest cause).
    resolved = run_dir / "config.resolved.yaml"
    lines = resolved.read_text(encoding="utf-8").splitlines(keepends=True)
    older = ("  initial_insured_share:", "  renter_contents_ratio:")
    resolved.write_text("".join(x for x in lines if not x.startswith(older)), encoding="utf-8")
    assert main(["run", "--resume", str(run_dir)]) == 2
    assert (
        "now; this code reads damage.renter_contents_ratio and "
        "households.initial_insured_share, which the file does not have), so it cannot be resumed"
    ) in capsys.readouterr().err


def stream_bytes(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run_dir.glob("*.jsonl*"))}


def test_runs_that_differ_only_in_audit_background_are_one_run(tmp_path):
    """The thread the lines are written on changes no byte of them, run id included."""
    behind = clean_run(tmp_path / "behind", "audit.background=true").run_dir
    inline = clean_run(tmp_path / "inline", "audit.background=false").run_dir
    assert behind.name == inline.name
    assert manifest(behind)["config_hash"] == manifest(inline)["config_hash"]
    assert stream_bytes(behind) == stream_bytes(inline)
    other = clean_run(tmp_path / "other", "audit.sample=0.5").run_dir
    assert other.name != behind.name  # a key that changes what is written does change it


def test_a_run_resumed_under_other_code_is_warned_of_and_says_so(tmp_path, monkeypatch):
    """The version stays 0.1.0 between commits: only the code's digest tells them apart."""
    run_dir = interrupted_run(tmp_path, 5)
    started = manifest(run_dir)["versions"]["code"]
    assert started == code_digest()
    assert len(started) == 64
    monkeypatch.setattr(runner_module, "code_digest", lambda: "f" * 64)
    with pytest.warns(ConfigWarning) as caught:
        resume_run(run_dir, progress=False)
    assert [str(w.message) for w in caught if w.category is ConfigWarning] == [
        (
            f"{run_dir}: resumed under other floodsim code than it last ran under (code "
            f"{started[:12]} then, ffffffffffff now): years 1 to 4 come from other code than "
            "the rest, as no one version alone would have written them"
        )
    ]
    versions = manifest(run_dir)["versions"]
    assert (versions["code"], versions["code_at_resume"]) == (started, ["f" * 64])


def test_a_run_restarted_for_want_of_a_checkpoint_records_the_code_it_ran_under(
    tmp_path, monkeypatch
):
    """Killed before its first checkpoint, every year runs again: under the new code alone."""
    run_dir = interrupted_run(tmp_path, 1)
    assert read_checkpoint(run_dir) is None
    monkeypatch.setattr(runner_module, "code_digest", lambda: "f" * 64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        resume_run(run_dir, progress=False)
    versions = manifest(run_dir)["versions"]
    assert versions["code"] == "f" * 64
    assert "code_at_resume" not in versions


def test_a_run_resumed_under_the_same_code_warns_of_nothing(tmp_path):
    run_dir = interrupted_run(tmp_path, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigWarning)
        resume_run(run_dir, progress=False)
    assert "code_at_resume" not in manifest(run_dir)["versions"]


def test_a_run_resumes_with_audit_background_changed(tmp_path, capsys):
    clean = clean_run(tmp_path, "audit.background=true")
    run_dir = interrupted_run(tmp_path, 5, "audit.background=true")
    resolved = run_dir / "config.resolved.yaml"
    text = resolved.read_text(encoding="utf-8")
    assert "background: true" in text
    resolved.write_text(text.replace("background: true", "background: false"), encoding="utf-8")
    assert main(["run", "--resume", str(run_dir)]) == 0, capsys.readouterr().err
    assert manifest(run_dir)["status"] == "complete"
    assert stream_bytes(run_dir) == stream_bytes(clean.run_dir)


def test_a_run_whose_manifest_hashed_audit_background_still_resumes(tmp_path, capsys):
    """Manifests written before the key was left out of the hash recorded it with the key."""
    clean = clean_run(tmp_path)
    run_dir = interrupted_run(tmp_path, 5)
    written = manifest(run_dir)
    resolved, _ = load_config(run_dir / "config.resolved.yaml")
    written["config_hash"] = config_hash(resolved, execution_keys=True)
    assert written["config_hash"] != config_hash(resolved)
    (run_dir / "manifest.json").write_bytes(orjson.dumps(written))
    assert main(["run", "--resume", str(run_dir)]) == 0, capsys.readouterr().err
    assert stream_bytes(run_dir) == stream_bytes(clean.run_dir)
    changed, _ = load_config(run_dir / "config.resolved.yaml", ["audit.sample=0.5"])
    assert not same_config(changed, written["config_hash"])


def test_resume_refuses_a_run_whose_input_file_is_gone(tmp_path, capsys):
    # The household table the run read was moved away: say which key's file, not a bare
    # "No such file or directory" with exit code 1.
    table = tmp_path / "households.csv"
    table.write_bytes((Path(__file__).parent / "data" / "households_small.csv").read_bytes())
    run_dir = interrupted_run(tmp_path, 5, f"households.table={table}")
    table.rename(tmp_path / "moved.csv")
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"floodsim: error: {run_dir}: the file of households.table ({table}) is missing or "
        "unreadable, so the run cannot be resumed; put it back, or start a new run instead\n"
    )
    assert manifest(run_dir)["status"] == "failed"  # untouched: resumable once it is back
    (tmp_path / "moved.csv").rename(table)
    assert main(["run", "--resume", str(run_dir)]) == 0
    assert manifest(run_dir)["status"] == "complete"


def _edited(change: Callable[[dict[str, Any]], object]) -> Callable[[str], str]:
    """A damage that parses the checkpoint, lets ``change`` edit it in place, writes it back."""

    def damage(text: str) -> str:
        data = orjson.loads(text)
        change(data)
        return orjson.dumps(data).decode()

    return damage


def _first_household(**changes: Any) -> Callable[[str], str]:
    return _edited(lambda data: data["households"][0].update(changes))


def _first_item(**changes: Any) -> Callable[[str], str]:
    return _edited(lambda data: data["households"][0]["memory"]["items"][0].update(changes))


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda text: text[:1000], "not a usable checkpoint"),
        (lambda text: text.replace('"format_version":', '"format_version_":'), "format_version"),
        (lambda _text: "[]", "expected a JSON object, got list"),
        (lambda text: text.replace('"streams":', '"streams_":'), "streams"),
        (
            lambda text: orjson.dumps(
                {**orjson.loads(text), "streams": {"memory_updates": "x"}}
            ).decode(),
            "streams.memory_updates",
        ),
        # Valid JSON whose values are wrong: each was used as it stood, and the run failed with
        # a traceback years later or went on (a stream left out was restarted, losing its lines).
        (
            _edited(lambda data: data["insurer"].update(rate={"x": 1})),
            "insurer.rate: Input should be a valid number",
        ),
        (
            _edited(lambda data: data["metrics"]["total_damage"].__setitem__(1, "x")),
            "metrics.total_damage.1: Input should be a valid number",
        ),
        (
            _edited(lambda data: data["metrics"]["total_damage"].pop()),
            "metrics.total_damage: 3 values for 4 years",
        ),
        (
            _edited(lambda data: data["households"][0]["state"].update(insured_years="3")),
            "households.0.state.insured_years: Input should be a valid integer",
        ),
        (
            _edited(lambda data: data["households"][0]["state"].update(cumulative_damage=-1.0)),
            "households.0.state.cumulative_damage: Input should be greater than or equal to 0",
        ),
        (
            _edited(lambda data: data["households"][0]["state"].update(first_floor_height=-1.0)),
            "households.0.state.first_floor_height: Input should be greater than or equal to 0",
        ),
        (
            _edited(lambda data: data["government"].update(subsidy_share=0.05)),
            "government.subsidy_share: 0.05 is outside the config's [min_subsidy, max_subsidy]",
        ),
        (
            _edited(lambda data: data["insurer"].update(rate=40.0)),
            "insurer.rate: 40.0 is outside the config's [min_rate, max_rate] = [2.0, 12.0]",
        ),
        (_first_household(adopted_last_year="party"), "households.0.adopted_last_year: 'party'"),
        (_first_household(relocated_in=3), "households.0.relocated_in: 3, but it has not moved"),
        (
            _edited(lambda data: data["households"][0]["memory"].update(agent_id="H00002")),
            "households.0.memory.agent_id: 'H00002' is not the household's",
        ),
        # A memory item's values were converted as they were read: tags given as text became
        # one-letter tags, "false" pinned the item, a number became its text.
        (_first_item(tags="flood"), "households.0.memory.items.0.tags: Input should be a valid"),
        (
            _first_item(pinned="false"),
            "households.0.memory.items.0.pinned: Input should be a valid boolean (got 'false')",
        ),
        (
            _first_item(content=2),
            "households.0.memory.items.0.content: Input should be a valid string (got 2)",
        ),
        (
            _edited(lambda data: data["households"][0]["memory"]["stores"].update(working="1")),
            "households.0.memory.stores.working: Input should be a valid list",
        ),
        (
            _first_household(
                last_decision=[4, "do_nothing", "fly_away", False, 0.0, 0.1, False, 0]
            ),
            "households.0.last_decision.2: 'fly_away' is not a skill of the registry",
        ),
        (
            _edited(lambda data: data["streams"].pop("memory_updates")),
            "streams: it commits ['consolidation', 'household_traces', 'tool_invocations']",
        ),
        # A generator's state was numpy's to check: it converted 3.0 and true, and a negative
        # word ended the run with an OverflowError's traceback.
        (
            _edited(lambda data: data["numpy"]["hazard_rng"].update(uinteger=-1)),
            "numpy.hazard_rng.uinteger: Input should be a valid string (got -1)",
        ),
        (
            _edited(lambda data: data["numpy"]["rng"]["state"].update(state=3.0)),
            "numpy.rng.state.state: Input should be a valid string (got 3.0)",
        ),
        (
            _edited(lambda data: data["numpy"]["claims_rng"].update(has_uint32="7")),
            "numpy.claims_rng.has_uint32: Input should be '0' or '1' (got '7')",
        ),
        (
            _edited(lambda data: data["numpy"]["rng"]["state"].update(inc=str(2**128))),
            "numpy.rng.state.inc: must be below 2**128",
        ),
    ],
    ids=[
        "truncated",
        "edited",
        "not-an-object",
        "no-streams",
        "bad-stream-offset",
        "rate-not-a-number",
        "metric-not-a-number",
        "metric-a-year-short",
        "count-as-text",
        "negative-damage",
        "floor-below-ground",
        "subsidy-below-its-minimum",
        "rate-above-its-maximum",
        "unknown-adoption",
        "moved-but-stayed",
        "another-households-memory",
        "tags-as-text",
        "pinned-as-text",
        "content-a-number",
        "store-as-text",
        "unknown-proposal",
        "a-stream-left-out",
        "negative-generator-word",
        "generator-state-a-float",
        "generator-flag-out-of-range",
        "generator-state-too-large",
    ],
)
def test_a_damaged_checkpoint_is_a_clear_error(tmp_path, capsys, damage, problem):
    run_dir = interrupted_run(tmp_path, 5)
    checkpoint = run_dir / CHECKPOINT_FILE
    checkpoint.write_text(damage(checkpoint.read_text(encoding="utf-8")), encoding="utf-8")
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"floodsim: error: {checkpoint}: not a usable checkpoint")
    assert problem in err


def test_a_disabled_insurer_s_rate_is_its_starting_one_even_outside_the_bounds(tmp_path, capsys):
    """The bounds bind only an insurer that adjusts the rate: a kept rate resumes, a changed not."""
    fixed = ("insurer.enabled=false", "insurance.rate_per_1000=20.0")
    run_dir = interrupted_run(tmp_path / "kept", 5, *fixed)
    assert main(["run", "--resume", str(run_dir)]) == 0
    run_dir = interrupted_run(tmp_path / "changed", 5, *fixed)
    checkpoint = run_dir / CHECKPOINT_FILE
    changed = _edited(lambda data: data["insurer"].update(rate=12.0))
    checkpoint.write_text(changed(checkpoint.read_text(encoding="utf-8")), encoding="utf-8")
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir)]) == 2
    assert "insurer.rate: 12.0, but the insurer is disabled and the rate stays 20.0" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("extra", [(), ("audit.gzip=true",)], ids=["plain", "gzip"])
@pytest.mark.parametrize("damage", ["cut", "removed"])
def test_resume_refuses_a_stream_that_lost_what_the_checkpoint_committed(
    tmp_path, capsys, extra, damage
):
    # Resuming cuts each stream back to the checkpoint's offset and appends: a shorter file
    # would be padded with zero bytes (or a missing one started afresh) and the run would end
    # complete with a corrupt audit trail.
    run_dir = interrupted_run(tmp_path, 5, *extra)
    (stream,) = run_dir.glob("memory_updates.jsonl*")
    if damage == "cut":
        stream.write_bytes(stream.read_bytes()[:100])
    else:
        stream.unlink()
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"floodsim: error: {stream}: ")
    assert "cannot be resumed" in err
    assert manifest(run_dir)["status"] == "failed"  # left as it was


@pytest.mark.parametrize("extra", [(), ("audit.gzip=true",)], ids=["plain", "gzip"])
def test_resume_refuses_a_committed_offset_that_is_not_where_a_year_ended(tmp_path, capsys, extra):
    # Resuming cuts each stream at its committed offset: one moved into the middle of a line
    # (or of a gzip member) would leave a torn line in a run that ends complete.
    run_dir = interrupted_run(tmp_path, 5, *extra)
    checkpoint = run_dir / CHECKPOINT_FILE
    data = orjson.loads(checkpoint.read_bytes())
    offset = data["streams"]["memory_updates"]["offset"] - 5
    data["streams"]["memory_updates"]["offset"] = offset
    checkpoint.write_bytes(orjson.dumps(data))
    (stream,) = run_dir.glob("memory_updates.jsonl*")
    assert main(["run", "--resume", str(run_dir)]) == 2
    kind = "a gzip member" if extra else "a line"
    assert capsys.readouterr().err == (
        f"floodsim: error: {checkpoint}: not a usable checkpoint of this run (streams: offset "
        f"{offset} of {stream.name} is not at the end of {kind}, where the run committed it)\n"
    )
    assert manifest(run_dir)["status"] == "failed"  # left as it was


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"resumed": "1"}, "resumed: Input should be a valid integer (got '1')"),
        (
            {"checkpoint_every": [1, 2]},
            "checkpoint_every: Input should be a valid integer (got [1, 2])",
        ),
        ({"duration_s": "abc"}, "duration_s: Input should be a valid number (got 'abc')"),
        ({"input_sha256": 1.5}, "input_sha256: Input should be a valid dictionary (got 1.5)"),
    ],
)
def test_resume_refuses_a_manifest_whose_values_were_changed(tmp_path, capsys, change, problem):
    # Resuming adds to these: each was a TypeError or AttributeError with a traceback.
    run_dir = interrupted_run(tmp_path, 5)
    path = run_dir / "manifest.json"
    path.write_bytes(orjson.dumps({**manifest(run_dir), **change}))
    assert main(["run", "--resume", str(run_dir)]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {path}: {problem}; it was changed since the run wrote it, so the run "
        "cannot be resumed\n"
    )


def test_a_manifest_that_is_not_a_json_object_is_not_a_run_directory(tmp_path, capsys):
    run_dir = interrupted_run(tmp_path, 5)
    (run_dir / "manifest.json").write_text("[]", encoding="utf-8")
    assert main(["run", "--resume", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err == f"floodsim: error: {run_dir}: not a run directory (no readable manifest.json)\n"


def test_a_run_killed_before_its_manifest_is_told_to_be_run_again(tmp_path, capsys):
    """SIGKILL between the registry's copy and the manifest leaves the copy alone."""
    run_dir = interrupted_run(tmp_path, 5)
    for path in run_dir.iterdir():
        if path.name != "skill_registry.yaml":
            path.unlink()
    assert main(["run", "--resume", str(run_dir)]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {run_dir}: not a run directory (no readable manifest.json); the run "
        "was stopped before it wrote one, so there is nothing to resume: run its config again, "
        "which replaces this folder\n"
    )


def test_a_run_killed_as_it_completes_leaves_no_checkpoint_and_resumes(tmp_path, monkeypatch):
    clean = clean_run(tmp_path)
    write_manifest = runner_module._write_manifest

    def killed_at_completion(run_dir: Path, data: dict) -> None:
        if data["status"] == "complete":
            raise SystemExit(137)
        write_manifest(run_dir, data)

    monkeypatch.setattr(runner_module, "_write_manifest", killed_at_completion)
    config, base = load_config(DEFAULT, SETTINGS)
    with pytest.raises(SystemExit):
        run_simulation(config, base, tmp_path / "crash", progress=False, checkpoint_every=2)
    monkeypatch.setattr(runner_module, "_write_manifest", write_manifest)
    (run_dir,) = (tmp_path / "crash").iterdir()
    assert not (run_dir / CHECKPOINT_FILE).exists()
    resume_run(run_dir, progress=False)  # starts over, as before a first checkpoint
    assert_same_outputs(clean.run_dir, run_dir)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0", "must be a positive integer, got 0"),
        ("x", "expected a positive integer, got 'x'"),
        # Past the most years a run can have no run would reach a checkpoint, and past 2**63
        # the manifest could not hold the number.
        ("1001", "must be at most 1000 (the most years a run can have), got 1001"),
        ("9" * 23, f"must be at most 1000 (the most years a run can have), got {'9' * 23}"),
    ],
)
def test_checkpoint_every_is_a_positive_integer_up_to_the_most_years(
    capsys, tmp_path, monkeypatch, value, said
):
    monkeypatch.chdir(tmp_path)  # should the refusal break, the run lands in a scratch folder
    with pytest.raises(SystemExit) as info:
        main(["run", str(DEFAULT), "--checkpoint-every", value])
    assert info.value.code == 2
    assert f"argument --checkpoint-every: {said}" in capsys.readouterr().err


def last_year_written(out: Path) -> int:
    """The year of the last whole line in the run's household traces (0 before the first)."""
    traces = list(out.glob("*/household_traces.jsonl"))
    if not traces:
        return 0
    with traces[0].open("rb") as stream:
        stream.seek(max(0, stream.seek(0, os.SEEK_END) - 65536))
        whole = stream.read().split(b"\n")[:-1]  # what follows the last newline may be partial
    return orjson.loads(whole[-1])["year"] if whole else 0


def test_sigkill_at_random_moments_then_resume(tmp_path):
    """Kill a real `floodsim run` process several times; resuming ends as a clean run does.

    Each kill comes a random 1-4 years past what the run had reached, plus a random fraction of
    a year: moments are chosen by the run's progress, not by the clock, so that however fast
    the machine is, the early attempts die before the run completes.
    """
    settings = ["households.count=800", "years=16", "audit.timestamps=false"]
    config, base = load_config(DEFAULT, settings)
    clean = run_simulation(config, base, tmp_path / "clean", progress=False)
    out = tmp_path / "killed"
    sets = [arg for s in settings for arg in ("--set", s)]
    command = [
        sys.executable,
        "-m",
        "simulation.cli",
        "run",
        str(DEFAULT),
        *sets,
        "--out",
        str(out),
        "--checkpoint-every",
        "3",
        "--quiet",
    ]
    chance = random.Random(20261122)
    kills = 0
    for _attempt in range(4):  # kill at random moments, resuming each time ...
        target = last_year_written(out) + chance.randint(1, 4)
        # The context closes the stderr pipe, which a killed run leaves open otherwise.
        with subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        ) as process:
            give_up = time.monotonic() + 120
            while process.poll() is None and last_year_written(out) < target:
                assert time.monotonic() < give_up, f"the run did not reach year {target}"
                time.sleep(0.005)
            time.sleep(chance.uniform(0.0, 0.05))  # into the next year or its checkpoint
            if process.poll() is not None:
                assert process.returncode == 0, process.stderr.read().decode()
                break
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        kills += 1
        (run_dir,) = out.iterdir()  # it wrote a year, so its run directory exists
        status = manifest(run_dir)["status"]
        if status == "complete":  # killed while exiting, after the last write
            break
        assert status == "running", status  # a killed run is recognisable as unfinished
        command = [
            sys.executable,
            "-m",
            "simulation.cli",
            "run",
            "--resume",
            str(run_dir),
            "--quiet",
        ]
    else:  # ... then let the last attempt finish
        finished = subprocess.run(command, capture_output=True, timeout=300, check=False)
        assert finished.returncode == 0, finished.stderr.decode()
    assert kills >= 2, kills
    (run_dir,) = out.iterdir()
    assert manifest(run_dir)["status"] == "complete"
    assert_same_outputs(clean.run_dir, run_dir)


# --------------------------------------------------------------------------- any one change
@pytest.fixture(scope="module")
def small_checkpoint() -> tuple[Any, dict[str, Any]]:
    """A 12-household model's config and its checkpoint after 3 years, through JSON."""
    config, base = load_config(
        DEFAULT, ["households.count=12", "years=6", "audit.level=off", "engine=objects"]
    )
    model = build_model(config, base)
    for _ in range(3):
        model.step()
    data = checkpoint_module.capture(model)
    return (config, base), orjson.loads(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))


def _descend(draw: Callable[[Any], Any], node: Any) -> tuple[Any, ...]:
    """A path to some value inside ``node``, stopping at each level one time in five."""
    path: tuple[Any, ...] = ()
    while isinstance(node, dict | list) and node and (not path or draw(st.integers(0, 4))):
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        path, node = (*path, key), node[key]
    return path


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_checkpoint_changed_anywhere_is_refused_or_restored_exactly_as_given(
    small_checkpoint, data
):
    """Restoring converts nothing: a checkpoint edited since it was written is refused with
    ``ValueError``/``TypeError`` (one line on the CLI) or gives back exactly what it holds.

    Numpy's generators once took 3.0 for a 128-bit state, and a negative word ended a resume
    with an ``OverflowError``'s traceback.
    """
    (config, base), saved = small_checkpoint
    changed = orjson.loads(orjson.dumps(saved))
    where = _descend(data.draw, changed)
    assume(where)
    node = changed
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = data.draw(
        st.sampled_from([None, True, False, 0, 1, -1, 7, 0.5, -0.5, 3.0, "", "0", "x", [], {}])
    )
    model = build_model(config, base)
    try:
        checkpoint_module.restore(model, changed)
    except (ValueError, TypeError):
        event("refused")
        return
    event("restored")
    again = orjson.loads(
        orjson.dumps(checkpoint_module.capture(model), option=orjson.OPT_NON_STR_KEYS)
    )
    assert {**again, "streams": {}} == {**changed, "streams": {}}


def test_a_resume_failing_after_its_streams_opened_closes_them_and_is_failed(
    tmp_path, monkeypatch, open_files_under
):
    run_dir = interrupted_run(tmp_path, 5)

    def full_disk(*_args: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(runner_module, "_warn_if_the_audit_will_not_fit", full_disk)
    with pytest.raises(OSError, match="No space left"):
        resume_run(run_dir, progress=False)
    assert open_files_under(run_dir) == []
    record = manifest(run_dir)
    assert record["status"] == "failed"
    assert record["error"].startswith("OSError")
    assert record["year_reached"] == 4  # the checkpoint the streams were cut to


def test_a_restart_whose_streams_cannot_open_vouches_for_no_year(
    tmp_path, monkeypatch, open_files_under
):
    """Restarting cuts the streams to nothing: the manifest must not keep the years they had."""
    run_dir = interrupted_run(tmp_path, 2)  # in year 2, before its checkpoint (every 2 years)
    assert read_checkpoint(run_dir) is None
    assert manifest(run_dir)["year_reached"] == 1
    real_open = audit_writer._Stream._open
    opened = []

    def second_fails(stream, mode):
        opened.append(stream.path.name)
        if len(opened) == 2:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(stream.path))
        return real_open(stream, mode)

    monkeypatch.setattr(audit_writer._Stream, "_open", second_fails)
    with pytest.raises(PermissionError):
        resume_run(run_dir, progress=False)
    record = manifest(run_dir)
    assert record["status"] == "failed"
    assert record["year_reached"] == 0
    assert open_files_under(run_dir) == []

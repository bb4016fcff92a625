"""Tests for simulation.runner: running a config from Python (the API notebooks use)."""

from __future__ import annotations

import time
import warnings
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import orjson
import pandas as pd
import pytest

from simulation import runner
from simulation.audit.writer import AuditWriter
from simulation.config import ConfigWarning, load_config
from simulation.folder_lock import hold_folder
from simulation.runner import FallbackWarning, RunError, build_model, resume_run, run_simulation

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
SMALL = ["households.count=20", "years=2", "audit.level=off"]


def test_the_output_folder_may_be_given_as_a_string(tmp_path):
    config, base = load_config(DEFAULT, SMALL)
    result = run_simulation(config, base, str(tmp_path / "out"), progress=False)
    assert result.run_dir.parent == tmp_path / "out"
    assert (result.run_dir / "model_years.csv").is_file()


def test_a_file_where_the_run_folder_goes_is_named_and_left_alone(tmp_path):
    config, base = load_config(DEFAULT, SMALL)
    (tmp_path / "mine").write_text("notes\n", encoding="utf-8")
    with pytest.raises(RunError) as info:
        run_simulation(config, base, tmp_path, progress=False, run_id="mine")
    assert str(info.value) == (
        f"{tmp_path / 'mine'}: a file where the run's folder goes: move it away or choose "
        "another --out"
    )
    assert (tmp_path / "mine").read_text(encoding="utf-8") == "notes\n"
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RunError, match="gone: a link to nowhere where the run's folder goes"):
        run_simulation(config, base, tmp_path, progress=False, run_id="gone")


def test_a_model_already_stepped_is_refused(tmp_path):
    """Its first years would be missing from the run directory that calls itself complete."""
    config, base = load_config(DEFAULT, SMALL)
    model = build_model(config, base)
    model.step()
    with pytest.raises(ValueError, match=r"^model: was already stepped 1 year; "):
        run_simulation(config, base, tmp_path, progress=False, model=model)
    assert list(tmp_path.iterdir()) == []


def test_a_model_of_another_config_is_refused(tmp_path):
    """config.resolved.yaml would describe a run the data do not come from."""
    config, base = load_config(DEFAULT, SMALL)
    other, _ = load_config(DEFAULT, [*SMALL, "households.count=30"])
    with pytest.raises(ValueError, match=r"^model: has another config; "):
        run_simulation(config, base, tmp_path, progress=False, model=build_model(other, base))
    equal, _ = load_config(DEFAULT, SMALL)  # an equal config loaded again is the same run
    result = run_simulation(config, base, tmp_path, progress=False, model=build_model(equal, base))
    assert result.model.steps == config.years


def test_decisions_that_fell_back_are_warned_about_at_the_end_of_the_run(tmp_path):
    """As floodsim run and batch say it: a run of mostly invalid proposals is no normal run."""
    script = tmp_path / "decisions.csv"
    rows = "".join(f"H{n:05d},1,elevate_house\n" for n in range(1, 21))
    script.write_text(f"agent_id,year,skill_id\n{rows}", encoding="utf-8")
    scripted = ["decision.policy=scripted", f"decision.script={script}"]
    config, base = load_config(DEFAULT, [*SMALL, *scripted])
    with pytest.warns(FallbackWarning) as caught:
        result = run_simulation(config, base, tmp_path / "out", progress=False)
    fallbacks = int(result.metrics["invalid_proposals"].sum())
    assert fallbacks > 0  # renters may not elevate
    (warning,) = [w for w in caught if w.category is FallbackWarning]
    assert str(warning.message).startswith(f"{result.run_dir.name}: {fallbacks} of 40 decisions (")
    assert "fell back to do_nothing" in str(warning.message)


@pytest.mark.parametrize(
    ("engine", "background", "spare_core", "households", "behind"),
    [
        ("arrays", "auto", True, 20, True),
        ("arrays", "auto", False, 20, False),
        ("arrays", "auto", True, 19, False),  # too few for the thread to pay
        ("arrays", "true", False, 19, True),
        ("arrays", "false", True, 20, False),
        ("objects", "true", True, 20, False),  # the object path logs line by line
    ],
)
def test_audit_lines_are_written_behind_the_run_where_a_core_is_spare(
    tmp_path, monkeypatch, engine, background, spare_core, households, behind
):

    monkeypatch.setattr(runner, "usable_cores", lambda: 2)
    monkeypatch.setattr(runner, "BACKGROUND_FROM_HOUSEHOLDS", 20)
    config, base = load_config(
        DEFAULT,
        [
            f"households.count={households}",
            "years=2",
            f"engine={engine}",
            f"audit.background={background}",
        ],
    )
    result = run_simulation(config, base, tmp_path, progress=False, spare_core=spare_core)
    assert result.model.audit.writes_behind is behind


def test_one_core_leaves_no_core_to_spare(tmp_path, monkeypatch):

    monkeypatch.setattr(runner, "usable_cores", lambda: 1)
    monkeypatch.setattr(runner, "BACKGROUND_FROM_HOUSEHOLDS", 1)
    config, base = load_config(DEFAULT, ["households.count=20", "years=2", "engine=arrays"])
    assert not run_simulation(config, base, tmp_path, progress=False).model.audit.writes_behind


def _lines_by_year(run_dir: Path) -> Counter:
    """How many lines each stream holds of each year, as the files stand."""
    counts: Counter = Counter()
    for path in run_dir.glob("*.jsonl"):
        for line in path.read_bytes().splitlines():
            counts[path.name, orjson.loads(line)["year"]] += 1
    return counts


@pytest.fixture
def slow_writes(monkeypatch):
    """The background thread writes each year out late: the run is a year ahead of the files."""
    end_members = AuditWriter._end_members

    def late(self: AuditWriter) -> None:
        time.sleep(0.05)
        end_members(self)

    monkeypatch.setattr(AuditWriter, "_end_members", late)


BEHIND = ["households.count=20", "engine=arrays", "audit.background=true"]


def test_year_reached_vouches_only_for_years_written_out_whole(tmp_path, monkeypatch, slow_writes):
    # audit memory and audit summarize take every year up to year_reached of a running or
    # killed run as whole.
    seen = []
    write_manifest = runner._write_manifest

    def kept(run_dir: Path, manifest: dict) -> None:
        if manifest["status"] == "running":
            seen.append((manifest["year_reached"], _lines_by_year(run_dir)))
        write_manifest(run_dir, manifest)

    monkeypatch.setattr(runner, "_write_manifest", kept)
    config, base = load_config(DEFAULT, [*BEHIND, "years=4"])
    result = run_simulation(config, base, tmp_path, progress=False, checkpoint_every=2)
    assert result.model.audit.writes_behind
    final = _lines_by_year(result.run_dir)
    # After years 1 to 4: a year behind the run, but whole up to a checkpoint's year.
    assert [reached for reached, _ in seen][-4:] == [0, 2, 2, 3]
    for reached, counts in seen:
        whole = {key: count for key, count in final.items() if key[1] <= reached}
        assert {key: counts[key] for key in whole} == whole
    # Once the writer has closed, every year is out: a complete run vouches for all of them.
    manifest = orjson.loads((result.run_dir / "manifest.json").read_bytes())
    assert (manifest["status"], manifest["year_reached"]) == ("complete", 4)


def test_a_run_stopped_in_a_year_vouches_for_the_years_before_it(tmp_path, slow_writes):
    config, base = load_config(DEFAULT, [*BEHIND, "years=5"])
    model = build_model(config, base)
    step = model.step

    def stopped_in_year_four() -> None:
        if model.steps == 3:
            raise KeyboardInterrupt
        step()

    model.step = stopped_in_year_four
    with pytest.raises(KeyboardInterrupt):
        run_simulation(config, base, tmp_path, progress=False, model=model)
    (run_dir,) = tmp_path.iterdir()
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    # The lines handed to the thread were written before the run ended: year 3 is whole.
    assert (manifest["status"], manifest["year_reached"]) == ("failed", 3)
    assert _lines_by_year(run_dir)["household_traces.jsonl", 3] == 20


def test_a_run_directory_another_process_is_writing_is_refused_untouched(tmp_path):
    """The same config and seed started twice write one folder: the second is refused."""
    config, base = load_config(DEFAULT, ["households.count=20", "years=3", "audit.level=minimal"])
    run_dir = run_simulation(config, base, tmp_path, progress=False).run_dir
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    busy = (
        f"{run_dir}: another floodsim process is writing this run directory (the same config "
        "and seed, or its --resume); wait for it to end, or give --out another folder"
    )
    with hold_folder(run_dir):  # as the first process holds it while it runs
        with pytest.raises(RunError) as info:
            run_simulation(config, base, tmp_path, progress=False)
        assert str(info.value) == busy
        # A run still going says "running" in its manifest, as one killed does.
        manifest = orjson.loads(before["manifest.json"])
        (run_dir / "manifest.json").write_bytes(orjson.dumps({**manifest, "status": "running"}))
        with pytest.raises(RunError) as info:
            resume_run(run_dir, progress=False)
        # A resume writes its own folder: no advice to give another one.
        assert str(info.value) == busy.removesuffix(", or give --out another folder")
    (run_dir / "manifest.json").write_bytes(before["manifest.json"])
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()} == before


def test_a_run_directory_given_as_out_is_refused_rather_than_nested(tmp_path):
    """--out holds run directories: a run inside another is where no reader looks for it."""
    config, base = load_config(DEFAULT, ["households.count=20", "years=2", "audit.level=off"])
    run_dir = run_simulation(config, base, tmp_path, progress=False).run_dir
    before = sorted(path.name for path in run_dir.iterdir())
    with pytest.raises(RunError) as info:
        run_simulation(config, base, run_dir, progress=False)
    assert str(info.value) == (
        f"{run_dir}: is a run directory (it holds manifest.json and config.resolved.yaml); "
        f"--out is the folder that holds run directories (such as {tmp_path})"
    )
    assert sorted(path.name for path in run_dir.iterdir()) == before


@pytest.mark.parametrize(
    ("settings", "warned"),
    [
        # 40 households x 5 years at standard: about 400 KB of audit trail.
        ([], True),
        (["audit.gzip=true"], False),  # about a sixteenth of it
        (["audit.sample=0.05"], False),
        (["audit.level=off"], False),
    ],
    ids=["standard", "gzip", "sample", "off"],
)
def test_a_run_whose_audit_trail_will_not_fit_on_the_disk_is_warned_of(
    tmp_path, monkeypatch, settings, warned
):
    # The run would stop with the disk full, perhaps hours in: said before the first year.
    monkeypatch.setattr(runner.shutil, "disk_usage", lambda _: SimpleNamespace(free=100_000))
    config, base = load_config(DEFAULT, ["households.count=40", "years=5", *settings])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_simulation(config, base, tmp_path, progress=False)
    said = [str(w.message) for w in caught if issubclass(w.category, ConfigWarning)]
    assert bool(said) is warned
    if warned:
        expected = (
            f"{result.run_dir}: the audit trail will take about 0.4 MB at level standard, and "
            "0.1 MB is free: the run would stop once the disk is full (it can be resumed when "
            "there is room). audit.gzip: true writes about a sixteenth of it, audit.sample a "
            "share of the households, a lower audit.level less"
        )
        assert said == [expected]


@pytest.mark.parametrize("audit", ["audit.gzip=false", "audit.gzip=true"])
@pytest.mark.parametrize("background", ["audit.background=false", "audit.background=true"])
def test_a_failed_run_leaves_none_of_its_files_open(tmp_path, audit, background, open_files_under):
    """A run stopped by Ctrl-C (or any error) closes its streams at once, not when collected.

    They stayed open until the garbage collector reached the run's writer, which a notebook
    keeping the model (or the traceback) alive delays indefinitely.
    """
    config, base = load_config(
        DEFAULT, [*SMALL, "years=4", "audit.level=standard", audit, background]
    )
    model = build_model(config, base)
    step = model.step

    def step_then_stop() -> None:
        step()
        if model.steps == 2:
            raise KeyboardInterrupt

    model.step = step_then_stop
    with pytest.raises(KeyboardInterrupt):
        run_simulation(config, base, tmp_path, progress=False, model=model)
    assert open_files_under(tmp_path) == []
    (run_dir,) = tmp_path.iterdir()
    assert orjson.loads((run_dir / "manifest.json").read_bytes())["status"] == "failed"
    result = resume_run(run_dir, progress=False)
    assert result.metrics["year"].tolist() == [1, 2, 3, 4]
    assert open_files_under(tmp_path) == []


def test_a_run_failing_as_its_audit_starts_is_failed_and_leaves_no_file_open(
    tmp_path, monkeypatch, open_files_under
):
    """Writing the initial memories (a full disk, say) fails the run like a failing year."""

    def full_disk(model, writer):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner.FloodAdaptationModel, "attach_audit", full_disk)
    config, base = load_config(DEFAULT, [*SMALL, "audit.level=standard"])
    with pytest.raises(OSError, match="No space left"):
        run_simulation(config, base, tmp_path, progress=False)
    assert open_files_under(tmp_path) == []
    (run_dir,) = tmp_path.iterdir()
    record = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert record["status"] == "failed"
    assert record["error"] == "OSError: [Errno 28] No space left on device"


def test_lines_a_failure_dropped_stay_dropped_if_the_writer_is_closed_after(tmp_path):
    config, _ = load_config(DEFAULT, [*SMALL, "audit.level=standard", "audit.background=false"])
    writer = AuditWriter(tmp_path, "r", config.audit, config.seed)
    stream = writer.traces
    stream.write({"a": 1})
    stream.end_member()
    stream.write({"a": 2})  # buffered when the run fails
    assert writer.abandon()
    writer.close()
    assert (tmp_path / "household_traces.jsonl").read_bytes() == b'{"a":1}\n'


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_a_run_writes_its_households_as_a_table_that_loads_them_again(tmp_path, engine):
    """households.csv: each household's attributes, to join the audit by; a run reads it back."""
    settings = ["households.count=30", "years=2", f"engine={engine}"]
    config, base = load_config(DEFAULT, settings)
    first = run_simulation(config, base, tmp_path / "a", progress=False)
    table = first.run_dir / "households.csv"
    rows = pd.read_csv(table).to_dict("records")
    households = first.model.households
    assert [row["agent_id"] for row in rows] == [h.state.agent_id for h in households]
    assert [(row["flood_zone"], row["income"]) for row in rows] == [
        (h.state.flood_zone, h.state.income) for h in households
    ]
    again, base = load_config(DEFAULT, [*settings, f"households.table={table}"])
    second = run_simulation(again, base, tmp_path / "b", progress=False)
    assert (second.run_dir / "households.csv").read_bytes() == table.read_bytes()
    assert [h.state for h in build_model(again, base).households] == [
        h.state for h in build_model(config, base).households
    ]

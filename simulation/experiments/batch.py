"""Run a whole experiment: plan, execute, record, combine.

The output folder of an experiment holds:

``experiment.json``
    the experiment (name, seed, sweep, replicates, executor) and every run's id, design point,
    replicate, seed, swept parameters, status (pending, complete or failed), error and run
    directory. It is rewritten atomically after every finished run, so an interrupted batch
    can be resumed (``--resume`` keeps complete runs whose config and input files are
    unchanged, and reruns the others: failed, missing, changed, stopped by Ctrl-C, or missing
    their manifest, a readable ``model_years.csv``, an audit stream the manifest lists or the
    ``config.resolved.yaml`` it records, whatever their record says). Once
    the batch ends, ``wall_s`` is the wall-clock time the latest attempt took, from planning to
    the combined metrics (``null`` while it runs; for reporting, nothing depends on it).
    Tools read it back through :func:`simulation.experiments.record.read_record`.
``runs/<run_id>/``
    one run directory per run (see :mod:`simulation.runner`).
``model_years.parquet``
    every complete run's yearly metrics with ``run_id``, ``point``, ``replicate``, ``seed`` and
    one column per swept key, sorted by point, replicate and year whatever executor ran them.

A folder that already holds an experiment's results is not written into without being told
how: ``resume`` continues the same experiment (by name) and removes the run folders it no
longer plans; ``overwrite`` first removes the results (the files above, the
``behaviour.csv`` and ``behaviour.png`` that ``floodsim check-behaviour`` writes beside them,
and the ``report/`` of ``floodsim report``). A resume that reruns or removes any run removes
those as well: they describe other runs.
Anything else there is left alone. Without either, a stale run folder of a larger or another
experiment would sit beside the new runs, where anything that lists ``runs/`` finds it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pandas as pd
from tqdm import tqdm

from simulation.analysis.metrics import RunDirError, read_metrics_csv, table_cells
from simulation.atomic import replace_file, temporary_name
from simulation.code_digest import code_digest
from simulation.config import ConfigError, ConfigWarning, create_output_folder, remove_outputs
from simulation.errors import results_kept_in
from simulation.experiments.design import load_experiment, override_executor, plan_runs
from simulation.experiments.executors import RunTask, make_executor
from simulation.folder_lock import hold_folder
from simulation.output_kinds import EXPERIMENT, other_kind_error
from simulation.yaml_errors import dump_yaml

if TYPE_CHECKING:
    from collections.abc import Iterable

    from simulation.config import RunConfig
    from simulation.experiments.design import ExperimentConfig, PlannedRun
    from simulation.experiments.executors import RunOutcome

__all__ = ["ExperimentResult", "combine_metrics", "run_experiment"]


@dataclass(frozen=True, slots=True)
class ExperimentResult:
    """A finished batch: its folder, every run's record, how many failed and how long it took.

    Attributes:
        out_dir: The experiment's output folder.
        runs: Every run's record, as ``experiment.json`` holds them.
        failed: Runs that failed in this attempt.
        skipped: Complete runs kept from an earlier attempt (``resume``).
        wall_s: Wall-clock seconds this attempt took.
    """

    out_dir: Path
    runs: list[dict[str, Any]]
    failed: int
    skipped: int
    wall_s: float


#: What ``floodsim check-behaviour`` and ``floodsim report`` write into an experiment's folder
#: by default (``report`` is :data:`simulation.analysis.report.REPORT_DIR`), read from its runs:
#: stale once any run is replaced or removed, so a resume that does so removes these.
_DERIVED = ("behaviour.csv", "behaviour.png", "report")

#: What a batch writes into its folder (``runs`` a folder), and what is derived from it:
#: ``overwrite`` removes these, and only these.
_RESULTS = (
    "experiment.json",
    temporary_name(Path("experiment.json")).name,
    "model_years.parquet",
    temporary_name(Path("model_years.parquet")).name,
    "runs",
    *_DERIVED,
)


#: How many times at most ``experiment.json`` is rewritten while a batch's runs finish. Each
#: rewrite holds every run's record, so rewriting it after every run costs the square of the
#: runs: 100,000 runs would write terabytes. An experiment of up to this many runs is recorded
#: after every run; a larger one after every 1/this of its runs. A record behind the runs costs
#: a resume nothing: it keeps a run by the run's own manifest (see ``_kept_manifest``).
_STATE_WRITES = 200


def _holder(out: Path) -> tuple[str | None, str] | None:
    """Whose results ``out`` holds: ``(experiment name or None, what they are)``, or None.

    The name is ``None`` when the folder holds results but no readable ``experiment.json``.
    """
    state_path = out / "experiment.json"
    if state_path.is_file():
        try:
            state = orjson.loads(state_path.read_bytes())
            name = state["experiment"]["name"]
            runs = state["runs"]
            complete = sum(r.get("status") == "complete" for r in runs)
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            return None, "an experiment.json that cannot be read"
        return str(name), f"{len(runs)} run{'' if len(runs) == 1 else 's'}, {complete} complete"
    runs_dir = out / "runs"
    if runs_dir.is_dir() and any(runs_dir.iterdir()):
        return None, "run folders in runs/ but no experiment.json"
    if (out / "model_years.parquet").is_file():
        return None, "a model_years.parquet but no experiment.json"
    return None


def _check_output_folder(
    out: Path, name: str, *, resume: bool, overwrite: bool, held: bool = False
) -> None:
    """Refuse to write experiment ``name`` where results it should not mix with are.

    Unless this process holds the folder already (``held``), a folder another batch is writing
    is refused as busy: its half-written results would otherwise be refused with advice
    (--resume) that the busy folder then refuses too.

    Raises:
        ConfigError: One line naming the folder, whose results it holds and the flags; or,
            for a run directory or a calibration's folder (with any flags), that it is one.
    """
    # A run directory or a calibration's folder is never an experiment's, whatever the flags
    # (simulation.output_kinds): --overwrite would also remove a run's own behaviour.csv.
    if error := other_kind_error(out, EXPERIMENT):
        raise ConfigError(error)
    holder = _holder(out)
    if holder is None or overwrite:
        return
    if not held:
        with hold_folder(out, _busy(out)):
            pass
    held_by, what = holder
    if held_by == name:
        if resume:
            return
        msg = (
            f"{out}: holds the results of experiment {name!r} ({what}); add --resume to keep "
            "its complete runs and run the rest, or --overwrite to replace them"
        )
    elif held_by is None:
        msg = (
            f"{out}: holds batch results ({what}); give another --out, or --overwrite to "
            "replace them"
        )
    else:
        resumed = (
            f", not of {name!r}: --resume continues only the same experiment" if resume else ""
        )
        msg = (
            f"{out}: holds the results of experiment {held_by!r} ({what}){resumed}; give another "
            "--out, or --overwrite to replace them"
        )
    raise ConfigError(msg)


def _busy(out: Path) -> ConfigError:
    """The error for a folder another batch or calibration holds."""
    return ConfigError(
        f"{out}: another floodsim batch or calibration is writing this folder; wait for it to "
        "end, or give another --out"
    )


def _remove_unplanned_runs(out: Path, planned: list[PlannedRun]) -> bool:
    """Remove the run folders of an earlier attempt that the experiment no longer has.

    Returns:
        Whether any was removed.
    """
    runs_dir = out / "runs"
    keep = {run.run_id for run in planned}
    removed = False
    for folder in sorted(runs_dir.iterdir()):
        if folder.name not in keep and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
            removed = True
    return removed


def _plan_records(
    out: Path, planned: list[PlannedRun], folder: Path, *, resume: bool
) -> list[dict[str, Any]]:
    """Every planned run's record: complete if an earlier attempt's run stands for it, else pending.

    Without ``resume`` (or an earlier ``experiment.json``) every run is pending. With it, the
    run folders the experiment no longer has are removed and, when any run is removed or will
    run again, so are the files derived from the earlier runs (:data:`_DERIVED`), as
    ``overwrite`` removes them: they would otherwise sit beside the new ``model_years.parquet``
    as if they checked it. A resume with nothing to do keeps them.
    """
    state_path = out / "experiment.json"
    if not (resume and state_path.exists()):
        return [_record(run) for run in planned]
    # _holder read the file: its runs are a list of mappings, though perhaps not all whole.
    runs = orjson.loads(state_path.read_bytes())["runs"]
    previous = {r.get("run_id"): r for r in runs if isinstance(r.get("run_id"), str)}
    removed = _remove_unplanned_runs(out, planned)
    records = []
    kept_code: dict[str, object] = {}  # kept run -> the code digest its manifest records
    for run in planned:
        old = previous.get(run.run_id)
        manifest = _kept_manifest(old, run, out, folder)
        if manifest is not None:
            kept_code[run.run_id] = (manifest.get("versions") or {}).get("code")
            # Kept, but recorded as this plan has it: a key added to the sweep at its default
            # value leaves the run as it was and adds to what its point sets. Only the time
            # it took comes from the earlier record.
            took = old.get("duration_s")
            kept = {"status": "complete", "run_dir": f"runs/{run.run_id}"}
            duration = {"duration_s": took if isinstance(took, float) and took >= 0 else None}
            records.append({**_record(run), **kept, **duration})
        else:
            records.append(_record(run))
    if removed or any(record["status"] != "complete" for record in records):
        remove_outputs(out, _DERIVED)
    _warn_of_runs_under_other_code(out, kept_code)
    return records


def _warn_of_runs_under_other_code(out: Path, kept_code: dict[str, object]) -> None:
    """Warn when a resume keeps runs another version of floodsim made.

    Their config and inputs are this attempt's, so they are kept; but a changed model may
    give other results than the runs this attempt makes, and the experiment would mix them.
    A run whose manifest records no digest (made before digests were) is not named.
    """
    now = code_digest()
    other = [run_id for run_id, code in kept_code.items() if code is not None and code != now]
    if other:
        more = f" and {len(other) - 3} more" if len(other) > 3 else ""
        warnings.warn(
            f"{out}: --resume keeps {len(other)} complete run(s) that other floodsim code made "
            f"({', '.join(other[:3])}{more}): a changed model may give other results than the "
            "runs made now (--overwrite runs every one again)",
            ConfigWarning,
            stacklevel=4,
        )


def _write_json(path: Path, data: dict[str, Any]) -> None:
    # Swept values may be mappings with number keys (hazard.events: {10: 9.5}).
    replace_file(path, orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))


def _kept_manifest(
    record: dict[str, Any] | None, run: PlannedRun, out_dir: Path, folder: Path
) -> dict[str, Any] | None:
    """The manifest of an earlier attempt's run that can stand for ``run``, else ``None``.

    Its own manifest must say it completed, its ``model_years.csv`` (what the combined metrics
    are read from) must be there, and the manifest's config hash and input digests must be
    those ``run`` would have now: an experiment edited between attempts (another sweep value,
    more years, an edited registry) reruns the runs it changed. Its record may say
    otherwise: a run a worker finished after the batch was interrupted is recorded as pending.
    """
    if record is None or record.get("seed") != run.seed:
        return None
    run_dir = out_dir / "runs" / run.run_id
    try:
        manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    # The manifest alone is not the run: a run whose metrics were deleted since would be kept
    # and then break combining them (and every later resume), so it runs again instead.
    if not isinstance(manifest, dict):
        return None
    if manifest.get("status") != "complete" or not (run_dir / "model_years.csv").is_file():
        return None
    # Imported here: the batch's own process needs Mesa only to check runs it might keep.
    from simulation.config import RunConfig  # noqa: PLC0415
    from simulation.runner import (  # noqa: PLC0415
        input_digests,
        resolve_for_run_dir,
        run_config_intact,
        same_config,
    )

    config = RunConfig.model_validate(run.config)
    resolved = resolve_for_run_dir(config, folder)
    same = (
        same_config(resolved, manifest.get("config_hash"))
        and manifest.get("input_sha256") == input_digests(config, folder)
        and _streams_present(run_dir, manifest)
        and _metrics_intact(run_dir / "model_years.csv", config.years)
        and (_written_as_planned(run_dir, resolved) or run_config_intact(run_dir, manifest))
    )
    return manifest if same else None


def _written_as_planned(run_dir: Path, resolved: RunConfig) -> bool:
    """Whether the run's ``config.resolved.yaml`` is the text a run of ``resolved`` writes.

    The usual case, four times cheaper to tell than reading the file back as a config; a run
    an earlier attempt made with another ``audit.background`` (or older code) is read back.
    """
    try:
        written = (run_dir / "config.resolved.yaml").read_bytes()
    except OSError:
        return False
    return written == dump_yaml(resolved.to_yaml_dict(), sort_keys=False).encode("utf-8")


def _streams_present(run_dir: Path, manifest: dict[str, Any]) -> bool:
    """Whether every audit stream the manifest lists is a file, and one with lines not empty.

    A stream deleted to free the disk (or emptied) would be kept as if whole: the run's
    audit trail, and every analysis of it, would miss it. Its lines are not counted: that
    would read every run's streams on every resume.
    """
    audit = manifest.get("audit")
    streams = audit.get("streams") if isinstance(audit, dict) else None
    if not isinstance(streams, dict):
        return True  # a run that writes no audit (level off) lists none
    for entry in streams.values():
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            return False
        path = run_dir / entry["file"]
        if not path.is_file() or (entry.get("lines") and path.stat().st_size == 0):
            return False
    return True


def _metrics_intact(path: Path, years: int) -> bool:
    """Whether a kept run's ``model_years.csv`` reads back as its metrics.

    Every metric column, one row of numbers per year: a file damaged since the run wrote it
    would otherwise break combining the metrics, or come into them as text.
    """
    from simulation.model import METRIC_COLUMNS  # noqa: PLC0415 - see _kept_manifest

    try:
        frame = read_metrics_csv(path)
    except RunDirError:
        return False
    return tuple(frame.columns) == METRIC_COLUMNS and len(frame) == years


def run_experiment(
    path: str | Path,
    out_dir: str | Path | None = None,
    *,
    executor: str | None = None,
    workers: int | None = None,
    address: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool | None = None,
) -> ExperimentResult:
    """Run the experiment in ``path``.

    Args:
        path: The experiment file.
        out_dir: Output folder; ``outputs/<name>`` by default.
        executor: Override the file's executor kind (serial, process, dask).
        workers: Override the number of workers.
        address: Override the Dask scheduler address.
        resume: Continue this experiment's results in ``out_dir``: keep complete runs of an
            earlier attempt whose config and input files are unchanged, run the rest, and
            remove the run folders the experiment no longer has.
        overwrite: Remove whatever experiment results ``out_dir`` holds first.
        progress: Show a progress bar (``None``: only on a terminal).

    Returns:
        The output folder, the run records and the failure count.

    Raises:
        ConfigError: For an invalid experiment file or executor override, or an output folder
            holding results without ``resume`` (of this experiment) or ``overwrite``, or a
            run directory given as ``out_dir`` (before anything runs).
        OSError: For an output folder that cannot be created or a Dask scheduler that cannot
            be reached (before ``experiment.json`` is written).
        ValueError: For ``resume`` and ``overwrite`` together.
    """
    if resume and overwrite:
        msg = "resume and overwrite exclude each other"
        raise ValueError(msg)
    start = time.perf_counter()
    experiment, base, folder = load_experiment(path)
    experiment = override_executor(
        experiment, str(path), kind=executor, workers=workers, address=address
    )
    planned = plan_runs(experiment, base, str(path))
    out = Path(out_dir) if out_dir is not None else Path("outputs") / experiment.name
    _check_output_folder(out, experiment.name, resume=resume, overwrite=overwrite)
    settings = experiment.executor
    # Started before anything is written: a cluster that cannot be reached leaves no folder
    # and no record of runs that never had a chance to start, and replaces no results. Ctrl-C
    # terminates the executor rather than waiting for the runs in progress, which stay pending.
    # No more workers than runs: a process pool forks all of its workers at the first task.
    workers = min(settings.workers, len(planned))
    with make_executor(settings.kind, workers, settings.address) as pool:
        create_output_folder(out)
        # One batch writes a folder at a time; checked again once held, since another batch
        # may have written its results between the check above and now.
        with hold_folder(out, _busy(out)):
            _check_output_folder(
                out, experiment.name, resume=resume, overwrite=overwrite, held=True
            )
            if overwrite:
                remove_outputs(out, _RESULTS)
            create_output_folder(out / "runs")
            state_path = out / "experiment.json"
            records = _plan_records(out, planned, folder, resume=resume)
            state = _state(experiment, records)
            _write_json(state_path, state)
            # From here a failed write leaves results that --resume continues.
            with results_kept_in(out):
                by_id = {r["run_id"]: r for r in records}
                todo = [run for run in planned if by_id[run.run_id]["status"] != "complete"]
                skipped = len(planned) - len(todo)
                if todo:
                    # An earlier attempt's combined metrics lack the runs to come: stopped
                    # before the end, this one would leave them to read as the experiment's.
                    (out / "model_years.parquet").unlink(missing_ok=True)
                # Runs side by side keep the cores busy: their audits write on their own threads.
                alone = settings.kind == "serial" or (workers == 1 and settings.address is None)
                tasks = [
                    RunTask(r.run_id, r.config, str(folder), str(out / "runs"), spare_core=alone)
                    for r in todo
                ]
                bar = tqdm(
                    total=len(planned),
                    initial=skipped,
                    desc=experiment.name,
                    unit="run",
                    disable=None if progress is None else not progress,
                )
                try:
                    failed = _record_outcomes(pool.run(tasks), by_id, state, state_path, bar)
                finally:
                    bar.close()
                combine_metrics(out, records, experiment.swept_keys)
                state["wall_s"] = round(time.perf_counter() - start, 3)
                _write_json(state_path, state)
                return ExperimentResult(out, records, failed, skipped, state["wall_s"])


def _record_outcomes(
    outcomes: Iterable[RunOutcome],
    by_id: dict[str, dict[str, Any]],
    state: dict[str, Any],
    state_path: Path,
    bar: tqdm,
) -> int:
    """Record each run as it finishes, in ``state`` and, now and then, in ``state_path``.

    Args:
        outcomes: The runs as they finish.
        by_id: Every run's record in ``state``, by run id.
        state: What ``experiment.json`` holds.
        state_path: ``experiment.json``, rewritten as :data:`_STATE_WRITES` says.
        bar: The progress bar, moved on by each run.

    Returns:
        How many of the runs failed.
    """
    every, unwritten, failed = max(1, len(by_id) // _STATE_WRITES), 0, 0
    try:
        for outcome in outcomes:
            by_id[outcome.run_id].update(
                status=outcome.status,
                error=outcome.error,
                run_dir=f"runs/{outcome.run_id}" if outcome.run_dir else None,
                duration_s=round(outcome.duration_s, 3),
            )
            failed += outcome.status == "failed"
            unwritten += 1
            if unwritten >= every:
                unwritten = 0  # not tried again should this write fail
                _write_json(state_path, state)
            for warning in outcome.run_warnings:  # each names its run (its origin)
                warnings.warn(warning, stacklevel=3)
            bar.update()
            bar.set_postfix(done=bar.n - failed, failed=failed, left=bar.total - bar.n)
    except BaseException:
        # Ctrl-C, or a pool that failed: the runs finished since the last write are recorded
        # first. A full disk says so in the error already on its way out.
        if unwritten:
            with contextlib.suppress(OSError):
                _write_json(state_path, state)
        raise
    return failed


def _record(run: PlannedRun) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "point": run.point,
        "replicate": run.replicate,
        "seed": run.seed,
        "params": run.params,
        "status": "pending",
        "error": None,
        "run_dir": None,
        "duration_s": None,
    }


def _state(experiment: ExperimentConfig, records: list[dict[str, Any]]) -> dict[str, Any]:
    spec = experiment.model_dump(mode="json")  # with the executor that ran, overrides applied
    return {"schema_version": 1, "experiment": spec, "runs": records, "wall_s": None}


def combine_metrics(out: Path, records: list[dict[str, Any]], swept: list[str]) -> Path | None:
    """Write ``model_years.parquet`` from every complete run; return its path (or ``None``)."""
    complete = sorted(
        (r for r in records if r["status"] == "complete"),
        key=lambda r: (r["point"], r["replicate"]),
    )
    # One column per swept key; a list or mapping value is one cell (its JSON text).
    cells = {key: table_cells([r["params"].get(key) for r in complete]) for key in swept}
    frames = []
    for n, record in enumerate(complete):
        frame = pd.read_csv(out / record["run_dir"] / "model_years.csv")
        frame.insert(0, "run_id", record["run_id"])
        frame.insert(1, "point", record["point"])
        frame.insert(2, "replicate", record["replicate"])
        frame.insert(3, "seed", record["seed"])
        for position, key in enumerate(swept, start=4):
            frame.insert(position, key, cells[key][n])
        frames.append(frame)
    path = out / "model_years.parquet"
    if not frames:
        path.unlink(missing_ok=True)
        return None
    # Through a draft moved over it: a kill mid-write would leave a file cut short that the
    # report could not read, under an experiment.json that calls every run complete.
    draft = temporary_name(path)
    try:
        pd.concat(frames, ignore_index=True).to_parquet(draft, index=False)
    except OSError as err:  # a full disk: the part written would only hold space it lacks
        draft.unlink(missing_ok=True)
        err.filename = str(path)
        raise
    os.replace(draft, path)
    return path

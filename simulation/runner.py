"""Run one simulation and write its run directory.

A run directory holds ``manifest.json`` (what ran, with which versions, how it ended),
``config.resolved.yaml`` (the fully merged config, runnable from the run directory),
``skill_registry.yaml`` (a copy of the registry that ran), ``households.csv`` (the households'
fixed attributes, as a household table), ``model_years.csv`` (one row per year)
and the audit streams.

``manifest.json`` says how the run stands: ``running`` from the start (and after every
checkpoint), ``complete`` once every file is written, ``failed`` with the error when the run
raised. A run killed outright stays ``running``; its last checkpoint (``checkpoint.json``, taken
every ``checkpoint_every`` years) lets :func:`resume_run` continue it to the same outputs an
uninterrupted run writes, with the audit streams cut back to the checkpoint's committed offsets
so that no line is lost or written twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import shutil
import time
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, Strict, StrictStr, ValidationError
from tqdm import tqdm

from simulation import __version__
from simulation.atomic import replace_file, temporary_name
from simulation.audit.readers import _GZIP_MAGIC
from simulation.audit.writer import LLM_STREAM, STREAMS, AuditWriter, stream_names
from simulation.checkpoint import (
    CHECKPOINT_FILE,
    capture,
    read_checkpoint,
    restore,
    write_checkpoint,
)
from simulation.code_digest import code_digest
from simulation.collector import tuned_collector
from simulation.config import (
    ConfigError,
    ConfigWarning,
    create_output_folder,
    describe_validation_error,
    is_curve_file,
    load_config,
    read_yaml,
    remove_outputs,
)
from simulation.cores import usable_cores
from simulation.errors import InputError, spoken_list
from simulation.folder_lock import hold_folder
from simulation.model import FloodAdaptationModel
from simulation.output_kinds import run_directory_error
from simulation.yaml_errors import dump_yaml

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from simulation.config import RunConfig

__all__ = [
    "BACKGROUND_FROM_HOUSEHOLDS",
    "EXECUTION_KEYS",
    "REGISTRY_COPY",
    "RUN_FILES",
    "FallbackWarning",
    "KeptFilesWarning",
    "RunError",
    "RunResult",
    "build_model",
    "config_hash",
    "default_run_id",
    "fallback_summary",
    "input_digests",
    "resolve_for_run_dir",
    "resume_run",
    "run_config_intact",
    "run_simulation",
    "same_config",
]

# A progress bar, even a disabled one, starts tqdm's monitor thread (it only tunes how often a
# bar redraws), and a process with another thread is not forked safely: the batch's process
# pool then spawns its workers, which import floodsim again (about 1.2 s each; see
# simulation.experiments.executors.pool_start_method).
tqdm.monitor_interval = 0

#: Config keys that choose how a run is carried out, not what it writes: runs that differ only
#: in them write the same files, byte for byte (``audit.background`` moves the writing of the
#: lines to another thread, in the same order). They are left out of the config's hash, so they
#: do not change the run id, and a run may be resumed with them changed.
EXECUTION_KEYS: tuple[tuple[str, str], ...] = (("audit", "background"),)

#: ``audit.background: auto`` writes the lines behind the run from this many households up.
#: The two threads hand the GIL to each other about a hundred times a year, at a cost that
#: hardly grows with the population: on 2 cores a standard-level year of 1,000 households took
#: about 6 % longer with the thread (the median of 11 alternated pairs), 1,500 the same, and
#: from 2,000 up the thread paid (docs/performance.md).
BACKGROUND_FROM_HOUSEHOLDS = 2_000

#: Name of the registry copy inside a run directory.
REGISTRY_COPY = "skill_registry.yaml"

#: Name of the households' table inside a run directory (FloodAdaptationModel.household_table).
HOUSEHOLDS_FILE = "households.csv"

#: What floodsim writes into a run directory: the run's own files (with the temporary files of
#: its atomic rewrites and both forms of every audit stream), the ``report/`` folder of
#: ``floodsim report`` and the ``behaviour.csv`` and ``behaviour.png`` of ``floodsim
#: check-behaviour`` (whose default folder is the run directory). Replacing a run removes these,
#: and only these: what they say of the earlier run would be stale beside the new one.
RUN_FILES = (
    "manifest.json",  # first: a folder without it is no run that could pass for complete
    temporary_name(Path("manifest.json")).name,
    CHECKPOINT_FILE,
    temporary_name(Path(CHECKPOINT_FILE)).name,
    "config.resolved.yaml",
    REGISTRY_COPY,
    HOUSEHOLDS_FILE,
    "model_years.csv",
    *(f"{name}{suffix}" for name in (*STREAMS, LLM_STREAM) for suffix in (".jsonl", ".jsonl.gz")),
    "report",
    "behaviour.csv",
    "behaviour.png",
)

#: How many of the kept files' names the warning lists.
_KEPT_NAMES_SHOWN = 3


class _ResumedManifest(BaseModel):
    """What resuming a run reads of its ``manifest.json`` (the rest is for people to read)."""

    model_config = ConfigDict(extra="allow")

    run_id: StrictStr
    config_hash: StrictStr
    input_sha256: dict[str, StrictStr] | None = None  # absent from older manifests
    resumed: Annotated[int, Strict(), Field(ge=0)] = 0
    checkpoint_every: Annotated[int, Strict(), Field(ge=1)] | None = None
    duration_s: Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)] | None = None


class KeptFilesWarning(UserWarning):
    """A replaced run's folder held files floodsim did not write; they were kept."""


class FallbackWarning(UserWarning):
    """Decisions of a run fell back to the default skill (:func:`fallback_summary`).

    Warned at the end of every run that had any, as ``"<run id>: <summary>"``; ``floodsim
    run`` prints the summary itself, last.
    """


def fallback_summary(metrics: pd.DataFrame, default_skill: str) -> str:
    """How many decisions fell back to the default skill, as one sentence ('' when none did).

    A language model whose replies never validate, or whose server fails requests (answers
    with errors, times out, drops connections), still gives a complete run: those decisions fall
    back. The run's files record each failure, but a run in which most households could not
    decide should not look like a normal one. (An endpoint with nothing listening at all stops
    the run instead: :class:`~simulation.decisions.llm.EndpointUnreachable`.) ``floodsim run``
    and ``floodsim batch`` (for each of its runs) both say it in these words.

    Args:
        metrics: The run's yearly metrics (``invalid_proposals`` and ``decisions_*`` columns).
        default_skill: The registry's default skill, which those decisions became.
    """
    fallbacks = int(metrics["invalid_proposals"].sum())
    if not fallbacks:
        return ""
    decisions = int(metrics[[c for c in metrics.columns if c.startswith("decisions_")]].sum().sum())
    share = fallbacks / max(decisions, 1)
    return (
        f"{fallbacks:,} of {decisions:,} decisions "
        f"({share:.{1 if share < 0.01 else 0}%}) fell back to {default_skill}: invalid "
        "proposals or failed language-model calls (see the traces' validation and llm_calls)"
    )


class RunError(InputError):
    """A run directory that cannot be resumed (the message names it and says why)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished run: where it was written and its yearly metrics."""

    run_dir: Path
    metrics: pd.DataFrame
    model: FloodAdaptationModel


def config_hash(config: RunConfig, *, execution_keys: bool = False) -> str:
    """SHA-256 of the canonical JSON of the resolved config, without :data:`EXECUTION_KEYS`.

    Args:
        config: The resolved config (:func:`resolve_for_run_dir`).
        execution_keys: Hash :data:`EXECUTION_KEYS` too, as the manifests of runs written
            before they were left out do (:func:`same_config` accepts both).
    """
    data = config.to_yaml_dict()
    if not execution_keys:
        for section, key in EXECUTION_KEYS:
            del data[section][key]
    return hashlib.sha256(orjson.dumps(data, option=orjson.OPT_SORT_KEYS)).hexdigest()


def same_config(config: RunConfig, recorded: object) -> bool:
    """Whether ``recorded`` (a manifest's ``config_hash``) is the hash of ``config``.

    A manifest written before :data:`EXECUTION_KEYS` were left out of the hash records the
    hash with them; it still names the same run, and resuming it or keeping it in a batch must
    not depend on when it was started.
    """
    return recorded == config_hash(config) or recorded == config_hash(config, execution_keys=True)


def run_config_intact(run_dir: Path, manifest: dict[str, Any]) -> bool:
    """Whether ``run_dir``'s ``config.resolved.yaml`` is still the config its manifest records.

    A run directory is runnable, and read, from that file: one edited since the run would
    describe other results than those beside it.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a check, not a run: the file's remarks are moot
            config, _ = load_config(run_dir / "config.resolved.yaml")
    except (ConfigError, OSError):
        return False
    return same_config(resolve_for_run_dir(config, run_dir), manifest.get("config_hash"))


def input_digests(config: RunConfig, base_dir: Path) -> dict[str, str]:
    """SHA-256 of each file ``config`` reads, by the key that names it (``registry`` first).

    A resolved config names these files by path only. Their digests in the run id and the
    manifest make an edited registry, household table, curve file, raster, decision script or
    prompt give a new run rather than replace the earlier one. The language model's response
    cache is left out: runs add to it.
    """
    return {
        key: hashlib.sha256((base_dir / path).read_bytes()).hexdigest()
        for key, path in _input_files(config).items()
    }


def _input_files(config: RunConfig) -> dict[str, str]:
    """The files ``config`` reads, by the key that names them (``registry`` first)."""
    files = {"registry": config.registry}
    if config.households.table is not None:
        files["households.table"] = config.households.table
    if is_curve_file(config.damage.curves):
        files["damage.curves"] = config.damage.curves
    for year, path in sorted(config.hazard.rasters.items()):
        files[f"hazard.rasters.{year}"] = path
    decision = config.decision
    if decision.script is not None:
        files["decision.script"] = decision.script
    if decision.policy == "llm" and decision.llm.prompt is not None:
        files["decision.llm.prompt"] = decision.llm.prompt
    return files


def default_run_id(config: RunConfig, base_dir: str | Path) -> str:
    """The id :func:`run_simulation` gives a run of ``config`` by default, without running it.

    ``<name>-s<seed>-<first 8 hex digits of the run digest>`` (see :func:`_run_digest`).

    Args:
        config: A validated config.
        base_dir: The folder its relative paths are relative to (the config file's folder).
    """
    base_dir = Path(base_dir)
    config_digest = config_hash(resolve_for_run_dir(config, base_dir))
    return _run_id(config, config_digest, input_digests(config, base_dir))


def _run_id(config: RunConfig, config_digest: str, inputs: dict[str, str]) -> str:
    return f"{config.name}-s{config.seed}-{_run_digest(config_digest, inputs)[:8]}"


def _run_digest(digest: str, inputs: dict[str, str]) -> str:
    """What makes two runs the same run: a digest of the config's hash and its inputs' digests.

    The two are :func:`config_hash` of the resolved config and :func:`input_digests`. A
    manifest records both (``config_hash``, ``input_sha256``); the run id ends with the first 8
    hex digits of this digest.
    """
    canonical = orjson.dumps({"config": digest, "inputs": inputs}, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def resolve_for_run_dir(config: RunConfig, base_dir: Path) -> RunConfig:
    """The config as a run directory records it: runnable from that directory.

    The registry is copied into the run directory (``skill_registry.yaml``); other files the
    config names (household table, curve file, rasters) are made absolute.
    """
    households = config.households
    if households.table is not None:
        households = households.model_copy(
            update={"table": str((base_dir / households.table).resolve())}
        )
    damage = config.damage
    if is_curve_file(damage.curves):
        damage = damage.model_copy(update={"curves": str((base_dir / damage.curves).resolve())})
    hazard = config.hazard.model_copy(
        update={
            "rasters": {y: str((base_dir / p).resolve()) for y, p in config.hazard.rasters.items()}
        }
    )
    decision = config.decision
    if decision.script is not None:
        decision = decision.model_copy(
            update={"script": str((base_dir / decision.script).resolve())}
        )
    if decision.policy == "llm":  # pmt runs keep location-independent configs (and hashes)
        llm = decision.llm
        llm = llm.model_copy(
            update={
                "cache": str(llm.cache_path(base_dir).resolve()),
                "prompt": None if llm.prompt is None else str((base_dir / llm.prompt).resolve()),
            }
        )
        decision = decision.model_copy(update={"llm": llm})
    return config.model_copy(
        update={
            "decision": decision,
            "registry": REGISTRY_COPY,
            "households": households,
            "damage": damage,
            "hazard": hazard,
        }
    )


def build_model(
    config: RunConfig,
    base_dir: str | Path,
    origin: str = "config",
    origin_of: Callable[[tuple[str, ...]], str] | None = None,
) -> FloodAdaptationModel:
    """Build the model, checking what the config refers to (registry, curves, files).

    Args:
        config: The validated config.
        base_dir: Folder relative paths in the config refer to.
        origin: The config file's name, for error messages.
        origin_of: Names what gave the value at a key (its ``--set`` flag, or the file of the
            ``base:`` chain that set it) in the error about it
            (:func:`simulation.config.setting_origin`).

    Raises:
        ConfigError: As :class:`~simulation.model.FloodAdaptationModel` raises it.
        ValueError: Subclasses naming the file and key for registry, curve, hazard and
            household-table problems.
    """
    # Building allocates millions of long-lived objects; with automatic collection on, the
    # collector rescans the growing heap again and again (more than half of the build time at
    # 50,000 households). Whatever cyclic garbage the build leaves is collected afterwards.
    with tuned_collector():
        return FloodAdaptationModel(config, Path(base_dir), origin, origin_of)


def run_simulation(
    config: RunConfig,
    base_dir: str | Path,
    out_root: str | Path,
    *,
    progress: bool | None = None,
    model: FloodAdaptationModel | None = None,
    run_id: str | None = None,
    checkpoint_every: int | None = None,
    spare_core: bool = True,
) -> RunResult:
    """Run ``config`` for its years and write the run directory under ``out_root``.

    Args:
        config: The validated config.
        base_dir: Folder relative paths in the config refer to.
        out_root: Folder that receives the run directory.
        progress: Show a progress bar (``None``: only on a terminal).
        model: A model built from ``config`` and not yet stepped (built here when omitted).
        run_id: Name of the run directory; ``<name>-s<seed>-<digest>`` by default, where the
            digest covers the resolved config and the contents of the files it names
            (:func:`_run_digest`). An earlier run of that name under ``out_root`` is replaced:
            the files floodsim wrote there (:data:`RUN_FILES`) are removed, any others are kept
            with a :class:`KeptFilesWarning`.
        checkpoint_every: Write a checkpoint every this many years (``None``: never).
        spare_core: Whether a core is free for the audit's background thread
            (``audit.background: auto``); ``False`` where other runs keep every core busy.

    Returns:
        The run directory, the metrics table and the model.

    Raises:
        ValueError: For a ``model`` already stepped or built from another config: the run
            directory would record years or settings the run did not have.
    """
    if model is None:
        model = build_model(config, base_dir)
    elif model.steps or (model.config is not config and model.config != config):
        problem = (
            f"was already stepped {model.steps} year{'' if model.steps == 1 else 's'}"
            if model.steps
            else "has another config"
        )
        msg = (
            f"model: {problem}; run_simulation needs a model freshly built from config "
            "(build_model), or none (to resume a run: resume_run)"
        )
        raise ValueError(msg)
    out_root, base_dir = Path(out_root), Path(base_dir)
    resolved = resolve_for_run_dir(config, base_dir)
    digest, inputs = config_hash(resolved), input_digests(config, base_dir)
    run_id = run_id or _run_id(config, digest, inputs)
    # Read before an earlier run of this id is removed: a config re-run from its own run
    # directory names the registry copy in it.
    registry = (base_dir / config.registry).read_bytes()
    if error := run_directory_error(out_root):
        raise RunError(error)
    create_output_folder(out_root)
    run_dir = out_root / run_id
    if os.path.lexists(run_dir) and not run_dir.is_dir():  # mkdir would say only "File exists"
        what = "a link to nowhere" if run_dir.is_symlink() else "a file"
        msg = f"{run_dir}: {what} where the run's folder goes: move it away or choose another --out"
        raise RunError(msg)
    run_dir.mkdir(exist_ok=True)
    with hold_folder(run_dir, _busy(run_dir)):
        _clear_run_dir(run_dir)
        (run_dir / REGISTRY_COPY).write_bytes(registry)
        (run_dir / "config.resolved.yaml").write_text(
            dump_yaml(resolved.to_yaml_dict(), sort_keys=False), encoding="utf-8"
        )
        _write_households(model, run_dir)
        manifest = {
            "schema_version": 1,
            "run_id": run_id,
            "name": config.name,
            "seed": config.seed,
            "config_hash": digest,
            "registry_sha256": inputs["registry"],
            "input_sha256": inputs,
            "status": "running",
            "error": None,
            "started_at": _now(),
            "finished_at": None,
            "duration_s": None,
            "resumed": 0,
            "checkpoint_every": checkpoint_every,
            "checkpoint_year": None,
            # Years whose audit lines are all written out: a run stopped later may have left part
            # of the next year in its streams, which readers must not take for the whole year.
            "year_reached": 0,
            "counts": {
                "households": len(model.households),
                "years": config.years,
                "household_years": len(model.households) * config.years,
            },
            "versions": {
                "floodsim": __version__,
                # The version names no commit: the digest tells the code that ran (see
                # simulation.code_digest), and a resume under other code is warned of.
                "code": code_digest(),
                "mesa": version("mesa"),
                "numpy": version("numpy"),
                "python": platform.python_version(),
            },
        }
        _write_manifest(run_dir, manifest)
        _warn_if_the_audit_will_not_fit(run_dir, config, len(model.households), config.years)
        writer = _open_audit(model, config, run_dir, manifest, spare_core=spare_core)
        return _drive(model, config, run_dir, manifest, writer, progress)


def _open_audit(
    model: FloodAdaptationModel,
    config: RunConfig,
    run_dir: Path,
    manifest: dict[str, Any],
    *,
    resume: dict[str, Any] | None = None,
    spare_core: bool = True,
) -> AuditWriter | None:
    """The run's writer, given to the model; a failure fails the run, as one in its years does.

    A fresh writer is attached (it writes the initial memories); one resuming from a
    checkpoint's ``resume`` offsets continues streams that already hold them.
    """
    writer = None
    try:
        writer = _writer(
            run_dir,
            manifest["run_id"],
            config,
            len(model.households),
            resume=resume,
            spare_core=spare_core,
        )
        if writer is not None and resume is None:
            model.attach_audit(writer)  # gives the model the writer too
        else:
            model.audit = writer
    except BaseException as err:
        _record_failure(run_dir, manifest, err, writer)
        raise
    return writer


def _record_failure(
    run_dir: Path,
    manifest: dict[str, Any],
    err: BaseException,
    writer: AuditWriter | None,
    stepped: int | None = None,
) -> None:
    """Close the streams and mark the run failed after ``err``.

    ``stepped``, for a writer whose thread wrote behind the run: the last year stepped, which
    the manifest vouches for once every line handed to the thread is written.
    """
    err.add_note(f"run directory: {run_dir}")
    if writer is not None and writer.abandon() and stepped is not None:
        manifest["year_reached"] = stepped
    manifest.update(status="failed", error=f"{type(err).__name__}: {err}", finished_at=_now())
    # The disk may be full: the run then stays resumable from its last checkpoint.
    with contextlib.suppress(OSError):
        _write_manifest(run_dir, manifest)


def _busy(run_dir: Path, *, resuming: bool = False) -> RunError:
    """The refusal of a second writer of ``run_dir``.

    That is the same config and seed started twice, or a run resumed while it still runs.
    A resume writes its own folder only: the advice to give another folder is for a new run.
    """
    instead = "" if resuming else ", or give --out another folder"
    msg = (
        f"{run_dir}: another floodsim process is writing this run directory (the same config "
        f"and seed, or its --resume); wait for it to end{instead}"
    )
    return RunError(msg)


def _clear_run_dir(run_dir: Path) -> None:
    """Remove what floodsim wrote into ``run_dir`` (:data:`RUN_FILES`); warn of what is kept.

    Notes, data or scripts the user put in a run directory are theirs: replacing the run must
    not delete them, but they now sit beside another run, which the warning says.
    ``manifest.json`` goes first, so that a replacement stopped halfway leaves no folder that
    claims a complete run (``floodsim batch --resume`` would keep it) or a checkpoint to resume.
    """
    remove_outputs(run_dir, RUN_FILES)
    kept = sorted(path.name for path in run_dir.iterdir())
    if kept:
        more = ", ..." if len(kept) > _KEPT_NAMES_SHOWN else ""
        shown = ", ".join(kept[:_KEPT_NAMES_SHOWN]) + more
        files = "file" if len(kept) == 1 else "files"
        warnings.warn(
            KeptFilesWarning(
                f"{run_dir}: kept {len(kept)} {files} floodsim did not write ({shown})"
            ),
            stacklevel=3,
        )


def resume_run(
    run_dir: str | Path,
    *,
    progress: bool | None = None,
    checkpoint_every: int | None = None,
    on_built: Callable[[FloodAdaptationModel], None] | None = None,
) -> RunResult:
    """Continue an interrupted run from its last checkpoint (or from the start without one).

    The run keeps its config (``config.resolved.yaml``), its folder and its run id; the years
    after the checkpoint are run again and give the files an uninterrupted run gives.

    Args:
        run_dir: The run directory of the interrupted run.
        progress: Show a progress bar (``None``: only on a terminal).
        checkpoint_every: Write a checkpoint every this many years from now on (``None``: as
            the run was started).
        on_built: Called with the model once it is rebuilt and restored, before any year
            runs (``floodsim run --resume`` names the run and its engine there).

    Returns:
        The run directory, the metrics table and the model, as :func:`run_simulation`.

    Raises:
        RunError: When ``run_dir`` is not a run directory, the run already completed, its
            config or an input file changed since it started, its checkpoint is unusable, or
            another process is writing it (the run itself, still going).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        msg = f"{run_dir}: not a run directory (no readable manifest.json)"
        raise RunError(msg)
    # Held before the manifest is read: a run still going says "running" too.
    with hold_folder(run_dir, _busy(run_dir, resuming=True)):
        try:
            return _resume_held(run_dir, progress, checkpoint_every, on_built)
        except KeyboardInterrupt as err:
            # Ctrl-C while the model is rebuilt, before the run notes its directory: the
            # directory is as resumable as it was, and the message should say so.
            note = f"run directory: {run_dir}"
            if note not in getattr(err, "__notes__", []):
                err.add_note(note)
            raise


def _manifest_to_resume(run_dir: Path) -> dict[str, Any]:
    """The manifest of a run to resume, refused unless it is one a resumable run wrote.

    Raises:
        RunError: For no readable manifest, a complete run, or values changed since.
    """
    try:
        manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        manifest = None
    if not isinstance(manifest, dict):  # unreadable, or JSON but not a manifest's object
        msg = f"{run_dir}: not a run directory (no readable manifest.json)"
        if not (run_dir / "manifest.json").exists() and (run_dir / REGISTRY_COPY).is_file():
            # Killed in the instant between the registry's copy and the manifest: the run
            # had not begun, and running its config again replaces the folder.
            msg += (
                "; the run was stopped before it wrote one, so there is nothing to resume: "
                "run its config again, which replaces this folder"
            )
        raise RunError(msg)
    if manifest.get("status") == "complete":
        msg = f"{run_dir}: the run is already complete; nothing to resume"
        raise RunError(msg)
    try:
        _ResumedManifest.model_validate(manifest)
    except ValidationError as err:
        where = run_dir / "manifest.json"
        problem = describe_validation_error(err, str(where))
        msg = f"{problem}; it was changed since the run wrote it, so the run cannot be resumed"
        raise RunError(msg) from None
    return manifest


def _resume_held(
    run_dir: Path,
    progress: bool | None,
    checkpoint_every: int | None,
    on_built: Callable[[FloodAdaptationModel], None] | None,
) -> RunResult:
    """:func:`resume_run`, once this process holds ``run_dir``."""
    manifest = _manifest_to_resume(run_dir)
    origin = str(run_dir / "config.resolved.yaml")
    config, _ = load_config(origin)
    _refuse_if_changed(config, run_dir, manifest)
    model = build_model(config, run_dir, origin)
    _write_households(model, run_dir)  # a run started before floodsim wrote it lacks it
    try:
        checkpoint = read_checkpoint(run_dir)
        if checkpoint is not None:
            restore(model, checkpoint)
            streams = checkpoint["streams"]
    except (ValueError, KeyError, TypeError) as err:  # orjson's decode error is a ValueError
        msg = f"{run_dir / CHECKPOINT_FILE}: not a usable checkpoint of this run ({err})"
        raise RunError(msg) from None
    if checkpoint is not None:
        _check_stream_files(run_dir, config, streams)
    if on_built is not None:
        on_built(model)
    # Opening the streams cuts them to the checkpoint (to nothing without one): from here the
    # manifest vouches for no later year, whatever happens next.
    manifest["year_reached"] = checkpoint["year"] if checkpoint is not None else 0
    if checkpoint is not None:
        # The initial memories are already in the streams.
        writer = _open_audit(model, config, run_dir, manifest, resume=streams)
    else:  # killed before the first checkpoint: start over in the same directory
        writer = _open_audit(model, config, run_dir, manifest)
    try:
        if checkpoint is not None:
            _warn_if_the_code_changed(run_dir, manifest, checkpoint["year"])
        else:  # every year runs again, under this code alone
            manifest.setdefault("versions", {})["code"] = code_digest()
        if checkpoint_every is not None:
            manifest["checkpoint_every"] = checkpoint_every
        manifest.update(status="running", error=None, resumed=manifest.get("resumed", 0) + 1)
        _write_manifest(run_dir, manifest)
        years_left = config.years - manifest["year_reached"]
        _warn_if_the_audit_will_not_fit(run_dir, config, len(model.households), years_left)
    except BaseException as err:  # a warning made an error, a full disk: the streams are open
        _record_failure(run_dir, manifest, err, writer)
        raise
    return _drive(model, config, run_dir, manifest, writer, progress)


def _refuse_if_changed(config: RunConfig, run_dir: Path, manifest: dict[str, Any]) -> None:
    """Refuse to resume a run whose config or input files changed since it started.

    Raises:
        RunError: Naming what changed (and, for a config this code reads otherwise, the keys
            the file lacks).
    """
    changed = _changed_since_start(config, run_dir, manifest)
    if changed is None:
        return
    started = _last_code(manifest)
    if changed == "config.resolved.yaml" and started not in (None, code_digest()):
        # An unedited file can differ too: this code may read it with a key the run's code
        # did not have, or another default, and would not continue the same model.
        added = _keys_the_file_lacks(config, run_dir)
        which = (
            f"; this code reads {spoken_list(added, most=3)}, which the file does not have"
            if added
            else ""
        )
        changed = (
            f"{changed} is not the config the run started with: edited since, or read "
            "with a config key or default that this floodsim code added or changed (code "
            f"{str(started)[:12]} then, {code_digest()[:12]} now{which})"
        )
    else:
        changed += " changed since the run started"
    msg = f"{run_dir}: {changed}, so it cannot be resumed; start a new run instead"
    raise RunError(msg)


def _last_code(manifest: dict[str, Any]) -> str | None:
    """The digest of the code the run last ran under (``None``: not recorded, an old run)."""
    versions = manifest.get("versions") or {}
    return (versions.get("code_at_resume") or [versions.get("code")])[-1]


def _warn_if_the_code_changed(run_dir: Path, manifest: dict[str, Any], year: int) -> None:
    """Warn of a resume under other floodsim code than the run started with, and record it.

    Not refused: the change may be a fix the user wants for the years left. But the years
    before and after the checkpoint then come from two versions of the model, which neither
    would have written alone, and the manifest keeps both digests to say so.
    """
    versions = manifest.setdefault("versions", {})
    latest = _last_code(manifest)  # a second resume under the same new code is no change
    now = code_digest()
    if latest is None or latest == now:  # a run started before digests were recorded
        return
    versions.setdefault("code_at_resume", []).append(now)
    warnings.warn(
        f"{run_dir}: resumed under other floodsim code than it last ran under (code "
        f"{str(latest)[:12]} then, {now[:12]} now): years 1 to {year} come from other code "
        "than the rest, as no one version alone would have written them",
        ConfigWarning,
        stacklevel=3,
    )


#: Audit bytes a household-year writes at each level: the default config's (1,000 households
#: for 10 years wrote 282, 1,837 and 4,080) rounded up. An estimate to warn by, not a bound:
#: larger memories retrieve and list more ids.
AUDIT_BYTES_PER_HOUSEHOLD_YEAR = {"minimal": 300, "standard": 2_000, "full": 4_500}
#: How many times smaller ``audit.gzip`` makes the streams, rounded down (about 20 measured).
_GZIP_SHRINKS = 16


def _warn_if_the_audit_will_not_fit(
    run_dir: Path, config: RunConfig, households: int, years: int
) -> None:
    """Warn before the years run when their audit trail would not fit on the disk.

    A run that fills the disk stops with exit code 1 and is resumed once there is room, but
    only after hours, perhaps: 20,000 households for 1,000 years at ``standard`` wrote
    30 GB in two minutes. Warned, not refused: the estimate is rough, and the free space may
    change while the run goes on.
    """
    audit = config.audit
    per_household_year = AUDIT_BYTES_PER_HOUSEHOLD_YEAR.get(audit.level)
    if per_household_year is None or households == 0:  # level off
        return
    sample = audit.sample
    share = sample if isinstance(sample, float) else min(1.0, len(sample) / households)
    size = per_household_year * households * years * share / (_GZIP_SHRINKS if audit.gzip else 1)
    try:
        free = shutil.disk_usage(run_dir).free
    except OSError:  # a file system that does not say: nothing to compare with
        return
    if size > free:
        msg = (
            f"{run_dir}: the audit trail will take about {_size(size)} at level {audit.level}, "
            f"and {_size(free)} is free: the run would stop once the disk is full (it can be "
            "resumed when there is room). audit.gzip: true writes about a sixteenth of it, "
            "audit.sample a share of the households, a lower audit.level less"
        )
        warnings.warn(msg, ConfigWarning, stacklevel=3)


def _size(size: float) -> str:
    """Bytes as GB from a gigabyte up, else as MB (``"35.2 GB"``, ``"0.4 MB"``)."""
    return f"{size / 1e9:,.1f} GB" if size >= 1e9 else f"{size / 1e6:,.1f} MB"


def _check_stream_files(
    run_dir: Path, config: RunConfig, streams: dict[str, dict[str, int]]
) -> None:
    """Refuse to resume when a stream file no longer holds what the checkpoint committed.

    Resuming truncates each stream to its committed offset and appends; a file that is missing
    or shorter than that offset (cut, replaced or deleted since) would be padded or restarted,
    and the run would end ``complete`` with a corrupt or partial audit trail.

    Raises:
        RunError: Naming the stream file and what it lacks, or the checkpoint when it commits
            other streams than the run's audit level writes (one it lacks would be restarted)
            or an offset that is not where a year ended.
    """
    written = stream_names(config.audit.level, llm=config.decision.policy == "llm")
    if set(streams) != set(written):
        msg = (
            f"{run_dir / CHECKPOINT_FILE}: not a usable checkpoint of this run (streams: it "
            f"commits {sorted(streams)}, the run writes {sorted(written)})"
        )
        raise RunError(msg)
    suffix = ".jsonl.gz" if config.audit.gzip else ".jsonl"
    for name, committed in streams.items():
        path = run_dir / f"{name}{suffix}"
        offset = committed["offset"]
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            problem = "missing"
        else:
            if size >= offset:
                _check_committed_offset(run_dir, path, offset, gzip=config.audit.gzip)
                continue
            problem = f"has {size} bytes"
        msg = (
            f"{path}: {problem}, but the checkpoint committed {offset} bytes of it: the stream "
            "was cut, replaced or removed since, so the run cannot be resumed; start a new run "
            "instead"
        )
        raise RunError(msg)


def _check_committed_offset(run_dir: Path, path: Path, offset: int, *, gzip: bool) -> None:
    """Refuse a committed offset that is not where a year ended: resuming cuts the file there.

    A commit ends a line, and in a gzip stream a member: the byte before the offset is a
    newline, or the bytes from it start the next member (as much of its header as a run
    killed while writing it left).
    """
    if offset == 0:
        return
    with path.open("rb") as fh:
        fh.seek(offset - 1)
        around = fh.read(3)
    ends = _GZIP_MAGIC.startswith(around[1:]) if gzip else around[:1] == b"\n"
    if not ends:
        kind = "a gzip member" if gzip else "a line"
        msg = (
            f"{run_dir / CHECKPOINT_FILE}: not a usable checkpoint of this run (streams: offset "
            f"{offset} of {path.name} is not at the end of {kind}, where the run committed it)"
        )
        raise RunError(msg)


def _write_households(model: FloodAdaptationModel, run_dir: Path) -> None:
    """Write the households' table into ``run_dir`` unless it is there (a resumed run's is)."""
    path = run_dir / HOUSEHOLDS_FILE
    if not path.is_file():
        model.household_table().to_csv(path, index=False)


def _keys_the_file_lacks(config: RunConfig, run_dir: Path) -> list[str]:
    """The dotted keys of ``config`` that its ``config.resolved.yaml`` does not spell out.

    A file written by earlier code lacks the keys later code added, which the config then
    takes at their defaults: the likeliest reason it no longer hashes as the run's did.
    """
    try:
        written = read_yaml(run_dir / "config.resolved.yaml")
    except ConfigError:
        return []  # load_config read it a moment ago: only a concurrent change gets here
    now = resolve_for_run_dir(config, run_dir).to_yaml_dict()
    return sorted(_dotted_keys(now) - _dotted_keys(written))


def _dotted_keys(data: object, prefix: str = "") -> set[str]:
    """Every key of a nested mapping, dotted (``damage.renter_contents_ratio``)."""
    if not isinstance(data, dict):
        return set()
    keys = set()
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        keys.add(dotted)
        keys |= _dotted_keys(value, f"{dotted}.")
    return keys


def _changed_since_start(config: RunConfig, run_dir: Path, manifest: dict[str, Any]) -> str | None:
    """What of a run's config and inputs differs from what its manifest recorded, if anything.

    The years a run already wrote came from those: continuing with others would make one run
    out of two.

    Raises:
        RunError: When a file the config names is missing or unreadable (naming its key).
    """
    for key, path in _input_files(config).items():
        file = run_dir / path
        if not file.is_file() or not os.access(file, os.R_OK):
            msg = (
                f"{run_dir}: the file of {key} ({file}) is missing or unreadable, so the run "
                "cannot be resumed; put it back, or start a new run instead"
            )
            raise RunError(msg)
    resolved = resolve_for_run_dir(config, run_dir)
    if not same_config(resolved, manifest.get("config_hash")):
        return "config.resolved.yaml"
    inputs = input_digests(config, run_dir)
    recorded = manifest.get("input_sha256")
    if recorded is None:  # a manifest from before inputs were recorded
        return None
    for key in sorted(inputs.keys() | recorded.keys()):
        if inputs.get(key) != recorded.get(key):
            return f"the file of {key}"
    return None


def _writer(
    run_dir: Path,
    run_id: str,
    config: RunConfig,
    households: int,
    resume: dict[str, Any] | None,
    *,
    spare_core: bool = True,
) -> AuditWriter | None:
    if config.audit.level == "off":
        return None
    # Only the array engine's batch methods gain from a background thread; the object path
    # logs line by line. Without a core to spare the thread would only take turns with the run,
    # and in a short year the turns cost more than the thread saves.
    background = config.audit.background
    if background == "auto":
        background = spare_core and usable_cores() > 1 and households >= BACKGROUND_FROM_HOUSEHOLDS
    return AuditWriter(
        run_dir,
        run_id,
        config.audit,
        config.seed,
        llm=config.decision.policy == "llm",
        resume=resume,
        background=background and config.engine == "arrays",
    )


def _drive(
    model: FloodAdaptationModel,
    config: RunConfig,
    run_dir: Path,
    manifest: dict[str, Any],
    writer: AuditWriter | None,
    progress: bool | None,
) -> RunResult:
    """Step the remaining years (checkpointing when due) and finish the run directory."""
    every = manifest.get("checkpoint_every")
    behind = writer is not None and writer.writes_behind
    stepped = model.steps  # the last year stepped to its end
    clock = time.perf_counter()
    try:
        bar = tqdm(
            range(model.steps + 1, config.years + 1),
            desc=manifest["run_id"],
            unit="year",
            disable=None if progress is None else not progress,
            leave=False,
        )
        # No collection first: build_model collected before building and building leaves no
        # cyclic garbage (tests/test_collector.py checks), so a full pass would only trace the
        # new model, which took half a second at 50,000 households, once per batch run.
        with tuned_collector(pause=model.llm is None, collect=False):
            if model.steps < config.years:
                model.prepare()  # a one-off cost of the run, not of its first year
            for year in bar:
                model.step()
                stepped = year
                # year_reached vouches for whole years in the streams: lines written behind
                # the run (audit.background) are whole up to the year before the last step.
                manifest["year_reached"] = year - 1 if behind else year
                if every and year % every == 0 and year < config.years:
                    streams = writer.commit() if writer is not None else {}  # waits for all
                    write_checkpoint(run_dir, capture(model, streams))
                    manifest["checkpoint_year"] = manifest["year_reached"] = year
                _write_manifest(run_dir, manifest)
        metrics = model.metrics()
        metrics.to_csv(run_dir / "model_years.csv", index=False)
        audit = writer.close() if writer is not None else {"level": "off", "streams": {}}
        # A complete run needs no checkpoint; it goes first, so that a run killed between the
        # two steps is not left complete with a checkpoint nothing would ever remove.
        (run_dir / CHECKPOINT_FILE).unlink(missing_ok=True)
        manifest.update(
            status="complete",
            year_reached=stepped,  # the writer has closed: every year's lines are out
            finished_at=_now(),
            duration_s=round((manifest.get("duration_s") or 0.0) + time.perf_counter() - clock, 3),
            audit=audit,
        )
        _write_manifest(run_dir, manifest)
    except BaseException as err:
        _record_failure(run_dir, manifest, err, writer, stepped if behind else None)
        raise
    finally:
        if model.llm is not None:
            model.llm.close()
    model.warn_unused_inputs()  # after the files: a warning made an error leaves them complete
    fallbacks = fallback_summary(metrics, model.registry.default_skill)
    if fallbacks:  # last, after the run's own warnings
        warnings.warn(FallbackWarning(f"{manifest['run_id']}: {fallbacks}"), stacklevel=3)
    return RunResult(run_dir, metrics, model)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Replace ``manifest.json`` atomically."""
    replace_file(run_dir / "manifest.json", orjson.dumps(manifest, option=orjson.OPT_INDENT_2))

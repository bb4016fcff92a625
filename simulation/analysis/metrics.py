"""Tables for analysing run directories: yearly shares, threat appraisal, memory composition.

Every function takes a run directory or a DataFrame and returns a DataFrame, so notebooks, the
``floodsim report`` command and tests share one definition of each quantity. Audit streams
(``household_traces``, ``memory_updates``, ...) are optional: a run written with ``audit.level:
off`` (or before the audit writer existed) still has ``model_years.csv``, and the functions that
need a missing stream return an empty frame instead of failing.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from dataclasses import dataclass, field
from numbers import Integral
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pandas as pd
import yaml

from simulation.audit.readers import (
    BASE_COLUMNS,
    AuditReadError,
    experiment_folder_error,
    iter_records,
    naming_damaged_lines,
    not_a_folder_error,
    read_manifest,
    read_stream,
    retrievals,
    sample_hint,
)
from simulation.audit.readers import stream_path as find_stream
from simulation.errors import InputError
from simulation.input_files import not_a_file
from simulation.metric_columns import COUNT_METRICS

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "DAMAGE_COLUMNS",
    "SHARE_COLUMNS",
    "WRITE_PREFIX",
    "RunData",
    "RunDirError",
    "adaptation_shares",
    "check_run_dir",
    "combine_runs",
    "damage_and_claims",
    "flood_events",
    "household_decisions",
    "household_retrievals",
    "load_run",
    "memory_composition",
    "read_metrics_csv",
    "read_stream_frame",
    "stream_path",
    "table_cells",
    "take_up",
    "tp_distribution",
    "tp_summary",
]

#: Share columns of ``model_years.csv``, in plotting order: fractions of active households,
#: except ``relocated_share``, the fraction of all households that have moved away.
SHARE_COLUMNS = (
    "insured_share",
    "insured_share_ae",
    "insured_share_x",
    "elevated_share",
    "relocated_share",
)
#: Columns :func:`damage_and_claims` returns.
DAMAGE_COLUMNS = ("damage_musd", "claims_paid_musd", "flooded_households")
#: Prefix of the memory-write count columns of :func:`memory_composition`.
WRITE_PREFIX = "writes_"


# Columns model_years.csv must have for any analysis: those DESIGN.md section 7 guarantees.
_REQUIRED_METRICS = (
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
# What a run names a metric: a header joined to the row below it has numbers among its names.
_METRIC_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Memory sources in a fixed order, so stacked bars keep their colours from run to run.
_SOURCE_ORDER = ("flood", "claim", "decision", "policy", "neighbor", "seed", "reflection", "other")
_STREAM_SUFFIXES = (".jsonl", ".jsonl.gz")


class RunDirError(InputError):
    """A folder is not a readable run directory; the message names the path and the problem."""


@dataclass(frozen=True, slots=True)
class RunData:
    """What every analysis of a run starts from.

    Attributes:
        run_dir: The run directory.
        manifest: ``manifest.json`` as a dict.
        config: ``config.resolved.yaml`` as a dict (empty when the file is missing).
        metrics: ``model_years`` (one row per year).
    """

    run_dir: Path
    manifest: dict[str, Any]
    config: dict[str, Any] = field(repr=False)
    metrics: pd.DataFrame = field(repr=False)

    @property
    def run_id(self) -> str:
        """The run id from the manifest (the folder name when the manifest has none)."""
        return str(self.manifest.get("run_id") or self.run_dir.name)


def _metrics_path(run_dir: Path) -> Path | None:
    for name in ("model_years.csv", "model_years.parquet"):
        if (run_dir / name).is_file():
            return run_dir / name
    return None


def check_run_dir(run_dir: str | Path) -> Path:
    """Return ``run_dir`` as a Path after checking it holds a manifest and model_years.

    Raises:
        RunDirError: When the folder is missing, is not a folder, or lacks ``manifest.json``
            or ``model_years.csv``.
    """
    path = Path(run_dir)
    if not path.exists():
        msg = f"{path}: run directory does not exist"
        raise RunDirError(msg)
    if not path.is_dir():
        msg = f"{path}: not a directory (expected a run directory)"
        raise RunDirError(msg)
    if error := experiment_folder_error(path):
        raise RunDirError(error)
    if error := _not_a_file_error(path / "manifest.json"):
        raise RunDirError(error)
    if not (path / "manifest.json").is_file():
        msg = f"{path}: not a run directory: manifest.json is missing"
        raise RunDirError(msg)
    if _metrics_path(path) is None:
        if error := _not_a_file_error(path / "model_years.csv"):
            raise RunDirError(error)
        msg = f"{path}: model_years.csv is missing (the run did not finish writing its metrics)"
        raise RunDirError(msg)
    return path


def _not_a_file_error(path: Path) -> str | None:
    """A message if ``path`` exists but is a folder or a device, where a run writes a file."""
    if path.exists() and not path.is_file():
        return f"{path}: {not_a_file(path, 'file')}"
    return None


def load_run(run_dir: str | Path) -> RunData:
    """Read a run directory's manifest, resolved config and yearly metrics.

    Raises:
        RunDirError: When the folder is not a run directory or a file in it cannot be read;
            the message names the file.
    """
    path = check_run_dir(run_dir)
    try:
        manifest = read_manifest(path)
    except AuditReadError as err:
        raise RunDirError(str(err)) from None
    config: dict[str, Any] = {}
    config_file = path / "config.resolved.yaml"
    if config_file.is_file():
        try:
            config = yaml.safe_load(config_file.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError, UnicodeDecodeError) as err:
            msg = f"{config_file}: cannot be read as YAML ({_first_line(err)})"
            raise RunDirError(msg) from None
    metrics_file = _metrics_path(path) or path / "model_years.csv"
    if metrics_file.suffix == ".csv":
        metrics = read_metrics_csv(metrics_file)
    else:
        try:
            metrics = pd.read_parquet(metrics_file)
        except (OSError, ValueError, ImportError) as err:
            raise RunDirError(_cannot_read(metrics_file, err)) from None
    missing = [c for c in _REQUIRED_METRICS if c not in metrics.columns]
    if missing:
        msg = f"{metrics_file}: missing column(s) {', '.join(missing)}"
        raise RunDirError(msg)
    metrics = metrics.sort_values("year", ignore_index=True)
    problem = _years_against_manifest(metrics["year"], manifest)
    if problem is not None:
        msg = f"{metrics_file}: {problem}"
        raise RunDirError(msg)
    return RunData(path, manifest, config, metrics)


def _years_against_manifest(years: pd.Series, manifest: dict[str, Any]) -> str | None:
    """What is wrong with a complete run's metric years, given the years its manifest counts.

    The table's own checks see years that skip or repeat; a first or last row removed leaves
    years that follow one another, and only the manifest tells they are too few.
    """
    counted = (manifest.get("counts") or {}).get("years")
    if manifest.get("status") != "complete" or counted is None:
        return None  # a run that did not finish may have stopped anywhere
    if len(years) == counted and (not counted or (years.iloc[0], years.iloc[-1]) == (1, counted)):
        return None
    held = f"years {years.iloc[0]:g} to {years.iloc[-1]:g}" if len(years) else "no years"
    return (
        f"holds {held}, but the run's manifest says it completed years 1 to {counted} "
        "(a row was removed or added since the run wrote it)"
    )


def read_metrics_csv(path: Path) -> pd.DataFrame:
    """A run's ``model_years.csv``, refused when it was damaged since the run wrote it.

    Raises:
        RunDirError: Naming the file, for one that cannot be read, is cut short (no newline
            after its last row), has a header that is not a row of metric names or a row
            longer than it, holds text or an infinite value where a metric's number goes, a
            value no run writes (negative, a share above 1, a count that is not whole), or
            years that are not whole numbers following one another.
    """
    try:
        raw = path.read_bytes()
        metrics = pd.read_csv(io.BytesIO(raw))
    except (OSError, ValueError, pd.errors.ParserError) as err:  # UnicodeDecodeError included
        raise RunDirError(_cannot_read(path, err)) from None
    problem = next(_damage(raw, metrics), None)
    if problem is not None:
        msg = f"{path}: {problem} (the file was changed since the run wrote it)"
        raise RunDirError(msg)
    return metrics


def _damage(raw: bytes, metrics: pd.DataFrame) -> Iterator[str]:
    """What is wrong with a metrics table, read from ``raw``, that a run cannot have written.

    The first problem is the one reported. A damaged header, or rows longer than it, ends the
    checks: the columns read then are not the metrics, so what they hold says nothing more.
    """
    if raw and not raw.endswith(b"\n"):
        yield "cut short: its last row has no newline"
        return
    misnamed = next((str(n) for n in metrics.columns if not _METRIC_NAME.fullmatch(str(n))), None)
    if misnamed is not None:
        yield f"its header is damaged: {misnamed!r} is not a metric's name"
        return
    if not metrics.index.equals(pd.RangeIndex(len(metrics))):  # rows' first values, as index
        yield "a row holds more values than the header names"
        return
    for name, values in metrics.items():
        if not pd.api.types.is_numeric_dtype(values):
            numbers = _as_numbers(values)
            if numbers is not None and np.isinf(numbers).any():
                yield f"column {name!r} holds an infinite value"
            else:
                yield f"column {name!r} holds text where a number goes"
        elif pd.api.types.is_float_dtype(values) and np.isinf(values).any():
            yield f"column {name!r} holds an infinite value"
        elif (problem := _out_of_range(str(name), values)) is not None:
            yield f"column {name!r} holds {problem}"
    if "year" in metrics and pd.api.types.is_numeric_dtype(metrics["year"]):
        years = metrics["year"]
        if not (years % 1 == 0).all():
            yield "a year is missing or not a whole number"
        elif (np.diff(years.to_numpy()) != 1).any():
            yield "its years do not follow one another (a row repeated, missing or moved)"


def _out_of_range(name: str, values: pd.Series) -> str | None:
    """What no run writes in metric ``name`` (NaN aside: a share of nobody is blank), if any.

    Every metric counts, sums or averages something that is not negative, a share or a mean
    appraisal lies within 0 and 1, and a count of households, claims or decisions is whole.
    """
    if (values < 0).any():
        return f"a negative value ({values[values < 0].iloc[0]:g})"
    if ("share" in name or name == "mean_tp") and (values > 1).any():
        return f"a share above 1 ({values[values > 1].iloc[0]:g})"
    if name in COUNT_METRICS:
        known = values.dropna()
        if not (known % 1 == 0).all():
            return f"a count that is not a whole number ({known[known % 1 != 0].iloc[0]:g})"
    return None


def _as_numbers(values: pd.Series) -> pd.Series | None:
    """A column pandas read as text, as numbers if each value is one (else ``None``).

    pandas before 3.0 reads a number past a float's range (``1e400``) as text, where Python's
    ``float`` gives infinity; only damaged tables reach this, so the slow way is fine.
    """
    try:
        return values.map(float)
    except (TypeError, ValueError):
        return None


def _cannot_read(path: Path, err: Exception) -> str:
    return f"{path}: cannot be read ({_first_line(err)})"


def _first_line(err: Exception) -> str:
    """The first line of an error's message (its class's name when it has none)."""
    return str(err).splitlines()[0] if str(err) else type(err).__name__


# ------------------------------------------------------------------------------ model_years
def adaptation_shares(metrics: pd.DataFrame) -> pd.DataFrame:
    """Adaptation shares per year: of active households, and ``relocated_share`` of all.

    Returns:
        A frame indexed by ``year`` with those of :data:`SHARE_COLUMNS` that ``metrics`` has
        (``insured_share_ae`` / ``_x`` are the take-up inside / outside the floodplain: zones AE,
        A, VE and V / X, B, C and D).
    """
    columns = [c for c in SHARE_COLUMNS if c in metrics.columns]
    return metrics.set_index("year")[columns].astype(float)


def damage_and_claims(metrics: pd.DataFrame) -> pd.DataFrame:
    """Flood losses per year: damage and paid claims in millions of dollars, flooded homes.

    Returns:
        A frame indexed by ``year`` with :data:`DAMAGE_COLUMNS`; a column whose source is
        missing from ``metrics`` is all zeros.
    """
    frame = pd.DataFrame(index=pd.Index(metrics["year"], name="year"))
    sources = {
        "damage_musd": ("total_damage", 1e-6),
        "claims_paid_musd": ("claims_paid_amount", 1e-6),
        "flooded_households": ("flooded_households", 1.0),
    }
    for name, (source, scale) in sources.items():
        values = metrics[source].to_numpy(float) * scale if source in metrics else 0.0
        frame[name] = values
    # A count of households stays a count (model_years.csv writes it as one).
    frame["flooded_households"] = frame["flooded_households"].round().astype("int64")
    return frame


def take_up(metrics: pd.DataFrame, *, last_years: int | None = None) -> pd.Series:
    """Mean of each share column over the run (or over its last ``last_years`` years).

    Averaging the final years rather than taking the last one smooths out single flood years.

    Raises:
        ValueError: For ``last_years`` below 1 (pandas would read -2 as "all but the first
            two" and 0 as no years at all).
    """
    whole = isinstance(last_years, Integral) and not isinstance(last_years, (bool, np.bool_))
    if last_years is not None and not (whole and last_years >= 1):
        msg = f"take_up: last_years must be a whole number of at least 1, got {last_years!r}"
        raise ValueError(msg)
    shares = adaptation_shares(metrics)
    if last_years is not None:
        shares = shares.tail(last_years)
    return shares.mean()


def table_cells(values: Sequence[Any]) -> list[Any]:
    """Config values of one key across runs, as cells of one table column.

    A column of scalars stays as it is. Where any value is a list or a mapping (a swept
    ``audit.sample`` list, ``hazard.events``), every value but null becomes its JSON text (keys
    sorted), so that each run's cell is its whole value and the column has one type.
    """
    if not any(isinstance(value, (list, tuple, dict)) for value in values):
        return list(values)
    option = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
    return [
        None if value is None else orjson.dumps(value, option=option).decode() for value in values
    ]


def combine_runs(run_dirs: Iterable[str | Path], keys: Sequence[str] = ()) -> pd.DataFrame:
    """Stack several runs' ``model_years`` into one long frame.

    Args:
        run_dirs: Run directories.
        keys: Dotted config keys (``memory.decay_rate``; one key may be given as a string) to
            add as columns, read from each run's ``config.resolved.yaml``; a key given twice
            is one column. A column is named by the key's last part (``decay_rate``) unless
            another key ends the same way or the name is taken (``seed``, a ``model_years``
            column): then by the whole dotted key.

    Returns:
        One row per run and year with ``run_id``, ``seed``, one column per key, then the
        ``model_years`` columns. ``run_id`` is each run's id, or its folder when two runs share
        an id (runs of different experiments are all named ``p000-r000``...). A key a run's
        config lacks gives ``None``.

    Raises:
        RunDirError: For a folder that is not a readable run directory.
        InputError: For a key whose whole name is a column already (``seed``, ``year``).
    """
    keys = list(dict.fromkeys([keys] if isinstance(keys, str) else keys))
    frames = []
    folders = []
    heads: list[dict[str, Any]] = []  # per run: its id, seed and the keys' values
    for run_dir in run_dirs:
        run = load_run(run_dir)
        frames.append(run.metrics.copy())
        folders.append(str(run_dir))
        head: dict[str, Any] = {"run_id": run.run_id, "seed": run.manifest.get("seed")}
        for key in keys:
            value: Any = run.config
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            head[key] = value
        heads.append(head)
    if not frames:
        return pd.DataFrame()
    names = _key_columns(keys, {"run_id", "seed", *frames[0].columns})
    for key in keys:
        for head, cell in zip(heads, table_cells([h[key] for h in heads]), strict=True):
            head[key] = cell
    for frame, head in zip(frames, heads, strict=True):
        frame.insert(0, "run_id", head["run_id"])
        frame.insert(1, "seed", head["seed"])
        for position, key in enumerate(keys, start=2):
            frame.insert(position, names[key], head[key])
    ids = [frame["run_id"].iat[0] if len(frame) else None for frame in frames]
    if len(set(ids)) < len(ids):
        for frame, folder in zip(frames, folders, strict=True):
            frame["run_id"] = folder
    return pd.concat(frames, ignore_index=True)


def _key_columns(keys: Sequence[str], taken: set[str]) -> dict[str, str]:
    """Column name per dotted key: its last part, or the whole key when that would clash."""
    last = Counter(key.rsplit(".", 1)[-1] for key in keys)
    names = {}
    for key in keys:
        short = key.rsplit(".", 1)[-1]
        names[key] = short if last[short] == 1 and short not in taken else key
        if names[key] in taken:
            msg = (
                f"combine_runs: key {key!r} would be a second {key!r} column: the table has one "
                "(run_id, seed and the model_years columns come with every run)"
            )
            raise InputError(msg)
    return names


# ------------------------------------------------------------------------------ audit streams
# Columns of household_decisions: retrieved is NA where the audit level records no retrievals.
_DECISION_DTYPES = {
    "agent_id": "object",
    "year": "int64",
    "TP": "float64",
    "TP_level": "object",
    "CP": "float64",
    "CP_level": "object",
    "decision": "object",
    "valid": "bool",
    "retrieved": "Int64",
}
# Columns of household_retrievals: item_year is NA for an item no stream wrote (a sample's edge).
_RETRIEVAL_DTYPES = {
    "agent_id": "object",
    "year": "int64",
    "rank": "int64",
    "id": "object",
    "score": "float64",
    "store": "object",
    "item_year": "Int64",
    "content": "object",
}


# Stream-based tables iterate records (simulation.audit.readers.iter_records) and keep only the
# fields they need: flattening every line of a large run into a DataFrame costs far more time and
# memory than these summaries need.
def stream_path(run_dir: str | Path, name: str) -> Path | None:
    """The file of audit stream ``name`` (``household_traces``...) in a run, or ``None``.

    Unlike :func:`simulation.audit.readers.stream_path` this never raises: a missing folder or
    stream simply has no file.
    """
    for suffix in _STREAM_SUFFIXES:
        candidate = Path(run_dir) / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _written(run_dir: str | Path, name: str) -> bool:
    """Whether the run wrote stream ``name``: a run without it was not audited at that level.

    Raises:
        RunDirError: For a ``run_dir`` that is no folder, an experiment's folder, or a folder
            without ``manifest.json``, which is no run at all (a mistyped or empty folder
            would otherwise read as an unaudited run).
        AuditReadError: For an unknown stream.
    """
    if error := not_a_folder_error(Path(run_dir)) or experiment_folder_error(Path(run_dir)):
        raise RunDirError(error)
    if find_stream(run_dir, name) is not None:
        return True
    if error := _not_a_file_error(Path(run_dir) / "manifest.json"):
        raise RunDirError(error)
    if not (Path(run_dir) / "manifest.json").is_file():
        msg = f"{run_dir}: not a run directory: manifest.json is missing"
        raise RunDirError(msg)
    return False


def _records(
    run_dir: str | Path, name: str, progress: bool | None = False
) -> Iterator[dict[str, Any]]:
    """Records of stream ``name``; none when the run did not write it."""
    if not _written(run_dir, name):
        return iter(())
    return iter_records(run_dir, name, progress=progress)


def _typed(rows: list[tuple[Any, ...]], dtypes: dict[str, str]) -> pd.DataFrame:
    """``rows`` as a frame whose columns have ``dtypes``, rows or none.

    An empty table would otherwise have every column ``object``, and a notebook's
    ``pd.concat`` of it with a full one would turn the years into objects too.
    """
    return pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)


def _number(value: Any) -> float | None:
    """A construct's value: a JSON number, or ``None`` where the line has none."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        msg = f"expected a number, got {value!r}"
        raise TypeError(msg)  # naming_damaged_lines then names the line
    return float(value)


def _household(agent_id: str | None, analysis: str) -> None:
    if agent_id is not None and not isinstance(agent_id, str):
        msg = (
            f"{analysis}: agent_id must be a household's id such as 'H00001' (a string), "
            f"got {agent_id!r}"
        )
        raise InputError(msg)


def _construct(record: dict[str, Any], name: str) -> dict[str, Any]:
    constructs = (record.get("reasoning") or {}).get("constructs") or {}
    return constructs.get(name) or {}


def read_stream_frame(run_dir: str | Path, name: str) -> pd.DataFrame:
    """Audit stream ``name`` as a flattened DataFrame; empty when the run did not write it.

    Nested fields become dotted columns (``reasoning.constructs.TP.value``), as
    :func:`simulation.audit.readers.read_stream` does.
    """
    if not _written(run_dir, name):
        # The columns every line has, as read_stream gives an empty stream: frame["year"]
        # works on an unaudited run too.
        return pd.DataFrame(columns=list(BASE_COLUMNS))
    return read_stream(run_dir, name)


@naming_damaged_lines
def tp_distribution(run_dir: str | Path, *, progress: bool | None = False) -> pd.DataFrame:
    """Every traced household's threat appraisal (TP) per year, from ``household_traces``.

    Args:
        run_dir: The run directory.
        progress: Count the lines read on a bar on stderr (``None``: when it is a terminal).

    Returns:
        Columns ``year``, ``agent_id``, ``tp`` (``reasoning.constructs.TP.value``, in [0, 1])
        and ``tp_level`` (VL..VH), sorted by year and agent; empty (with those columns) when
        the run has no ``household_traces`` stream or its traces carry no TP construct.
    """
    rows = [
        (int(record["year"]), str(record["agent_id"]), float(tp["value"]), tp.get("level"))
        for record in _records(run_dir, "household_traces", progress)
        if (tp := _construct(record, "TP")).get("value") is not None
    ]
    frame = _typed(
        rows, {"year": "int64", "agent_id": "object", "tp": "float64", "tp_level": "object"}
    )
    return frame.sort_values(["year", "agent_id"], ignore_index=True)


def tp_summary(tp: pd.DataFrame) -> pd.DataFrame:
    """Per-year count, mean and quantiles (10, 25, 50, 75, 90 %) of :func:`tp_distribution`."""
    columns = ["count", "mean", "q10", "q25", "median", "q75", "q90"]
    if tp.empty:
        dtypes = {c: "int64" if c == "count" else "float64" for c in columns}
        return _typed([], dtypes).set_index(pd.Index([], dtype="int64", name="year"))
    grouped = tp.groupby("year")["tp"]
    summary = pd.DataFrame({"count": grouped.size(), "mean": grouped.mean()})
    for column, q in zip(columns[2:], (0.1, 0.25, 0.5, 0.75, 0.9), strict=True):
        summary[column] = grouped.quantile(q)
    return summary


@naming_damaged_lines
def memory_composition(
    run_dir: str | Path, metrics: pd.DataFrame | None = None, *, progress: bool | None = False
) -> pd.DataFrame:
    """Memory per year: mean store sizes and, when audited, memory writes by source.

    Args:
        run_dir: The run directory.
        metrics: Its ``model_years`` (read from ``run_dir`` when omitted).
        progress: Count the lines read on a bar on stderr (``None``: when it is a terminal).

    Returns:
        A frame indexed by ``year`` with ``mean_working`` and ``mean_episodic`` (items per
        active household at year end, from ``model_years``) and, when the run wrote
        ``memory_updates``, one ``writes_<source>`` column per ``update_type`` (``flood``,
        ``claim``, ``decision``, ``policy``, ``neighbor``, ``seed``, ...) counting that year's
        writes of the audited households. Pre-seeded memories are year 0, which has no store
        sizes (NaN).
    """
    if metrics is None:
        metrics = load_run(run_dir).metrics
    stores = metrics.set_index("year")[["mean_working", "mean_episodic"]].astype(float)
    counts = Counter(
        (int(record["year"]), str(record["update_type"]))
        for record in _records(run_dir, "memory_updates", progress)
    )
    if not counts:
        return stores
    writes = pd.Series(counts).unstack(fill_value=0)
    order = [s for s in _SOURCE_ORDER if s in writes.columns]
    order += sorted(c for c in writes.columns if c not in order)
    writes = writes[order].add_prefix(WRITE_PREFIX)
    combined = stores.join(writes, how="outer")
    combined[writes.columns] = combined[writes.columns].fillna(0).astype(int)
    combined.index.name = "year"
    return combined


@naming_damaged_lines
def flood_events(run_dir: str | Path, agent_id: str | None = None) -> pd.DataFrame:
    """Floods households remember, from the ``memory_updates`` stream (flood writes).

    Args:
        run_dir: The run directory.
        agent_id: Only this household (default: every audited household).

    Returns:
        Columns ``agent_id``, ``year``, ``damage`` ($; 0 for a flood that stayed below the
        floor), ``importance`` and ``content`` (the memory text), sorted by agent and year;
        empty when the stream is missing, or for a household that remembers no flood.
        ``frame[frame.damage > 0]`` are damaging floods.

    Raises:
        AuditReadError: For an ``agent_id`` with no line in ``memory_updates``: a mistyped
            id, or a household the audit's sample left out (the message gives the sample).
    """
    _household(agent_id, "flood_events")
    rows = []
    seen = False
    for record in _records(run_dir, "memory_updates"):
        if agent_id is not None:
            if record.get("agent_id") != agent_id:
                continue
            seen = True
        if record.get("update_type") != "flood":
            continue
        item = record.get("memory_item") or {}
        rows.append(
            (
                str(record["agent_id"]),
                int(record["year"]),
                _number(item.get("amount")) or 0.0,
                _number(item.get("importance")),
                item.get("content"),
            )
        )
    if agent_id is not None and not seen:
        _refuse_absent(run_dir, agent_id, "memory_updates")
    dtypes = {"agent_id": "object", "year": "int64", "damage": "float64"}
    frame = _typed(rows, {**dtypes, "importance": "float64", "content": "object"})
    return frame.sort_values(["agent_id", "year"], ignore_index=True)


@naming_damaged_lines
def household_decisions(run_dir: str | Path, agent_id: str | None = None) -> pd.DataFrame:
    """One household's decisions (or every audited one's): appraisals and the skill chosen.

    Args:
        run_dir: The run directory.
        agent_id: The household; ``None``: every audited household, in one pass over the
            traces (a loop over households would read the whole stream once for each).

    Returns:
        Columns ``year``, ``TP`` and ``TP_level`` (threat appraisal), ``CP`` and ``CP_level``
        (coping appraisal), ``decision`` (``action.decision_skill``), ``valid`` (whether the
        registry accepted the proposal) and ``retrieved`` (number of memories retrieved, NA
        when the audit level does not record them), one row per traced year; every
        household's has ``agent_id`` first and is sorted by it, then by year. Empty when the
        run wrote no traces (audit level ``off``).

    Raises:
        AuditReadError: For an ``agent_id`` that has no traces: a mistyped id, or a household
            the audit's sample left out (the message gives the sample).
    """
    _household(agent_id, "household_decisions")
    rows = []
    for record in _records(run_dir, "household_traces"):
        owner = record.get("agent_id")
        if agent_id is not None and owner != agent_id:
            continue
        tp, cp = _construct(record, "TP"), _construct(record, "CP")
        retrieved = (record.get("memory") or {}).get("retrieved")
        rows.append(
            (
                str(owner),
                int(record["year"]),
                _number(tp.get("value")),
                tp.get("level"),
                _number(cp.get("value")),
                cp.get("level"),
                (record.get("action") or {}).get("decision_skill"),
                _flag((record.get("validation") or {}).get("valid")),
                len(retrieved) if isinstance(retrieved, list) else None,
            )
        )
    if agent_id is not None and not rows:
        _refuse_absent(run_dir, agent_id, "household_traces")
    table = _typed(rows, _DECISION_DTYPES)
    return _one_or_every(table, agent_id, ["year"])


def _refuse_unnamed(run_dir: str | Path, agent_id: str, stream: str) -> None:
    """Refuse ``agent_id`` unless a line of ``stream`` names it (read only until one does)."""
    if agent_id not in (record.get("agent_id") for record in _records(run_dir, stream)):
        _refuse_absent(run_dir, agent_id, stream)


def _refuse_absent(run_dir: str | Path, agent_id: str, stream: str) -> None:
    """Refuse a household with no line in ``stream``, when the run wrote it (else return).

    An empty table would read as a household that did nothing; a typo, or a household left
    out by ``audit.sample``, is likelier.

    Raises:
        AuditReadError: Naming the household, the stream and the run's audit sample.
    """
    if _written(run_dir, stream):
        hint = sample_hint(run_dir, None)  # the resolved config's sample, run complete or not
        msg = f"{run_dir}: household {agent_id!r} does not appear in {stream}{hint}"
        raise AuditReadError(msg)


def _flag(value: Any) -> bool:
    """A trace's ``validation.valid``: JSON ``true`` or ``false``."""
    if not isinstance(value, bool):
        msg = f"expected true or false, got {value!r}"
        raise TypeError(msg)  # naming_damaged_lines then names the line
    return value


@naming_damaged_lines
def household_retrievals(run_dir: str | Path, agent_id: str | None = None) -> pd.DataFrame:
    """What one household (or every audited one) retrieved for each decision, with texts.

    :func:`simulation.audit.readers.retrievals` filtered to ``agent_id``, joined with the
    memory texts of ``memory_updates`` (and reflections of ``consolidation``).

    Args:
        run_dir: The run directory.
        agent_id: The household; ``None``: every audited household, each stream read once.

    Returns:
        Columns ``year``, ``rank`` (1 = best), ``id``, ``score``, ``store`` (None when not
        recorded), ``item_year`` (the year the memory was formed) and ``content``; every
        household's has ``agent_id`` first and is sorted by it, then by year and rank. Empty
        when the run has neither traces with memory nor tool invocations.

    Raises:
        AuditReadError: For an ``agent_id`` that does not appear in the stream read (traces,
            or tool invocations): a mistyped id, or a household the audit's sample left out.
    """
    _household(agent_id, "household_retrievals")
    # The traces carry retrievals at levels standard and full, tool invocations at those levels
    # too; at level minimal (traces without memory) and off there is nothing to show.
    first = next(_records(run_dir, "household_traces"), None) or {}
    if isinstance(first.get("memory"), dict):
        stream = "household_traces"
        table = retrievals(run_dir, source="traces")
    elif stream_path(run_dir, "tool_invocations") is not None:
        stream = "tool_invocations"
        table = retrievals(run_dir, source="tool_invocations")
    else:
        if agent_id is not None and first:  # minimal traces name every audited household
            _refuse_unnamed(run_dir, agent_id, "household_traces")
        return _one_or_every(_typed([], _RETRIEVAL_DTYPES), agent_id, ["year", "rank"])
    if agent_id is not None:
        table = table[table["agent_id"] == agent_id]
        if table.empty:  # a household that retrieved nothing still has lines in the stream
            _refuse_unnamed(run_dir, agent_id, stream)
    # Only what the table shows of each item: every household's items would otherwise be
    # held whole. Item ids start with their owner's id, so one table serves every household.
    wanted = set(table["id"])
    texts: dict[str, tuple[Any, Any]] = {}
    for record in _records(run_dir, "memory_updates"):
        item = record.get("memory_item") or {}
        if (item_id := str(item.get("id"))) in wanted:
            texts[item_id] = (item.get("year"), item.get("content"))
    for record in _records(run_dir, "consolidation"):
        for item in (record.get("consolidation") or {}).get("reflections") or []:
            if (item_id := str(item.get("id"))) in wanted:
                texts[item_id] = (item.get("year"), item.get("content"))
    unknown = (None, None)
    table = table.assign(
        item_year=[texts.get(i, unknown)[0] for i in table["id"]],
        content=[texts.get(i, unknown)[1] for i in table["id"]],
    )
    table = table[list(_RETRIEVAL_DTYPES)].astype(_RETRIEVAL_DTYPES)
    return _one_or_every(table, agent_id, ["year", "rank"])


def _one_or_every(table: pd.DataFrame, agent_id: str | None, order: list[str]) -> pd.DataFrame:
    """``table`` sorted: one household's without its ``agent_id`` column, every one's with it."""
    if agent_id is not None:
        return table.drop(columns="agent_id").sort_values(order, ignore_index=True)
    return table.sort_values(["agent_id", *order], ignore_index=True)

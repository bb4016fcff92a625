"""Run one simulation and write its run directory.

A run directory holds ``manifest.json`` (what ran, with which versions, how it ended),
``config.resolved.yaml`` (the fully merged config, runnable from the run directory),
``skill_registry.yaml`` (a copy of the registry that ran) and ``model_years.csv`` (one row per
year).
It is assembled in a hidden ``.<run_id>.partial`` folder and renamed into place only when the run
completes, so an interrupted run never leaves anything that looks finished.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from typing import TYPE_CHECKING

import orjson
import yaml
from tqdm import tqdm

from simulation import __version__
from simulation.audit.writer import AuditWriter
from simulation.config import ConfigError
from simulation.model import FloodAdaptationModel

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd

    from simulation.config import RunConfig

__all__ = [
    "REGISTRY_COPY",
    "RunResult",
    "build_model",
    "config_hash",
    "resolve_for_run_dir",
    "run_simulation",
]

#: Name of the registry copy inside a run directory.
REGISTRY_COPY = "skill_registry.yaml"


@dataclass(frozen=True, slots=True)
class RunResult:
    """A finished run: where it was written and its yearly metrics."""

    run_dir: Path
    metrics: pd.DataFrame
    model: FloodAdaptationModel


def config_hash(config: RunConfig) -> str:
    """SHA-256 of the canonical JSON of the resolved config."""
    canonical = orjson.dumps(config.to_yaml_dict(), option=orjson.OPT_SORT_KEYS)
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
    if damage.curves.endswith((".yaml", ".yml")) or "/" in damage.curves:
        damage = damage.model_copy(update={"curves": str((base_dir / damage.curves).resolve())})
    hazard = config.hazard.model_copy(
        update={
            "rasters": {y: str((base_dir / p).resolve()) for y, p in config.hazard.rasters.items()}
        }
    )
    return config.model_copy(
        update={
            "registry": REGISTRY_COPY,
            "households": households,
            "damage": damage,
            "hazard": hazard,
        }
    )


def build_model(config: RunConfig, base_dir: Path, origin: str = "config") -> FloodAdaptationModel:
    """Build the model, checking what the config refers to (registry, curves, files).

    Args:
        config: The validated config.
        base_dir: Folder relative paths in the config refer to.
        origin: The config file's name, for error messages.

    Raises:
        ConfigError: When the retrieval ``top_k`` exceeds what the registry's
            ``retrieve_memory`` tool allows.
        ValueError: Subclasses naming the file and key for registry, curve, hazard and
            household-table problems.
    """
    model = FloodAdaptationModel(config, base_dir, origin)
    top_k = config.memory.retrieval.top_k
    check = model.registry.check_tool("retrieve_memory", "owner", {"top_k": top_k})
    if not check.valid:
        msg = (
            f"{origin}: memory.retrieval.top_k: {'; '.join(check.errors)} "
            f"(retrieve_memory in {config.registry})"
        )
        raise ConfigError(msg)
    return model


def run_simulation(
    config: RunConfig,
    base_dir: Path,
    out_root: Path,
    *,
    progress: bool | None = None,
    model: FloodAdaptationModel | None = None,
    run_id: str | None = None,
) -> RunResult:
    """Run ``config`` for its years and write the run directory under ``out_root``.

    Args:
        config: The validated config.
        base_dir: Folder relative paths in the config refer to.
        out_root: Folder that receives the run directory.
        progress: Show a progress bar (``None``: only on a terminal).
        model: A model already built from ``config`` (built here when omitted).
        run_id: Name of the run directory; ``<name>-s<seed>-<config hash>`` by default.

    Returns:
        The run directory, the metrics table and the model.
    """
    model = model or build_model(config, base_dir)
    resolved = resolve_for_run_dir(config, base_dir)
    digest = config_hash(resolved)
    registry = (base_dir / config.registry).read_bytes()
    run_id = run_id or f"{config.name}-s{config.seed}-{digest[:8]}"
    out_root.mkdir(parents=True, exist_ok=True)
    final_dir = out_root / run_id
    partial = out_root / f".{run_id}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    partial.mkdir()

    try:
        (partial / REGISTRY_COPY).write_bytes(registry)
        return _run_into(resolved, model, digest, run_id, partial, final_dir, progress)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def _run_into(
    config: RunConfig,
    model: FloodAdaptationModel,
    digest: str,
    run_id: str,
    partial: Path,
    final_dir: Path,
    progress: bool | None,
) -> RunResult:
    """Step the model, write every file into ``partial`` and rename it to ``final_dir``.

    ``config`` is the resolved config (see :func:`resolve_for_run_dir`).
    """
    started = datetime.now(UTC)
    writer = None
    if config.audit.level != "off":
        writer = AuditWriter(
            partial, run_id, config.audit, config.seed, llm=config.decision.policy == "llm"
        )
        model.attach_audit(writer)
    clock = time.perf_counter()
    for _ in tqdm(
        range(config.years),
        desc=run_id,
        unit="year",
        disable=None if progress is None else not progress,
        leave=False,
    ):
        model.step()
    elapsed = time.perf_counter() - clock
    metrics = model.metrics()
    audit = writer.close() if writer is not None else {"level": "off", "streams": {}}
    if model.llm is not None:
        model.llm.close()

    (partial / "config.resolved.yaml").write_text(
        yaml.safe_dump(config.to_yaml_dict(), sort_keys=False), encoding="utf-8"
    )
    metrics.to_csv(partial / "model_years.csv", index=False)
    households = len(model.households)
    manifest = {
        "schema_version": 1,
        "run_id": run_id,
        "name": config.name,
        "seed": config.seed,
        "config_hash": digest,
        "registry_sha256": hashlib.sha256((partial / REGISTRY_COPY).read_bytes()).hexdigest(),
        "status": "complete",
        "started_at": started.isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "duration_s": round(elapsed, 3),
        "counts": {
            "households": households,
            "years": config.years,
            "household_years": households * config.years,
        },
        "audit": audit,
        "versions": {
            "floodsim": __version__,
            "mesa": version("mesa"),
            "numpy": version("numpy"),
            "python": platform.python_version(),
        },
    }
    (partial / "manifest.json").write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    if final_dir.exists():
        shutil.rmtree(final_dir)
    os.replace(partial, final_dir)
    return RunResult(final_dir, metrics, model)

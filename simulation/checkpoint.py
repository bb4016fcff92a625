"""Checkpoints: the state a run needs to continue exactly where it stopped.

A checkpoint is taken at the end of a year. It holds everything that changes during a run, as
plain JSON: each household's state, memory (:meth:`CognitiveMemory.to_dict`), latest decision
(which a household that moved away keeps to the end) and what its neighbours can observe of it;
the government's and insurer's levers; every random stream (Mesa's ``random`` and the model's
numpy generators); the metrics collected so far; and the byte offset and line count each audit
stream had committed. Everything else (population layout, registry, curves, hazard source) is
rebuilt from the run's resolved config, deterministically.

The file is written to a temporary name, flushed to disk and renamed, so a crash at any moment
leaves either the previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import math
import os
from collections import deque
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import orjson

from simulation.agents.state import HouseholdState
from simulation.memory import CognitiveMemory
from simulation.model import DecisionSummary

if TYPE_CHECKING:
    from pathlib import Path

    from simulation.model import FloodAdaptationModel

__all__ = [
    "CHECKPOINT_FILE",
    "FORMAT_VERSION",
    "capture",
    "read_checkpoint",
    "restore",
    "write_checkpoint",
]

CHECKPOINT_FILE = "checkpoint.json"
FORMAT_VERSION = 1
_RNGS = ("population_rng", "hazard_rng", "claims_rng", "decision_rng", "assignment_rng", "rng")
_STATE_FIELDS = tuple(f.name for f in fields(HouseholdState))


def capture(model: FloodAdaptationModel, streams: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model's dynamic state after a completed year, as JSON-ready data."""
    version, internal, gauss = model.random.getstate()
    return {
        "format_version": FORMAT_VERSION,
        "year": model.steps,
        "random": [version, list(internal), gauss],
        # PCG64 states hold 128-bit integers: stored as decimal strings.
        "numpy": {name: _stringify(getattr(model, name).bit_generator.state) for name in _RNGS},
        "government": {
            "subsidy_share": model.government.subsidy_share,
            "quiet_years": model.government.quiet_years,
            "spent_this_year": model.government.spent_this_year,
        },
        "insurer": {"rate": model.insurer.rate, "history": list(model.insurer.history)},
        "premiums_collected": model.premiums_collected,
        "metrics": {k: list(v) for k, v in model.datacollector.model_vars.items()},
        "households": [
            {
                "state": h.state.to_dict(),
                "memory": h.memory.to_dict(),
                "adopted_last_year": h.adopted_last_year,
                "uses_llm": h.uses_llm,
                "relocated_in": h.relocated_in,
                "last_decision": None if h.last_decision is None else list(h.last_decision),
            }
            for h in model.households
        ],
        "streams": streams or {},
    }


def restore(model: FloodAdaptationModel, data: dict[str, Any]) -> None:
    """Put a freshly built model (same config) into the state of a checkpoint.

    Raises:
        TypeError: For data that is not a JSON object.
        ValueError: For an unknown format or a checkpoint of another population.
    """
    if not isinstance(data, dict):
        msg = f"expected a JSON object, got {type(data).__name__}"
        raise TypeError(msg)
    if data.get("format_version") != FORMAT_VERSION:
        found = data.get("format_version")
        msg = f"checkpoint format_version must be {FORMAT_VERSION}, got {found!r}"
        raise ValueError(msg)
    saved = data["households"]
    if len(saved) != len(model.households):
        msg = f"checkpoint has {len(saved)} households, the config builds {len(model.households)}"
        raise ValueError(msg)
    model.steps = int(data["year"])
    version, internal, gauss = data["random"]
    model.random.setstate((version, tuple(internal), gauss))
    for name in _RNGS:
        getattr(model, name).bit_generator.state = _unstringify(data["numpy"][name])
    gov = data["government"]
    model.government.subsidy_share = gov["subsidy_share"]
    model.government.quiet_years = gov["quiet_years"]
    model.government.spent_this_year = gov["spent_this_year"]
    model.insurer.rate = data["insurer"]["rate"]
    model.insurer.history = deque(
        (tuple(pair) for pair in data["insurer"]["history"]), maxlen=model.insurer.config.window
    )
    model.premiums_collected = data["premiums_collected"]
    # JSON has no NaN: a metric undefined in a year (a share of nobody) is stored as null.
    model.datacollector.model_vars = {
        k: [math.nan if x is None else x for x in v] for k, v in data["metrics"].items()
    }
    for household, record in zip(model.households, saved, strict=True):
        if record["state"]["agent_id"] != household.state.agent_id:
            msg = (
                f"checkpoint household {record['state']['agent_id']} != {household.state.agent_id}"
            )
            raise ValueError(msg)
        for name in _STATE_FIELDS:
            setattr(household.state, name, record["state"][name])
        old = household.memory
        household.memory = CognitiveMemory.from_dict(
            record["memory"], relevance=old.relevance, reflector=old.reflector, texts=old.texts
        )
        household.adopted_last_year = record["adopted_last_year"]
        household.adopted_this_year = None
        household.uses_llm = record["uses_llm"]
        # Checkpoints from before the year was kept: a household that had moved away did so by
        # the checkpoint's year at the latest.
        default = model.steps if household.state.relocated else None
        household.relocated_in = record.get("relocated_in", default)
        # Checkpoints from before it was kept leave it unknown, as they did.
        decided = record.get("last_decision")
        household.last_decision = None if decided is None else DecisionSummary(*decided)


def write_checkpoint(run_dir: Path, data: dict[str, Any]) -> None:
    """Write ``data`` atomically as the run's checkpoint."""
    path = run_dir / CHECKPOINT_FILE
    tmp = run_dir / f".{CHECKPOINT_FILE}.tmp"
    with tmp.open("wb") as fh:
        # orjson writes NaN as null (restore turns the metrics' back) and integer keys as text,
        # as the standard library's encoder would, at a twentieth of its time.
        fh.write(orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's checkpoint, or ``None`` when it has none yet."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        return None
    return orjson.loads(path.read_bytes())


def _stringify(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _unstringify(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unstringify(v) for k, v in value.items()}
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value

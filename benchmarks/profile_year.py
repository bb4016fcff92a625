"""Where a simulation year's time goes: cProfile of the default world, top functions.

Runs the default configuration (with the runner's collector settings) under cProfile and prints
the functions with the most time of their own and the most time including callees. cProfile
slows Python-level calls down, so read the shares, not the absolute times. The audit lines are
written on the run's own thread here, not behind it (``audit.background``), so that their cost
shows where it arises.

``--phases`` times the steps of the yearly cycle instead, without a profiler: microseconds per
household-year in each phase of ``FloodAdaptationModel.step`` (hazard and damage, claims and
event memories, institutions, social observation, decisions, year end), at full speed. On
``engine: arrays`` (what ``engine: auto`` picks for the default world) the phases are the
:class:`~simulation.array_engine.ArrayEngine`'s methods of the same names.

Usage:
    python benchmarks/profile_year.py                          # 2,000 households x 30 years, off
    python benchmarks/profile_year.py --households 10000 --years 10 --audit standard
    python benchmarks/profile_year.py --households 52141 --years 13 --audit standard --phases
    python benchmarks/profile_year.py --phases --set engine=objects    # the object path
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.array_engine import ArrayEngine
from simulation.audit.writer import AuditWriter
from simulation.collector import tuned_collector
from simulation.config import ConfigError, load_config
from simulation.runner import build_model

if TYPE_CHECKING:
    from collections.abc import Callable

    from simulation.model import FloodAdaptationModel

__all__ = ["ARRAY_PHASES", "PHASES", "main", "phase_seconds"]

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"

#: The model's methods for the phases of a year (DESIGN.md section 2), in their order, and the
#: names they are reported under. Decisions go through ``_decide_together`` with the PMT policy
#: and through ``decide_for`` one household at a time otherwise.
PHASES = {
    "_roll_call": "roll call",
    "_hazard_and_damage": "1-2 hazard and damage",
    "_claims_and_event_memories": "3-4 claims and event memories",
    "_institutions": "5 institutions",
    "_observe_neighbours": "6 social observation",
    "_decide_together": "7 decisions (in bulk)",
    "decide_for": "7 decisions (one by one)",
    "_end_year": "8 year end and metrics",
}

#: The same phases on ``engine: arrays``: the :class:`ArrayEngine`'s methods, which decide in
#: bulk and take no roll call.
ARRAY_PHASES = {
    "_hazard_and_damage": "1-2 hazard and damage",
    "_claims_and_event_memories": "3-4 claims and event memories",
    "_institutions": "5 institutions",
    "_observe_neighbours": "6 social observation",
    "_decide": "7 decisions (in bulk)",
    "_end_year": "8 year end and metrics",
}


def _timed(method: Callable[..., Any], name: str, seconds: dict[str, float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            seconds[name] += time.perf_counter() - start

    return timed


def phase_seconds(model: FloodAdaptationModel, years: int) -> dict[str, float]:
    """Step ``model`` for ``years`` years and return the seconds spent in each phase.

    Each phase's method is wrapped, for the duration, on the class that defines it, not on the
    instance: the model decides in bulk only while ``decide_for`` is the one its class
    inherits, which a method wrapped where it is defined still is. ``"rest of step"`` is what
    ``step`` spends outside the phases (audit flushes, the year's bookkeeping) and ``"total"``
    the whole of the years.

    A model on ``engine: arrays`` runs its years in an
    :class:`~simulation.array_engine.ArrayEngine`, whose methods (:data:`ARRAY_PHASES`) are
    timed instead. The engine is built before the clock starts (``model.prepare()``), as the
    runner builds it: a one-off cost of the run (0.25 s at 10,000 households), which the first
    year would otherwise carry into ``"rest of step"``.

    Returns:
        Seconds per phase name of :data:`PHASES` (only the phases that ran), then ``"rest of
        step"`` and ``"total"``.
    """
    model.prepare()
    if model._runs_on_arrays():
        phases, mro = ARRAY_PHASES, ArrayEngine.__mro__
    else:
        phases, mro = PHASES, type(model).__mro__
    owners = {name: next(k for k in mro if name in vars(k)) for name in phases}
    originals = {name: vars(owner)[name] for name, owner in owners.items()}
    seconds = dict.fromkeys(PHASES.values(), 0.0)
    try:
        for name, owner in owners.items():
            setattr(owner, name, _timed(originals[name], phases[name], seconds))
        start = time.perf_counter()
        for _ in range(years):
            model.step()
        total = time.perf_counter() - start
    finally:
        for name, owner in owners.items():
            setattr(owner, name, originals[name])
    spent = {name: s for name, s in seconds.items() if s > 0.0}
    spent["rest of step"] = max(total - sum(spent.values()), 0.0)
    spent["total"] = total
    return spent


def main() -> None:
    """Profile (or, with ``--phases``, time by phase) the yearly steps of one run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--households", type=int, default=2_000)
    parser.add_argument("--years", type=int, default=30)
    parser.add_argument("--audit", default="off", choices=["off", "minimal", "standard", "full"])
    parser.add_argument("--top", type=int, default=25, help="rows per list")
    parser.add_argument(
        "--phases", action="store_true", help="time each phase of the year, without cProfile"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, as `floodsim run --set` (e.g. audit.gzip=true)",
    )
    args = parser.parse_args()
    if args.households < 1 or args.years < 1:
        parser.error(
            f"--households and --years must be at least 1, got {args.households}, {args.years}"
        )
    overrides = [f"households.count={args.households}", f"audit.level={args.audit}", *args.set]
    try:
        config, base = load_config(DEFAULT_CONFIG, overrides)
        model = build_model(config, base)
    except ConfigError as err:  # a bad --set: one line naming the key, exit code 2
        parser.error(str(err))
    with tempfile.TemporaryDirectory(prefix="profile_year_") as tmp:
        writer = None
        if args.audit != "off":
            writer = AuditWriter(Path(tmp), "profile", config.audit, config.seed)
            model.attach_audit(writer)
        with tuned_collector():
            if args.phases:
                seconds = phase_seconds(model, args.years)
            else:
                model.prepare()  # the engine's build is the run's cost, not a year's
                profile = cProfile.Profile()
                profile.enable()
                for _ in range(args.years):
                    model.step()
                profile.disable()
        if writer is not None:
            writer.close()
    print(
        f"{args.households} households x {args.years} years, audit {args.audit}, "
        f"engine {config.engine}"
    )
    if args.phases:
        household_years = args.households * args.years
        total = seconds["total"]
        print(f"{'phase':32} {'us/hh-yr':>9} {'share':>6}")
        for name, spent in seconds.items():
            share = spent / total if total else 0.0
            print(f"{name:32} {spent / household_years * 1e6:9.2f} {share:6.1%}")
        return
    stats = pstats.Stats(profile)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()

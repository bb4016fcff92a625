"""Machine instructions per household-year, counted by callgrind: a cost that noise cannot move.

Wall-clock time on a shared machine moves by a fifth or more between equal runs (README,
"Benchmarks"), which hides the few per cent a change to the hot path is worth. Instructions
executed hardly depend on the neighbours: this benchmark runs the default configuration under
valgrind's callgrind, counts only the yearly steps after a warm-up year (the model is built and
the interpreter started uncounted), and reports instructions per household-year. The audit
lines are made on the counted thread (``audit.background`` off): callgrind counts only the
thread that runs the counted years, and would miss lines written behind the run. Two counts
of the same code differ by a few hundredths of a per cent (145,085 and 145,135 for 1,000
households x 3 years at ``off``: memory addresses still vary between runs). ``--against DIR``
counts another checkout of floodsim side by side (one process per core), so that a change can
be judged by its ratio; both are imported through ``PYTHONPATH`` (not this checkout through its
editable install), since the two routes gave the same code counts 0.5 % apart on the array
engine.

The floor of ``bench_scaling.py`` (an empty Mesa model of as many agents, stepped as many years
after a warm-up step) is counted the same way, and each count is also given as a multiple of the
floor's instructions per agent-step: a ratio to the floor that the machine's hour cannot move.

Instructions are not time: they miss the cache misses that make 100,000-household years slower
per household than 1,000-household ones (``bench_scaling.py`` measures those), and the floor's
small loop runs several times as many instructions a second as a floodsim year does, so its
ratios in time are larger than in instructions. A run under valgrind takes about 50 times as
long, so keep the populations small.

Needs ``valgrind`` on PATH (Debian: ``apt install valgrind``).

Usage:
    python benchmarks/bench_instructions.py                # 1,000 x 12 years, off and standard
    python benchmarks/bench_instructions.py --levels off --years 6
    python benchmarks/bench_instructions.py --against ../other   # this checkout vs another
    python benchmarks/bench_instructions.py --engine arrays --households 2000
    python benchmarks/bench_instructions.py --no-floor       # leave the floor uncounted
    python benchmarks/bench_instructions.py --set memory.retention.policy=tiered  # another config
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

    import mesa

__all__ = [
    "child",
    "collected",
    "count",
    "count_floor",
    "floor_child",
    "main",
    "row_line",
]

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
DEFAULT_JSON = Path("benchmarks/results/instructions.json")
#: callgrind collects only inside this function: libffi's, which ctypes calls the counted years
#: through (a named C function is needed, and the interpreter's own symbols may be stripped).
_TOGGLE = "ffi_call*"
_COLLECTED = re.compile(r"Collected\s*:\s*([\d,]+)")


def collected(valgrind_output: str) -> int:
    """The instruction count callgrind reports (its ``Collected :`` line).

    Raises:
        ValueError: If the output has no such line (valgrind failed, or counted nothing).
    """
    match = _COLLECTED.search(valgrind_output)
    if match is None:
        msg = (
            f"callgrind reported no instruction count; its output ends:\n{valgrind_output[-2000:]}"
        )
        raise ValueError(msg)
    count = int(match.group(1).replace(",", ""))
    if count == 0:
        msg = f"callgrind counted no instructions inside {_TOGGLE} (is ctypes' libffi in use?)"
        raise ValueError(msg)
    return count


def count(
    households: int,
    years: int,
    level: str,
    source: Path | None = None,
    engine: str = "objects",
    overrides: Sequence[str] = (),
) -> int:
    """Instructions of ``years`` yearly steps of the default configuration (after a warm-up).

    Args:
        households: Population size.
        years: Counted years (the warm-up year before them is not counted).
        level: Audit level (streams go to a temporary folder).
        engine: ``objects`` or ``arrays`` (the run config's ``engine``).
        source: Another checkout whose ``simulation`` package to count (default: this one).
        overrides: Config keys to set, as ``floodsim run --set`` takes them (``KEY=VALUE``).
    """
    arguments = ["--child", str(households), str(years), level, engine, *overrides]
    return _counted(arguments, source)


def count_floor(agents: int, steps: int) -> int:
    """Instructions of ``steps`` steps of the empty-Mesa floor (after a warm-up step).

    The floor is ``bench_scaling.empty_model``: ``agents`` agents that do nothing, activated in
    a shuffled order.
    """
    return _counted(["--floor-child", str(agents), str(steps)])


def _counted(arguments: list[str], source: Path | None = None) -> int:
    """What callgrind counts of this script run as a child with ``arguments``."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        msg = "valgrind is not on PATH: install it (Debian: apt install valgrind) to count"
        raise SystemExit(msg)
    env = dict(os.environ, PYTHONHASHSEED="0")  # equal string hashes, equal dict probing
    # This checkout is imported as another is, through PYTHONPATH, not through the editable
    # install: the same code counted both ways differed by 0.5 % on the array engine.
    root = source if source is not None else Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="floodsim-instructions-") as tmp:
        command = [
            valgrind,
            "--tool=callgrind",
            "--collect-atstart=no",
            f"--toggle-collect={_TOGGLE}",
            f"--callgrind-out-file={Path(tmp) / 'callgrind.out'}",
            sys.executable,
            __file__,
            *arguments,
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"the counted run failed ({done.returncode}):\n{done.stderr[-2000:]}"
        raise RuntimeError(msg)
    return collected(done.stderr)


def child(
    households: int,
    years: int,
    level: str,
    engine: str,
    out: Path,
    overrides: Sequence[str] = (),
) -> None:
    """Build the model, step a warm-up year, then step ``years`` years inside ``ffi_call``.

    ``overrides`` are further config keys (``KEY=VALUE``), set before the run's own.
    """
    import ctypes

    from simulation.collector import tuned_collector
    from simulation.config import load_config
    from simulation.runner import _writer, build_model

    # callgrind collects per thread, and only on the thread inside the toggled call: lines
    # written behind the run (audit.background) would go uncounted.
    run = [f"households.count={households}", f"audit.level={level}", f"engine={engine}"]
    config, base = load_config(DEFAULT_CONFIG, [*overrides, *run, "audit.background=false"])
    model = build_model(config, base)
    writer = _writer(out, "instructions", config, len(model.households), resume=None)
    if writer is not None:
        model.attach_audit(writer)

    def counted_years() -> None:
        for _ in range(years):
            model.step()

    with tuned_collector():
        model.step()
        ctypes.CFUNCTYPE(None)(counted_years)()
    if writer is not None:
        writer.close()


def floor_child(agents: int, steps: int) -> mesa.Model:
    """Build the floor, step it once, then step it ``steps`` times inside ``ffi_call``."""
    import ctypes

    model = _sibling("bench_scaling").empty_model(agents)

    def counted_steps() -> None:
        for _ in range(steps):
            model.step()

    model.step()
    ctypes.CFUNCTYPE(None)(counted_steps)()
    return model


def _sibling(name: str) -> ModuleType:
    """The benchmark script ``name`` beside this one, imported (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def row_line(row: dict[str, Any]) -> str:
    """One row of the printed table (see :func:`main` for the row's keys)."""
    line = f"{row['households']:>10,} hh x {row['years']} y  {row['audit']:<9}{row['engine']:<8}"
    line += f"{row['instructions_per_household_year']:>10,} instructions per household-year"
    if "ratio_to_floor" in row:
        line += f" ({row['ratio_to_floor']:.1f}x the floor)"
    if "against" in row:
        line += (
            f"   against {row['against_instructions_per_household_year']:,} ({row['ratio']:.3f}x)"
        )
    return line


def _parser() -> argparse.ArgumentParser:
    """The command line :func:`main` reads."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--households", type=int, default=1_000)
    parser.add_argument("--years", type=int, default=12, help="counted years (after a warm-up)")
    parser.add_argument("--levels", nargs="*", default=["off", "standard"])
    parser.add_argument("--engine", choices=("objects", "arrays"), default="objects")
    parser.add_argument("--against", type=Path, help="another checkout to count side by side")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument("--no-floor", action="store_true", help="do not count the empty-Mesa floor")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, as `floodsim run --set` (e.g. memory.reflection.enabled=true)",
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--floor-child", nargs=2, type=int, help=argparse.SUPPRESS)
    return parser


def main() -> None:
    """Count, print the table, write the JSON."""
    parser = _parser()
    args = parser.parse_args()
    if args.child:
        households, years, level, engine, *overrides = args.child
        with tempfile.TemporaryDirectory(prefix="floodsim-instructions-child-") as out:
            child(int(households), int(years), level, engine, Path(out), overrides)
        return
    if args.floor_child:
        floor_child(*args.floor_child)
        return
    if args.against is not None and not (args.against / "simulation").is_dir():
        parser.error(f"--against {args.against}: no simulation/ package there")
    if args.set:  # a bad key or value: one line naming it, before anything is counted
        from simulation.config import ConfigError, load_config

        try:
            load_config(DEFAULT_CONFIG, [*args.set, f"engine={args.engine}"])
        except ConfigError as err:
            parser.error(str(err))

    household_years = args.households * args.years
    floor = None
    if not args.no_floor:
        floor = round(count_floor(args.households, args.years) / household_years)
        print(
            f"{args.households:>10,} agents x {args.years} steps: the empty-Mesa floor, "
            f"{floor:,} instructions per agent-step",
            flush=True,
        )
    rows: list[dict[str, Any]] = []
    for level in args.levels:
        sources = [None] if args.against is None else [None, args.against.resolve()]
        with ThreadPoolExecutor(max_workers=len(sources)) as pool:
            counts = list(
                pool.map(
                    lambda s, lv=level: count(
                        args.households, args.years, lv, s, args.engine, args.set
                    ),
                    sources,
                )
            )
        row: dict[str, Any] = {
            "households": args.households,
            "years": args.years,
            "audit": level,
            "engine": args.engine,
            "instructions_per_household_year": round(counts[0] / household_years),
        }
        if args.set:
            row["set"] = args.set
        if floor is not None:
            row["floor_instructions_per_agent_step"] = floor
            row["ratio_to_floor"] = round(row["instructions_per_household_year"] / floor, 2)
        if args.against is not None:
            row["against"] = str(args.against)
            row["against_instructions_per_household_year"] = round(counts[1] / household_years)
            row["ratio"] = round(counts[0] / counts[1], 4)
        rows.append(row)
        print(row_line(row), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()

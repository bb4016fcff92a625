"""Throughput and scaling of whole simulations against the empty-Mesa floor.

For each (households, audit level, engine) configuration this runs the default configuration
for ``--years`` years in a fresh process and reports:

* household-years per second of the yearly steps alone (building the model and a run's fixed
  costs, such as writing its folder, manifest and metrics, are reported apart; configurations
  under a million household-years run several times and report the median);
* peak resident memory (RSS) of that process;
* audit bytes per household-year (all stream files);
* the floor: a Mesa model with the same number of agents whose ``step`` does nothing, activated
  with ``shuffle_do``, stepped for at least a second in each of ``--floor-processes`` fresh
  processes (5) right after each configuration; the floor of a size is the lowest of all the
  processes of that size in the run;
* the ratio of floodsim's cost per household-year to the floor's, which the verdicts judge;
  and beside it the ratio to the floor measured in the seconds after the configuration
  (the median of its own processes), which shares the host's moment with the cost;
* the CPU time of the steps per household-year, all threads (with the audit written behind the
  run it can exceed the wall time), and in brackets the kernel's part of it: copying the audit
  lines into the page cache and faulting in fresh memory (on this project's VM a sixth to a
  quarter of a 10,000-household year at ``standard`` with batches of 8,192 lines, a tenth with
  2,048: ``docs/performance.md``, 2026-11-28).

Why several processes, and the lowest: in one process the floor's cost is steady, but from one
process to the next it is either about 0.22 µs per agent-step at 1,000 agents or, in about one
process in three, 0.3 to 0.48 µs. With address-space randomisation off (``setarch -R``) six
processes in six measured 0.225 to 0.227 µs, so much of the spread is an unlucky placement in
memory, not the machine's hour. Measured in a single process, the ratio of the same floodsim
cost moved from 9.8x to 22.8x between eight processes (this benchmark measured the floor once,
in floodsim's process after its run, until 2026-11-28). At 100,000 agents fresh processes
measured 0.34 to 0.82 µs, and the five after one configuration could all be slow. The lowest
of a size's processes (ten or more in a matrix) is the empty model's own cost, which neither
the configuration nor the round changes; as the divisor it also gives the largest ratio, the
one least kind to floodsim. Each row keeps the floors of the processes measured after it, in
every round (``floor_us_per_agent_step_processes``).

That account was measured on an Intel Xeon host (2026-11-28). On the AMD EPYC host
(2026-11-30) the spread is the host's moment instead: one process stepping the floor for 15 s
at 1,000 agents moved between 0.34 and 0.6 µs every fraction of a second, six processes with
address-space randomisation off measured 0.37 to 0.61, and floodsim's years switched between
5.6 and 8.5 to 10 ms within a run. There the lowest floor is the host's fast moment and
floodsim's cost a mix of both, so each row also reports its ratio to the median floor of its
own processes, measured seconds after it (``ratio_to_floor_beside``; ``x beside`` in the table).
The verdicts stay on the lowest floor.

Peak RSS is judged on its own configuration: 100,000 households whose working and episodic
memories are at capacity before the first year (:func:`fill_memories`) and stay there, since in
a default run most memories are far from full (a mean of 7 episodic items of 50 after 30 years).
It is the peak up to the end of the runs, before the benchmark reads every household's memory
to report what they held (on engine arrays that read writes the pool back into objects).

It prints the machine it ran on (:func:`machine`: processor, CPUs, interpreter, library
versions), a table and the targets' verdicts, writes them as JSON and draws the costs against
the floor and the targets as a PNG beside the JSON (``scaling.png``).

The speed of a shared machine drifts by more within minutes than the growth target allows
(two runs of this benchmark three minutes apart put growth at ``off`` at 1.56x and 1.10x).
``--rounds N`` runs the whole list of configurations N times over, one round after another, so
that a slow spell slows every size alike; each configuration then reports its median round, and
growth is judged on the costs of the same round, taking the median over rounds.

``--split`` divides each level's cost into a part per household-year and a part per year that
every population pays alike (a least-squares line through the cost of a year against the number
of households: :func:`cost_split`). A cost per year that does not shrink with the population is
what keeps a small population far above the floor, whose own cost is per agent. The line holds
where a household-year costs the same at every size but for that fixed part: between 1,000 and
a few thousand households, not up to 100,000, where caches and page writes add their own.

Usage:
    python benchmarks/bench_scaling.py                       # 1k, 10k, 100k x 30 years
    python benchmarks/bench_scaling.py --quick               # 1k and 10k only
    python benchmarks/bench_scaling.py --households 100000 --levels standard --full-memories
    python benchmarks/bench_scaling.py --households 1000 --levels off standard --years 30
    python benchmarks/bench_scaling.py --households 1000 100000 --levels off --rounds 3
    python benchmarks/bench_scaling.py --households 10000 --levels off --engines arrays objects
    python benchmarks/bench_scaling.py --households 1000 2000 4000 --levels off standard \
        --engines arrays --rounds 2 --split           # fixed cost per year vs per household
    python benchmarks/bench_scaling.py --households 10000 --levels standard --engines arrays \
        --set audit.background=false                         # any config key, as floodsim run

``engine: arrays`` (simulation/array_engine.py) gives the object path's results at a fraction
of its cost; the matrix measures both engines at every level.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    import mesa
    from matplotlib.figure import Figure

    from simulation.model import FloodAdaptationModel

__all__ = [
    "combine_rounds",
    "cost_split",
    "empty_model",
    "fill_memories",
    "floor_in_fresh_processes",
    "floor_seconds_per_agent_step",
    "growth",
    "machine",
    "machine_line",
    "main",
    "measure_one",
    "measure_rounds",
    "parse_args",
    "plot_scaling",
    "repeats_for",
    "split_lines",
    "target_checks",
    "with_floors",
]

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
DEFAULT_JSON = Path("benchmarks/results/scaling.json")
#: The issue's matrix, (audit level, engine) per size: full audit only at the two smaller
#: sizes.
MATRIX = {
    n: (
        ("off", "objects"),
        ("off", "arrays"),
        ("standard", "objects"),
        ("standard", "arrays"),
        *((("full", "objects"), ("full", "arrays")) if n < 100_000 else ()),
    )
    for n in (1_000, 10_000, 100_000)
}
#: The engines there are (``engine`` in a run config).
ENGINES = ("objects", "arrays")

#: Configurations smaller than this many household-years run several times (at most
#: MAX_REPEATS) and report their median: a 1,000-household run takes about a second, and one
#: noisy second on a shared machine moved it by a fifth, and with it the growth verdict.
MEASURED_HOUSEHOLD_YEARS = 1_000_000
MAX_REPEATS = 5

#: Peak RSS is judged with every household's memory full, at this size and audit level.
FULL_MEMORIES = {100_000: (("standard", "objects"), ("standard", "arrays"))}

#: Targets of the performance issue: cost per household-year as a multiple of the floor, ...
TARGET_RATIO = {"off": 15.0, "standard": 20.0}
#: ... growth of that cost from the smallest to the largest size, ...
TARGET_GROWTH = 1.3
#: ... and peak RSS at 100,000 households.
TARGET_RSS_MB = 2048


#: The floor steps its empty model for at least this long: at 1,000 agents a step takes a
#: quarter of a millisecond, and a few of them are no sample of a noisy machine.
FLOOR_MIN_SECONDS = 1.0
#: Fresh processes the floor is measured in, per configuration (see the module docstring).
FLOOR_PROCESSES = 5

#: The libraries whose versions :func:`machine` records: the ones a year's time is spent in.
LIBRARIES = ("mesa", "numpy", "pyarrow", "orjson")
_CPUINFO = Path("/proc/cpuinfo")


def machine(cpuinfo: Path = _CPUINFO) -> dict[str, Any]:
    """What the figures were measured on: processor, logical CPUs, interpreter, libraries.

    The ratios to the floor depend on the host as well as on the code. On the project's shared
    VM the same code (the same instructions per household-year, counted under callgrind) ran
    the default world at 1,000 households, audit ``off``, at 14.3x the floor on an Intel Xeon
    host and at 22.8x on an AMD EPYC host: there the floor took 1.4 times as long and the
    default world 2.2 times (``docs/performance.md``, 2026-11-30). A figure without its machine
    cannot be compared with another.

    Args:
        cpuinfo: Linux's processor description, read for the first processor's model name,
            family and model; elsewhere (or unreadable) the processor is ``platform``'s.

    Returns:
        ``processor``, ``cpu_family`` and ``cpu_model`` (``None`` where unknown), ``cpus``,
        ``python``, ``platform`` and ``libraries`` (name to version).
    """
    fields: dict[str, str] = {}
    try:
        first = cpuinfo.read_text().split("\n\n", 1)[0]
    except OSError:
        first = ""
    for line in first.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    libraries = {}
    for name in LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            libraries[name] = None
    return {
        "processor": fields.get("model name") or platform.processor() or platform.machine(),
        "cpu_family": fields.get("cpu family"),
        "cpu_model": fields.get("model"),
        "cpus": os.cpu_count(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "libraries": libraries,
    }


def machine_line(host: dict[str, Any]) -> str:
    """:func:`machine`'s record in one line, as the benchmark prints it above its table."""
    processor = host["processor"]
    if host["cpu_family"] is not None:
        processor += f" (family {host['cpu_family']}, model {host['cpu_model']})"
    libraries = ", ".join(f"{name} {version}" for name, version in host["libraries"].items())
    return (
        f"machine: {processor}, {host['cpus']} CPUs; {host['python']}; {host['platform']}; "
        f"{libraries}"
    )


def empty_model(agents: int) -> mesa.Model:
    """The floor: a Mesa model of ``agents`` agents whose ``step`` does nothing.

    Each step activates every agent in a shuffled order (``shuffle_do``), as a Mesa model's
    step usually does.
    """
    import mesa

    class Idle(mesa.Agent):
        def step(self) -> None:
            pass

    class Empty(mesa.Model):
        def __init__(self) -> None:
            super().__init__(seed=1)
            Idle.create_agents(self, agents)

        def step(self) -> None:
            self.agents.shuffle_do("step")

    return Empty()


def floor_seconds_per_agent_step(
    agents: int, years: int, min_seconds: float = FLOOR_MIN_SECONDS
) -> float:
    """Seconds per agent-step of :func:`empty_model`.

    The median over the steps after a warm-up step, at least ``years`` of them and at least
    ``min_seconds`` in all: a single step is short enough for a noisy neighbour on a shared
    machine to double it, and the floor is the divisor of every ratio.
    """
    model = empty_model(agents)
    model.step()
    steps: list[float] = []
    while len(steps) < years or sum(steps) < min_seconds:
        start = time.perf_counter()
        model.step()
        steps.append(time.perf_counter() - start)
    model.remove_all_agents()
    return statistics.median(steps) / agents


def floor_in_fresh_processes(
    agents: int,
    years: int,
    processes: int = FLOOR_PROCESSES,
    min_seconds: float = FLOOR_MIN_SECONDS,
) -> list[float]:
    """:func:`floor_seconds_per_agent_step` measured in each of ``processes`` new processes.

    Returns:
        Seconds per agent-step, one per process, in the order measured.
    """
    command = [sys.executable, __file__, "--floor", str(agents), "--years", str(years)]
    command += ["--floor-seconds", str(min_seconds)]
    return [
        float(subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True).stdout)
        for _ in range(processes)
    ]


def with_floors(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with the floor of their size and the ratio of their cost to it.

    Each row holds the floors of its own processes (``floor_us_per_agent_step_processes``);
    the floor of a size is the lowest of every process of that size, whichever row measured it:
    it is the empty model's cost, which the configuration and the round do not change. The
    verdicts are judged on that ratio (``ratio_to_floor``).

    Each row also gets the ratio of its cost to the median of its own processes' floors, which
    were measured in the seconds after it, in the same moment of a shared host
    (``ratio_to_floor_beside``; why, in the module docstring).
    """
    lowest: dict[int, float] = {}
    for r in rows:
        here = min(r["floor_us_per_agent_step_processes"])
        lowest[r["households"]] = min(here, lowest.get(r["households"], here))
    return [
        {
            **r,
            "floor_us_per_agent_step": lowest[r["households"]],
            "ratio_to_floor": round(r["us_per_household_year"] / lowest[r["households"]], 1),
            "ratio_to_floor_beside": round(
                r["us_per_household_year"]
                / statistics.median(r["floor_us_per_agent_step_processes"]),
                1,
            ),
        }
        for r in rows
    ]


def fill_memories(model: FloodAdaptationModel) -> None:
    """Fill every household's working and episodic memory to capacity before the first year.

    The memories are the kinds a run leaves in the fullest memories of a 30-year default run,
    in about its proportions: four in five are memories of buying insurance (with the
    household's own premium), the rest paid claims and major floods (with drawn amounts); working
    memory holds neighbour notes. They are written through the memory's own ``write``, rendered
    from the configured templates like the model's, and dated year 0, so later experiences
    outrank and replace them one by one and the memories stay full.
    """
    import numpy as np

    from simulation.skills.templates import render

    events = model.config.events
    amounts = np.random.default_rng(0).lognormal(10.5, 0.8, size=(len(model.households), 8))
    for household, drawn in zip(model.households, amounts.tolist(), strict=True):
        memory, state = household.memory, household.state
        premium = model.costs_for(state)["buy_insurance"]
        for i in range(memory.episodic_capacity):
            kind = i % 20
            if kind < 15:
                context = {"year": 0, "premium": premium, "cost": premium}
                content, importance, tags = model.registry.memory_update(
                    "buy_insurance", state, context
                )
                memory.write(content, importance, 0, tags, store="episodic", source="decision")
            else:
                event, source = (
                    (events.claim_paid, "claim") if kind < 18 else (events.flood_major, "flood")
                )
                amount = drawn[i % 8]
                content = render(event.template, {"year": 0, "payout": amount, "damage": amount})
                memory.write(
                    content,
                    event.importance,
                    0,
                    event.tags,
                    store="episodic",
                    source=source,
                    amount=amount,
                )
        note = events.neighbor_adaptation
        for i in range(memory.working_capacity):
            content = render(
                note.template,
                {"year": 0, "count": i + 1, "total": 8, "action": "bought flood insurance"},
            )
            memory.write(content, note.importance, 0, note.tags, store="working", source="neighbor")


def _kernel_seconds() -> float:
    """CPU seconds this process has spent in the kernel so far, all threads."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_stime


def repeats_for(households: int, years: int) -> int:
    """How many times to run a configuration (see :data:`MEASURED_HOUSEHOLD_YEARS`)."""
    return min(MAX_REPEATS, max(1, round(MEASURED_HOUSEHOLD_YEARS / (households * years))))


def measure_one(
    households: int,
    level: str,
    years: int,
    *,
    full_memories: bool = False,
    repeats: int = 1,
    engine: str = "objects",
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Run one configuration here and return its figures (called in a child process).

    The floor and the ratio to it are added by :func:`with_floors`, from fresh processes.

    With ``repeats`` above one the same run (same seed) is built and stepped that many times
    and its median stepping time is reported, with the fastest and slowest. ``extra`` overrides
    (``KEY=VALUE``, as ``floodsim run --set``) change the default configuration further.
    """
    from simulation.config import load_config
    from simulation.runner import build_model, run_simulation

    overrides = [f"households.count={households}", f"years={years}", f"audit.level={level}"]
    overrides = [*overrides, f"engine={engine}", *extra]
    config, base = load_config(DEFAULT_CONFIG, overrides)
    times: list[float] = []
    whole: list[float] = []  # each run_simulation, steps and fixed costs
    cpu_times: list[tuple[float, float]] = []  # each run's CPU seconds in the steps, and kernel's
    for attempt in range(repeats):
        with tempfile.TemporaryDirectory(prefix="bench_scaling_") as tmp:
            start = time.perf_counter()
            model = build_model(config, base)
            built = time.perf_counter() - start
            start = time.perf_counter()
            if full_memories:
                fill_memories(model)
            filled = time.perf_counter() - start
            # Only the yearly steps are timed: writing the run folder, the manifest and the
            # metrics, and logging the initial memories, are a run's fixed costs, which would
            # make small populations look slower per household-year.
            # Wall time, CPU time of every thread, and the kernel's part of it, in the steps.
            stepping = [0.0, 0.0, 0.0]
            step = model.step

            def timed_step(
                step: Callable[[], None] = step,
                stepping: list[float] = stepping,
                model: FloodAdaptationModel = model,
            ) -> None:
                cpu, kernel = time.process_time(), _kernel_seconds()
                start = time.perf_counter()
                step()
                if model.steps == years and model.audit is not None:
                    # Lines are written behind the run (audit.background): the last year's
                    # are part of the years' cost.
                    model.audit.wait()
                stepping[0] += time.perf_counter() - start
                stepping[1] += time.process_time() - cpu
                stepping[2] += _kernel_seconds() - kernel

            model.step = timed_step
            start = time.perf_counter()
            result = run_simulation(config, base, Path(tmp), progress=False, model=model)
            whole.append(time.perf_counter() - start)
            times.append(stepping[0])
            cpu_times.append((stepping[1], stepping[2]))
            audit_bytes = sum(p.stat().st_size for p in result.run_dir.glob("*.jsonl*"))
        if attempt < repeats - 1:
            model.release()
    # The runs' peak, taken before the figures below read every household's memory: on
    # engine arrays that read writes the memories back into objects beside the pool, which
    # the run itself never does.
    peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    elapsed = statistics.median(times)
    household_years = households * years
    per_hy = elapsed / household_years
    cpu = statistics.median(c for c, _ in cpu_times)
    kernel = statistics.median(k for _, k in cpu_times)
    # Households that relocated keep their last memories but no longer write or forget.
    everyone = [h.memory for h in model.households]
    memories = [h.memory for h in model.households if h.active] or everyone
    working = round(statistics.fmean(m.working_size for m in memories), 2)
    episodic = round(statistics.fmean(m.episodic_size for m in memories), 2)
    return {
        "households": households,
        "years": years,
        "audit": level,
        "engine": engine,
        "set": list(extra),
        "memories": "full" if full_memories else "as run",
        # What the memories held at the end: with full_memories, that they stayed full.
        "mean_working_after": working,
        "mean_episodic_after": episodic,
        "build_s": round(built, 3),
        "fill_s": round(filled, 3),
        "runs": repeats,
        "run_s": round(elapsed, 3),
        "run_s_range": [round(min(times), 3), round(max(times), 3)],
        "run_fixed_s": round(
            statistics.median(w - t for w, t in zip(whole, times, strict=True)), 3
        ),
        "household_years_per_s": round(household_years / elapsed, 1),
        "us_per_household_year": round(per_hy * 1e6, 2),
        # CPU time of all the process's threads in the median run's steps (the audit's writer
        # thread included, so it can exceed the wall time), and the kernel's part of it:
        # copying lines into the page cache, faulting in fresh memory.
        "cpu_us_per_household_year": round(cpu / household_years * 1e6, 2),
        "system_us_per_household_year": round(kernel / household_years * 1e6, 2),
        "peak_rss_mb": peak_rss_mb,
        "audit_bytes_per_household_year": round(audit_bytes / household_years, 1),
    }


def combine_rounds(results: list[dict[str, Any]]) -> dict[str, Any]:
    """One configuration's row from its rounds (in round order): the round of median cost.

    The row keeps every round's cost (``rounds_us_per_household_year``, in round order, which
    growth is judged on), the highest peak RSS of any round, the floors of every round's
    processes, in the order measured, and the median over the rounds of each round's ratio to
    the floor measured beside it (``ratio_to_floor_beside``, see :func:`with_floors`).
    """
    ordered = sorted(results, key=lambda r: r["us_per_household_year"])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["rounds_us_per_household_year"] = [r["us_per_household_year"] for r in results]
    beside = [r["ratio_to_floor_beside"] for r in results if "ratio_to_floor_beside" in r]
    if beside:
        row["ratio_to_floor_beside"] = round(statistics.median(beside), 1)
    row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in results)
    floors = [f for r in results for f in r.get("floor_us_per_agent_step_processes", ())]
    if floors:
        row["floor_us_per_agent_step_processes"] = floors
    return row


def growth(small: dict[str, Any], large: dict[str, Any]) -> float:
    """The cost per household-year of ``large`` as a multiple of that of ``small``.

    Rows measured in the same rounds are compared round by round (the median of the ratios);
    otherwise their reported costs are.
    """
    key = "rounds_us_per_household_year"
    paired = small.get(key), large.get(key)
    if paired[0] and paired[1] and len(paired[0]) == len(paired[1]):
        return statistics.median(b / a for a, b in zip(*paired, strict=True))
    return large["us_per_household_year"] / small["us_per_household_year"]


def parse_args() -> argparse.Namespace:
    """The command line, checked."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--households", type=int, nargs="*", help="sizes (default: the matrix)")
    parser.add_argument("--levels", nargs="*", help="audit levels for --households sizes")
    parser.add_argument(
        "--engines",
        nargs="*",
        choices=ENGINES,
        help="engines for --households sizes (default: objects)",
    )
    parser.add_argument("--years", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="only 1,000 and 10,000 households")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON)
    parser.add_argument(
        "--full-memories",
        action="store_true",
        help="with --households: fill every memory to capacity first (see fill_memories)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        help=f"runs per configuration (default: enough for about {MEASURED_HOUSEHOLD_YEARS:,} "
        f"household-years, at most {MAX_REPEATS}; the median is reported)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the whole list this many times over and report each configuration's median "
        "round; growth is judged round by round (default: 1)",
    )
    parser.add_argument(
        "--floor-seconds",
        type=float,
        default=FLOOR_MIN_SECONDS,
        help="step the empty-Mesa floor for at least this long in each process "
        f"(default: {FLOOR_MIN_SECONDS:g})",
    )
    parser.add_argument(
        "--floor-processes",
        type=int,
        default=FLOOR_PROCESSES,
        help="fresh processes the floor is measured in after each configuration; a size's "
        f"floor is the lowest of all its processes (default: {FLOOR_PROCESSES})",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key in every configuration, as floodsim run --set (repeatable)",
    )
    parser.add_argument(
        "--split",
        action="store_true",
        help="also fit each level's cost as a part per household-year plus a part per year, "
        "over the sizes measured (meant for sizes from 1,000 to a few thousand)",
    )
    parser.add_argument("--one", nargs=2, metavar=("HOUSEHOLDS", "LEVEL"), help=argparse.SUPPRESS)
    parser.add_argument("--floor", type=int, metavar="AGENTS", help=argparse.SUPPRESS)
    parser.add_argument("--engine", choices=ENGINES, default="objects", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.floor_processes < 1:
        parser.error(f"--floor-processes must be at least 1, got {args.floor_processes}")
    if (args.levels or args.engines) and not args.households:
        # Without sizes the whole matrix runs (18 to 41 minutes), every level and engine.
        flag = "--levels" if args.levels else "--engines"
        parser.error(f"{flag} applies to the --households sizes: give them too")
    return args


def measure_rounds(
    args: argparse.Namespace, runs: list[tuple[int, str, str, bool]]
) -> list[list[dict[str, Any]]]:
    """Each configuration of ``runs`` measured in its own process, round after round.

    After each configuration, the floor is measured in ``--floor-processes`` fresh processes.

    Returns:
        Per configuration, its row of each round, in round order.
    """
    results: list[list[dict[str, Any]]] = [[] for _ in runs]
    for round_ in range(1, args.rounds + 1):
        for results_of_run, (households, level, engine, full) in zip(results, runs, strict=True):
            memories = ", full memories" if full else ""
            progress = f" (round {round_} of {args.rounds})" if args.rounds > 1 else ""
            print(
                f"running {households} households, audit {level}, engine {engine}"
                f"{memories}{progress} ...",
                file=sys.stderr,
            )
            repeats = args.repeats or repeats_for(households, args.years)
            command = [sys.executable, __file__, "--one", str(households), level]
            command += ["--years", str(args.years), "--repeats", str(repeats)]
            command += ["--engine", engine]
            command += ["--full-memories"] if full else []
            command += [f"--set={override}" for override in args.set]
            # The child's stderr passes through: a configuration that fails says why.
            child = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
            row = json.loads(child.stdout.strip().splitlines()[-1])
            floors = floor_in_fresh_processes(
                households, args.years, args.floor_processes, args.floor_seconds
            )
            row["floor_us_per_agent_step_processes"] = [round(f * 1e6, 3) for f in floors]
            results_of_run.append(row)
    return results


def main() -> None:
    """Run the matrix (each configuration in its own process), print and write JSON."""
    args = parse_args()
    if args.floor is not None:
        print(floor_seconds_per_agent_step(args.floor, args.years, args.floor_seconds))
        return
    if args.one:
        row = measure_one(
            int(args.one[0]),
            args.one[1],
            args.years,
            full_memories=args.full_memories,
            repeats=args.repeats or 1,
            engine=args.engine,
            extra=tuple(args.set),
        )
        print(json.dumps(row))
        return
    runs: list[tuple[int, str, str, bool]]
    if args.households:
        levels = args.levels or ("off", "standard")
        engines = args.engines or ("objects",)
        runs = [
            (n, level, engine, args.full_memories)
            for n in args.households
            for level in levels
            for engine in engines
        ]
    else:
        runs = [
            (n, level, engine, full)
            for full, matrix in ((False, MATRIX), (True, FULL_MEMORIES))
            for n, configurations in matrix.items()
            if not (args.quick and n > 10_000)
            for level, engine in configurations
        ]
    results = measure_rounds(args, runs)
    floored = iter(with_floors([row for rounds in results for row in rounds]))
    results = [[next(floored) for _ in rounds] for rounds in results]
    rows = [combine_rounds(r) if args.rounds > 1 else r[0] for r in results]
    host = machine()
    print(machine_line(host))
    header = (
        f"{'households':>10} {'audit':>8} {'engine':>7} {'memories':>8} {'hh-yr/s':>9} "
        f"{'us/hh-yr':>9} "
        f"{'floor us':>8} {'x floor':>7} {'x beside':>8} {'CPU us (sys)':>12} {'RSS MB':>7} "
        f"{'audit B/hh-yr':>13}"
    )
    if args.set:
        print("every configuration with " + " ".join(f"--set {o}" for o in args.set))
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['households']:>10} {r['audit']:>8} {_engine(r):>7} {r['memories']:>8} "
            f"{r['household_years_per_s']:>9.0f} "
            f"{r['us_per_household_year']:>9.1f} {r['floor_us_per_agent_step']:>8.3f} "
            f"{r['ratio_to_floor']:>7.1f} {r['ratio_to_floor_beside']:>8.1f} {_cpu(r):>12} "
            f"{r['peak_rss_mb']:>7.0f} "
            f"{r['audit_bytes_per_household_year']:>13.0f}"
        )
    checks = target_checks(rows)
    for line in checks:
        print(line)
    written: dict[str, Any] = {"machine": host, "rows": rows, "targets": checks}
    if args.split:
        written["split"] = cost_split(rows)
        for line in split_lines(written["split"]):
            print(line)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(written, indent=2))
    figure = plot_scaling(rows, host["processor"])
    if figure is not None:
        png = args.json.with_suffix(".png")
        figure.savefig(png, dpi=120)
        print(f"wrote {args.json} and {png}")


def target_checks(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, each as one "met"/"MISSED" line, for the rows measured.

    Cost ratios and growth are judged on runs as they come (``memories`` "as run"); peak RSS on
    runs at 100,000 households or more whose memories were filled (``memories`` "full").
    """
    lines = []
    full = [r for r in rows if r.get("memories") == "full"]
    rows = [r for r in rows if r.get("memories", "as run") != "full"]
    for r in rows:
        limit = TARGET_RATIO.get(str(r["audit"]))
        if limit is not None:
            verdict = "met" if r["ratio_to_floor"] <= limit else "MISSED"
            beside = r.get("ratio_to_floor_beside")
            lines.append(
                f"{int(r['households']):>7} households, audit {r['audit']}{_on(r)}: "
                f"{r['ratio_to_floor']}x floor (target <= {limit}x): {verdict}"
                + (f" ({beside}x the floor measured beside it)" if beside is not None else "")
            )
    for level, engine in sorted({(str(r["audit"]), _engine(r)) for r in rows}):
        sized = sorted(
            (r for r in rows if r["audit"] == level and _engine(r) == engine),
            key=lambda r: r["households"],
        )
        if len(sized) > 1:
            small, large = sized[0], sized[-1]
            grown = growth(small, large)
            # The target compares 1,000 with 100,000 households at off and standard; other
            # pairs (--quick's 10,000, full's 10,000) are shown, not judged.
            judged = (
                level in TARGET_RATIO
                and small["households"] <= 1_000
                and large["households"] >= 100_000
            )
            verdict = "met" if grown <= TARGET_GROWTH else "MISSED"
            lines.append(
                f"audit {level}{_on(small)}: cost per household-year at "
                f"{int(large['households'])} is "
                f"{grown:.2f}x that at {int(small['households'])} "
                + (
                    f"(target <= {TARGET_GROWTH}x): {verdict}"
                    if judged
                    else "(not judged: the target compares 1,000 with 100,000 households)"
                )
            )
    for r in full:
        if r["households"] >= 100_000:
            verdict = "met" if r["peak_rss_mb"] <= TARGET_RSS_MB else "MISSED"
            lines.append(
                f"{int(r['households'])} households, audit {r['audit']}{_on(r)}, full memories: "
                f"peak RSS {r['peak_rss_mb']:.0f} MB (target <= {TARGET_RSS_MB} MB): {verdict}"
            )
    return lines


def cost_split(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each (level, engine)'s cost as a part per household-year plus a part per year.

    Fits the cost of a year, ``households * us_per_household_year``, as a straight line in the
    number of households, by least squares over the sizes measured ("as run" rows only): its
    slope is the cost of a household-year, its intercept the cost of a year whatever the
    population.

    Returns:
        A dict per (level, engine) measured at two sizes or more: ``audit``, ``engine``,
        ``households`` (the sizes), ``us_per_household_year``, ``ms_per_year``, and at the
        smallest size its ``floor_us_per_agent_step`` and its ``us_per_household_year_there``.
    """
    import numpy as np  # the benchmark's parent process needs numpy only here

    rows = [r for r in rows if r.get("memories", "as run") != "full"]
    splits = []
    for level, engine in sorted({(str(r["audit"]), _engine(r)) for r in rows}):
        sized = sorted(
            (r for r in rows if r["audit"] == level and _engine(r) == engine),
            key=lambda r: r["households"],
        )
        sizes = [int(r["households"]) for r in sized]
        if len(set(sizes)) < 2:
            continue
        per_year_us = [
            n * float(r["us_per_household_year"]) for n, r in zip(sizes, sized, strict=True)
        ]
        slope, intercept = np.polyfit(np.array(sizes, float), np.array(per_year_us), 1)
        splits.append(
            {
                "audit": level,
                "engine": engine,
                "households": sizes,
                "us_per_household_year": round(float(slope), 3),
                "ms_per_year": round(float(intercept) / 1000.0, 3),
                "floor_us_per_agent_step": sized[0]["floor_us_per_agent_step"],
                "us_per_household_year_there": sized[0]["us_per_household_year"],
            }
        )
    return splits


def split_lines(splits: list[dict[str, Any]]) -> list[str]:
    """:func:`cost_split` as lines, each with what its target allows at the smallest size."""
    lines = []
    for s in splits:
        smallest = s["households"][0]
        fixed_there = 1000.0 * s["ms_per_year"] / smallest
        sizes = ", ".join(str(n) for n in s["households"])
        line = (
            f"audit {s['audit']}{_on(s)}: {s['us_per_household_year']:.2f} us per household-year "
            f"+ {s['ms_per_year']:.2f} ms per year (fit over {sizes} households); "
            f"at {smallest} households the part per year is {fixed_there:.2f} of "
            f"{s['us_per_household_year_there']:.2f} us per household-year"
        )
        limit = TARGET_RATIO.get(s["audit"])
        if limit is not None:
            allowed = limit * float(s["floor_us_per_agent_step"])
            line += f", and the target allows {allowed:.2f} ({limit:g} x the floor)"
        lines.append(line)
    return lines


def _cpu(row: dict[str, Any]) -> str:
    """A row's CPU µs per household-year with the kernel's part in brackets, e.g. ``6.1 (0.6)``."""
    return f"{row['cpu_us_per_household_year']:.1f} ({row['system_us_per_household_year']:.1f})"


def _engine(row: dict[str, Any]) -> str:
    """A row's engine (rows written before engines were measured ran on objects)."""
    return str(row.get("engine", "objects"))


def _on(row: dict[str, Any]) -> str:
    """How a verdict or a legend names a row's engine, e.g. ``, engine arrays``.

    Both engines are named: a matrix measures both, and a line that named neither was easily
    taken for the default engine's (``engine: auto`` runs arrays).
    """
    return f", engine {_engine(row)}"


def plot_scaling(rows: list[dict[str, Any]], processor: str | None = None) -> Figure | None:
    """Cost per household-year by population size, against the floor and the targets.

    Runs with filled memories (``memories`` "full") measure memory, not cost, and are left out.

    One line per audit level and engine; the floor is drawn with the two ratio targets above
    it (15x for ``off``, 20x for ``standard``), so a level meets its target where its line runs
    below the target's. ``None`` when no row was measured. The title names ``processor`` when
    given: the ratios depend on the host (see :func:`machine`).
    """
    # Imported here: the measuring child processes must not load it (it would add to their RSS).
    from matplotlib.figure import Figure

    rows = [r for r in rows if r.get("memories", "as run") != "full"]
    if not rows:
        return None
    figure = Figure(figsize=(10.0, 5.0), layout="constrained")
    ax = figure.add_subplot()
    for level, engine, colour in (
        ("off", "objects", "tab:blue"),
        ("off", "arrays", "tab:green"),
        ("standard", "objects", "tab:orange"),
        ("standard", "arrays", "tab:olive"),
        ("full", "objects", "tab:red"),
        ("full", "arrays", "tab:purple"),
    ):
        sized = sorted(
            (r for r in rows if r["audit"] == level and _engine(r) == engine),
            key=lambda r: r["households"],
        )
        if sized:
            ax.plot(
                [r["households"] for r in sized],
                [r["us_per_household_year"] for r in sized],
                "o-",
                color=colour,
                label=f"floodsim, audit {level}{_on(sized[0])}",
            )
    # The floor is measured with every configuration; its median per size is drawn.
    sizes = sorted({int(r["households"]) for r in rows})
    floor = [
        statistics.median(r["floor_us_per_agent_step"] for r in rows if r["households"] == n)
        for n in sizes
    ]
    ax.plot(sizes, floor, "k-", label="floor: empty Mesa step")
    for level, style in (("off", ":"), ("standard", "--")):
        limit = TARGET_RATIO[level]
        ax.plot(
            sizes,
            [f * limit for f in floor],
            "k" + style,
            label=f"target {level}: {limit:g}x floor",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("households")
    ax.set_ylabel("µs per household-year")
    title = "Cost per household-year against the empty-Mesa floor"
    ax.set_title(title if processor is None else f"{title}\non {processor}")
    ax.grid(True, which="both", alpha=0.3)
    figure.legend(loc="outside right center", fontsize="small")
    return figure


if __name__ == "__main__":
    main()

"""Micro-benchmark of one household's CognitiveMemory with full stores.

Measures, for a memory holding 10 working and 50 episodic items (the class's default
capacities, seed 000's): add (working, episodic, routed), retrieve(top_k=5) under each
strategy, consolidate, and the deep size of one household's memory object. Prints a table and
writes JSON (``machine``: what it ran on, see ``bench_scaling.machine``; ``results``: the
figures by name). ``configs/default.yaml`` keeps 4 working items and retrieves 6, so its
retrievals always reach episodic memory, as the "via episodic" case does; the whole-model cost
is bench_scaling.py's.

Usage:
    python benchmarks/bench_memory.py [--json benchmarks/results/memory.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
from pathlib import Path

from bench_scaling import machine, machine_line

from simulation.memory import CognitiveMemory, RetrievalSettings

__all__ = ["deep_size", "full_memory", "main", "per_call_us", "run"]

SHARED_TYPES = (
    "RetrievalSettings",
    "RetentionSettings",
    "ReflectionSettings",
    "KeywordRelevance",
    "RuleBasedReflector",
)


def full_memory(strategy: str = "spec") -> CognitiveMemory:
    """A household memory at capacity: 10 working and 50 episodic items over 30 years."""
    mem = CognitiveMemory("H00001", retrieval=RetrievalSettings(strategy=strategy))
    for year in range(30):
        mem.update_after_flood(12_000.0 + 1_000 * year, year)
        mem.add_episodic(f"Year {year}: Insurance paid ${8_000 + year:,} for my claim", 0.7, year)
        mem.add_working(f"Year {year}: I decided to do_nothing", 0.3, year, ("decision",))
        mem.add_working(f"Year {year}: 2 of my 8 neighbours bought insurance", 0.4, year)
    assert len(mem.working) == 10
    assert len(mem.episodic) == 50
    return mem


def _shared(o: object) -> bool:
    """Objects not owned by one household: run-wide settings and interpreter singletons."""
    if o is None or isinstance(o, bool):
        return True
    if type(o) is int and -5 <= o <= 256:  # CPython's cached small ints
        return True
    return type(o).__name__ in SHARED_TYPES


def deep_size(obj: object) -> int:
    """Bytes reachable from ``obj``, each object counted once; shared objects excluded."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or _shared(o) or callable(o):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list | tuple | set | frozenset):
            stack.extend(o)
        elif hasattr(type(o), "__slots__"):
            for cls in type(o).__mro__:
                names = getattr(cls, "__slots__", ())
                stack.extend(getattr(o, name) for name in names if hasattr(o, name))
    return total


def per_call_us(stmt, number: int = 20_000, repeat: int = 5) -> float:
    """Best-of-``repeat`` time per call in microseconds."""
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number * 1e6


def run() -> dict[str, float]:
    """Measure every operation; return microseconds per call and bytes per memory."""
    mem = full_memory()
    sparse = full_memory()
    sparse._working[:] = sparse._working[-2:]  # retrieval then reaches into episodic memory
    weighted = full_memory("weighted")
    year = 31
    results = {
        "add_working (full, evicts)": per_call_us(
            lambda: mem.add_working("Year 31: I decided to do_nothing", 0.3, year)
        ),
        "add_episodic (full, forgets)": per_call_us(
            lambda: mem.add_episodic("Year 31: A flood occurred", 0.9, year)
        ),
        "add_experience (routed)": per_call_us(
            lambda: mem.add_experience("Year 31: neighbour elevated", 0.4, year)
        ),
        "retrieve(top_k=5) spec, working full": per_call_us(lambda: mem.retrieve(5, year)),
        "retrieve(top_k=5) spec, via episodic": per_call_us(lambda: sparse.retrieve(5, year)),
        "retrieve(top_k=5) weighted": per_call_us(lambda: weighted.retrieve(5, year), 2_000),
        "retrieve(top_k=5) weighted + query": per_call_us(
            lambda: weighted.retrieve(5, year, query="flood damage insurance"), 2_000
        ),
        "consolidate (nothing new)": per_call_us(mem.consolidate),
    }

    def consolidate_fresh() -> None:
        mem.add_working("Year 31: I bought insurance", 0.8, year)
        mem.consolidate()

    results["add_working + consolidate (1 new)"] = per_call_us(consolidate_fresh)
    results["memory size (bytes)"] = float(deep_size(full_memory()))
    return results


def main() -> None:
    """Print the table and write the JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/memory.json"))
    args = parser.parse_args()
    host = machine()
    print(machine_line(host))
    results = run()
    print("CognitiveMemory, 10 working + 50 episodic items")
    for name, value in results.items():
        unit = "B" if "bytes" in name else "us"
        print(f"  {name:<40} {value:>10.2f} {unit}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"machine": host, "results": results}, indent=2))


if __name__ == "__main__":
    main()

"""Batch speed-up: 8 equal runs with the process executor (2 workers) against serial.

Each run is the default configuration (1,000 households x 30 years, standard audit, on the engine
``engine: auto`` picks for it: arrays); the eight runs differ only in their replicate seed. Prints
both wall times and their ratio (the target on a 2-core machine is at most 0.6) and writes JSON,
with the machine it ran on (``bench_scaling.machine``): the ratio depends on the host too, 0.545
on an Intel Xeon host and 0.572 to 0.603 on an AMD EPYC one of the project's VM
(``docs/performance.md``).

Usage:
    python benchmarks/bench_batch.py [--runs 8] [--workers 2] [--json benchmarks/results/batch.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench_scaling import machine, machine_line

from simulation.experiments import run_experiment

__all__ = ["TARGET_RATIO", "main", "timed"]

#: The issue's target: the process executor's wall time at most this share of the serial one.
TARGET_RATIO = 0.6

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


def timed(kind: str, runs: int, workers: int, folder: Path) -> float:
    """Wall time of the experiment under ``kind``.

    Raises:
        SystemExit: When a run failed: a benchmark of failed runs measures nothing.
    """
    path = folder / f"{kind}.yaml"
    path.write_text(
        f"name: bench_{kind}\nbase: {DEFAULT}\nreplicates: {runs}\nseed: 7\n"
        f"executor: {{kind: {kind}, workers: {workers}}}\n",
        encoding="utf-8",
    )
    start = time.perf_counter()
    result = run_experiment(path, folder / kind, progress=False)
    elapsed = time.perf_counter() - start
    if result.failed:
        error = next(run["error"] for run in result.runs if run["status"] == "failed")
        msg = f"bench_batch: {result.failed} of {runs} {kind} runs failed; the first: {error}"
        raise SystemExit(msg)
    return elapsed


def main() -> None:
    """Run both executors, print the table and write the JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/batch.json"))
    args = parser.parse_args()
    if args.runs < 1 or args.workers < 1:
        parser.error(f"--runs and --workers must be at least 1, got {args.runs}, {args.workers}")
    host = machine()
    print(machine_line(host))
    with tempfile.TemporaryDirectory() as tmp:
        serial = timed("serial", args.runs, args.workers, Path(tmp))
        process = timed("process", args.runs, args.workers, Path(tmp))
    results = {
        "machine": host,
        "runs": args.runs,
        "workers": args.workers,
        "serial_s": round(serial, 2),
        "process_s": round(process, 2),
        "ratio": round(process / serial, 3),
    }
    print(
        f"{args.runs} equal runs (default config): serial {serial:.1f} s, "
        f"process x{args.workers} {process:.1f} s, ratio {process / serial:.3f} "
        f"(target <= {TARGET_RATIO})"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

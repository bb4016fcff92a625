"""Batch speed-up: 8 equal runs with the process executor (2 workers) against serial.

Each run is the default configuration (1,000 households x 30 years, standard audit, on the engine
``engine: auto`` picks for it: arrays); the eight runs differ only in their replicate seed. Prints
both wall times and their ratio (the target on a 2-core machine is at most 0.6) and writes JSON.

Usage:
    python benchmarks/bench_batch.py [--runs 8] [--workers 2] [--json benchmarks/results/batch.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from simulation.experiments import run_experiment

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


def timed(kind: str, runs: int, workers: int, folder: Path) -> float:
    """Wall time of the experiment under ``kind``."""
    path = folder / f"{kind}.yaml"
    path.write_text(
        f"name: bench_{kind}\nbase: {DEFAULT}\nreplicates: {runs}\nseed: 7\n"
        f"executor: {{kind: {kind}, workers: {workers}}}\n",
        encoding="utf-8",
    )
    start = time.perf_counter()
    result = run_experiment(path, folder / kind, progress=False)
    elapsed = time.perf_counter() - start
    assert result.failed == 0, result.runs
    return elapsed


def main() -> None:
    """Run both executors, print the table and write the JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/batch.json"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        serial = timed("serial", args.runs, args.workers, Path(tmp))
        process = timed("process", args.runs, args.workers, Path(tmp))
    results = {
        "runs": args.runs,
        "workers": args.workers,
        "serial_s": round(serial, 2),
        "process_s": round(process, 2),
        "ratio": round(process / serial, 3),
    }
    print(
        f"{args.runs} equal runs (default config): serial {serial:.1f} s, "
        f"process x{args.workers} {process:.1f} s, ratio {process / serial:.3f} (target <= 0.6)"
    )
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

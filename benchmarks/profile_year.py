"""Where a simulation year's time goes: cProfile of the default world, top functions.

Runs the default configuration (with the runner's collector settings) under cProfile and prints
the functions with the most time of their own and the most time including callees. cProfile
slows Python-level calls down, so read the shares, not the absolute times.

Usage:
    python benchmarks/profile_year.py                          # 2,000 households x 30 years, off
    python benchmarks/profile_year.py --households 10000 --years 10 --audit standard
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
from pathlib import Path

from simulation.audit.writer import AuditWriter
from simulation.collector import tuned_collector
from simulation.config import load_config
from simulation.runner import build_model

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


def main() -> None:
    """Profile the yearly steps of one run and print the two top lists."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--households", type=int, default=2_000)
    parser.add_argument("--years", type=int, default=30)
    parser.add_argument("--audit", default="off", choices=["off", "minimal", "standard", "full"])
    parser.add_argument("--top", type=int, default=25, help="rows per list")
    args = parser.parse_args()
    overrides = [f"households.count={args.households}", f"audit.level={args.audit}"]
    config, base = load_config(DEFAULT_CONFIG, overrides)
    model = build_model(config, base)
    with tempfile.TemporaryDirectory(prefix="profile_year_") as tmp:
        writer = None
        if args.audit != "off":
            writer = AuditWriter(Path(tmp), "profile", config.audit, config.seed)
            model.attach_audit(writer)
        profile = cProfile.Profile()
        with tuned_collector():
            profile.enable()
            for _ in range(args.years):
                model.step()
            profile.disable()
        if writer is not None:
            writer.close()
    stats = pstats.Stats(profile)
    print(f"{args.households} households x {args.years} years, audit {args.audit}")
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()

"""The ``floodsim`` command.

Subcommands:
    memory-demo   Walk one household's memory through a few flood years and print it.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from simulation.memory import CognitiveMemory, ReflectionSettings

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]


def _memory_demo(_: argparse.Namespace) -> int:
    """Show consolidation, decay-weighted retrieval and reflection for one household."""
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=2.0))
    script = {
        1: [("flood", 62_000.0)],
        2: [("decision", "buy_insurance")],
        4: [("flood", 8_500.0)],
        6: [("decision", "do_nothing")],
    }
    for year in range(1, 8):
        for kind, value in script.get(year, []):
            if kind == "flood":
                mem.update_after_flood(float(value), year)
            else:
                mem.update_after_decision(str(value), year)
        report = mem.end_year(year)
        print(f"Year {year}: retrieved for next year's decision:")
        for scored in mem.retrieve_scored(top_k=3, current_year=year + 1):
            print(f"  {scored.score:5.3f} [{scored.source:<8}] {scored.item.content}")
        for reflection in report.reflections:
            print(f"  reflection: {reflection.content}")
    print(mem)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``floodsim`` command."""
    parser = argparse.ArgumentParser(
        prog="floodsim", description="Agent-based flood adaptation simulator on Mesa."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("memory-demo", help="walk one household's memory through floods")
    demo.set_defaults(func=_memory_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``floodsim`` command; returns the process exit code."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

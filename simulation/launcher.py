"""The ``floodsim`` console command's entry point.

:mod:`simulation.cli` loads Mesa, pandas and the rest of floodsim before it can handle anything,
which takes about a second: a Ctrl-C meanwhile would print the traceback of an import. Imported
from here instead, it ends the command the way a Ctrl-C later on does.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

#: Exit code after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130


def main() -> int:
    """Run the ``floodsim`` command; returns the process exit code."""
    try:
        from simulation.cli import main as run  # noqa: PLC0415 - the import is what may be cut short
    except KeyboardInterrupt:
        print("floodsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return run()

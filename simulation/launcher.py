"""The ``floodsim`` console command's entry point.

:mod:`simulation.cli` loads Mesa, pandas and the rest of floodsim before it can handle anything,
which takes about a second: a Ctrl-C meanwhile would print the traceback of an import. Imported
from here instead, it ends the command the way a Ctrl-C later on does.

SIGTERM (a cluster scheduler's time limit, ``timeout``, ``kill PID``) ends the command as Ctrl-C
does, through :class:`Terminated`: a run marks itself failed and resumable, a batch records the
runs that finished and stops its workers, a calibration writes the evaluations that finished,
and one line says how to continue. Without it Python would die at once, leaving a calibration
nothing to resume from and a batch's workers running on.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from types import FrameType

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "Terminated", "main"]

#: Exit code after Ctrl-C (128 + SIGINT, as shells report it).
EXIT_INTERRUPTED = 130
#: Exit code after SIGTERM (128 + SIGTERM, as shells report it).
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: the command ends as after Ctrl-C, every cleanup of it included."""


def _terminate(signum: int, frame: FrameType | None) -> NoReturn:
    # One is enough: a second (a scheduler repeating itself) would cut the cleanup short. A
    # SIGKILL, which a scheduler sends after its grace period, still ends the command.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


def main() -> int:
    """Run the ``floodsim`` command; returns the process exit code."""
    signal.signal(signal.SIGTERM, _terminate)
    try:
        from simulation.cli import main as run  # noqa: PLC0415 - the import is what may be cut short
    except KeyboardInterrupt as err:
        terminated = isinstance(err, Terminated)
        print(f"floodsim: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    return run()

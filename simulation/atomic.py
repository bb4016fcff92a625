"""Replace a file whole: a reader sees the old contents or the new, never a file cut short.

floodsim rewrites its records in place as work goes on: a run's manifest and checkpoint, a
batch's ``experiment.json``, a calibration's summaries. A process stopped while writing one
(Ctrl-C, SIGKILL, a full disk) must leave a file that ``--resume`` can read, so each is written
to a temporary file beside it and moved over it in one step.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["replace_file", "temporary_name"]


def temporary_name(path: Path) -> Path:
    """Where :func:`replace_file` writes before the move: ``.NAME.tmp`` beside ``path``."""
    return path.with_name(f".{path.name}.tmp")


def replace_file(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write ``data`` to ``path`` through a temporary file moved over it in one step.

    Args:
        path: The file to replace (or create).
        data: Its new contents.
        durable: Flush the data to the disk before the move, so that a power cut too leaves
            the old file or the new one whole (a checkpoint's promise; the other records need
            only outlive the process).

    Raises:
        OSError: When the temporary file cannot be written (a full disk); it is removed, and
            ``path`` keeps its old contents.
    """
    tmp = temporary_name(path)
    try:
        with tmp.open("wb") as fh:
            fh.write(data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
    except OSError as err:
        # A full disk: the part written would only take space from the disk that lacks it
        # (a checkpoint's is hundreds of kilobytes), and the old file is whole.
        with contextlib.suppress(OSError):  # the first error says what went wrong
            tmp.unlink(missing_ok=True)
        if err.filename is not None and os.fspath(err.filename) == os.fspath(tmp):
            # Name the file the user knows, not its hidden draft.
            err.filename = str(path)
        raise
    os.replace(tmp, path)

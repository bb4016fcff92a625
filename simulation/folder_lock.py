"""Folders one floodsim process writes at a time: run directories and experiment folders.

A run directory's name comes from its config and seed, so the same command started twice (a
shell loop sent to the background, two terminals) writes the same folder: each process would
clear and rewrite the other's files, and one of them would fail halfway on a file the other
had just moved. The writer holds an exclusive ``flock`` on the folder itself while it works; a
second writer is refused at once, by name, before it changes anything.

The lock is the kernel's: it goes with the process, however that ends (a ``SIGKILL`` leaves no
stale lock file to delete by hand), and nothing is written into the folder for it. It guards
against a mistake and is not needed for a run to be right, so where it cannot be had the folder
goes unguarded: without ``fcntl`` (Windows), and on file systems that refuse ``flock`` (Lustre
mounted without ``flock``; NFS, where Linux makes it a byte-range lock that a folder, open for
reading only, cannot take).
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = ["FolderBusyError", "hold_folder"]


class FolderBusyError(RuntimeError):
    """Another process holds the folder (:func:`hold_folder`)."""


@contextlib.contextmanager
def hold_folder(folder: Path, busy: Exception | None = None) -> Iterator[None]:
    """Hold ``folder``, an existing directory, for this process until the block ends.

    Args:
        folder: The folder.
        busy: What to raise when another process holds it, worded for the caller's users
            (``None``: a :class:`FolderBusyError`).

    Raises:
        FolderBusyError: Or ``busy``, when another process (or another block of this one)
            holds it.
    """
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if busy is not None:
                raise busy from None
            msg = f"{folder}: another floodsim process is writing it"
            raise FolderBusyError(msg) from None
        except OSError:
            pass  # a file system without flock (see the module's docstring): unguarded
        yield
    finally:
        os.close(fd)  # releases the lock

"""Reading the files a user names: a device is refused at once, and text is read bounded.

A config, registry, curve file, targets file or prompt is read whole before it is parsed. Named
by mistake, ``/dev/zero`` (or a multi-gigabyte CSV given as a config) would be read until the
machine ran out of memory, long before any message could say what was wrong. The readers here
fail at once instead, with an :class:`OSError` whose ``strerror`` says why, so every loader's
existing "cannot read" path reports it on one line. Only devices are refused by kind: a named
pipe is read like a file.
"""

from __future__ import annotations

import errno
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import os
import re

__all__ = ["MAX_TEXT_BYTES", "check_not_a_device", "longer_row", "not_a_file", "read_text"]

#: Largest text file read whole (configs, registries, curve files, targets, prompts). The
#: largest shipped one is a few kilobytes; 64 MiB of YAML would take minutes to parse.
MAX_TEXT_BYTES = 64 * 2**20


def check_not_a_device(path: str | os.PathLike[str]) -> None:
    """Raise unless ``path`` is something other than a character or block device.

    Raises:
        OSError: ``path`` is a device (its ``strerror`` says so); a missing path raises
            nothing here, so the caller's own "not found" message stands.
    """
    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise OSError(errno.ENODEV, "a device, not a file", str(path))


def read_text(
    path: str | os.PathLike[str],
    *,
    encoding: str = "utf-8",
    errors: str = "strict",
    limit: int | None = MAX_TEXT_BYTES,
) -> str:
    """Read a user-named text file whole, as :meth:`pathlib.Path.read_text` would.

    Line endings are read as Python's text files read them (universal newlines): a prompt
    template saved with Windows line endings sends the model the text a Unix one does.

    Args:
        path: The file.
        encoding: Its text encoding.
        errors: How undecodable bytes are handled (``"strict"`` raises).
        limit: Most bytes read; ``None`` reads whatever a file (not a device) holds.

    Raises:
        OSError: As :func:`open` raises, or ``path`` is a device, or larger than ``limit``.
        UnicodeDecodeError: The bytes are not ``encoding`` (with ``errors="strict"``).
    """
    check_not_a_device(path)
    with open(path, "rb") as file:
        data = file.read() if limit is None else file.read(limit + 1)
    if limit is not None and len(data) > limit:
        reason = f"larger than {limit / 2**20:g} MiB, too large for a file floodsim reads whole"
        raise OSError(errno.EFBIG, reason, str(path))
    text = data.decode(encoding, errors)
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def not_a_file(path: str | os.PathLike[str], what: str) -> str:
    """Say why ``path``, which is not a regular file, cannot be read as the ``what`` it names.

    Args:
        path: The path given.
        what: What it was given as, such as ``"household table"``.

    Returns:
        ``"a folder, not a <what>"``, ``"a device, not a <what>"`` or ``"<what> not found"``.
    """
    target = Path(path)
    if target.is_dir():
        return f"a folder, not a {what}"
    if target.is_char_device() or target.is_block_device():
        return f"a device, not a {what}"
    return f"{what} not found"


_LONGER_ROW = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def longer_row(error: Exception) -> tuple[int, str] | None:
    """The line and the problem of a CSV row longer than its header, from pandas' error.

    Returns:
        ``(line, "4 fields, but the header has 3")``, or ``None`` for another parser error.
    """
    found = _LONGER_ROW.search(" ".join(str(error).split()))
    if found is None:
        return None
    expected, line, saw = found.groups()
    return int(line), f"{saw} fields, but the header has {expected}"

"""The error every "your input is wrong" error derives from.

A config key out of range, a broken household table or curve file, a run directory that cannot
be resumed or read, a bad targets or calibration file: each module raises its own subclass of
:class:`InputError` whose message names the file (or the ``--set`` flag) and the key. The
``floodsim`` command prints any of them as one line and exits with code 2, and a notebook can
catch them all with ``except InputError``.

Defined apart from the modules that raise them so that the command can tell bad input from a
bug without importing every part of floodsim first (Mesa alone takes about half a second).
"""

from __future__ import annotations

__all__ = ["InputError", "shown_value"]

#: The most characters of a bad value an error message repeats.
SHOWN_CHARS = 60


class InputError(ValueError):
    """Bad input; the message names the file (or flag) and the key, in one line."""


def shown_value(value: object) -> str:
    """``repr(value)`` for a one-line error, cut to :data:`SHOWN_CHARS` characters.

    A whole section written where a list goes, or a template of thousands of characters, would
    otherwise make the one line thousands of characters long.
    """
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."

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

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["RESULTS_NOTE", "InputError", "results_kept_in", "shown_value", "spoken_list"]

#: The note an error carries once a batch or calibration has written results into its folder:
#: the command then exits 1 (rerun with ``--resume`` once the cause is mended), not 2.
RESULTS_NOTE = "results so far in: "

#: The most characters of a bad value an error message repeats.
SHOWN_CHARS = 60


class InputError(ValueError):
    """Bad input; the message names the file (or flag) and the key, in one line."""


@contextlib.contextmanager
def results_kept_in(folder: object) -> Iterator[None]:
    """Note :data:`RESULTS_NOTE` on an :class:`OSError` raised inside the block.

    A folder made unwritable, or a disk that fills, while a batch or calibration writes its
    results is not bad input to mend in the command line: the same command with ``--resume``
    continues once the folder is writable again.
    """
    try:
        yield
    except OSError as err:
        err.add_note(f"{RESULTS_NOTE}{folder}")
        raise


def shown_value(value: object) -> str:
    """``repr(value)`` for a one-line error, cut to :data:`SHOWN_CHARS` characters.

    A whole section written where a list goes, or a template of thousands of characters, would
    otherwise make the one line thousands of characters long.
    """
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."


def spoken_list(names: Sequence[str], most: int | None = None) -> str:
    """``a``, ``a and b``, ``a, b and c``; past ``most`` names, the first ones and a count.

    Args:
        names: At least one name.
        most: How many names to show at most (``None``: all).
    """
    if most is not None and len(names) > most:
        return f"{', '.join(names[:most])} and {len(names) - most} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"

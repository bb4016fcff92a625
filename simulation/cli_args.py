"""The parser class and argument types the ``floodsim`` subcommands share."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["ExactParser", "folder", "integer", "positive_int", "positive_int_up_to"]

# Digits as typed on a command line: int() would also take "٣" (an Arabic-Indic 3) and "1_0".
_INTEGER = re.compile(r"[+-]?[0-9]+")


class ExactParser(argparse.ArgumentParser):
    """An argument parser that takes options only by their whole names.

    argparse's default reads any unambiguous prefix (``--worker 4`` as ``--workers 4``). A
    script written against one release would then change meaning, or stop working, once a
    later release adds an option sharing the prefix; whole names keep a command line's
    meaning fixed. Subparsers made by ``add_subparsers`` are of the same class.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Exit with code 2 and one line on stderr, as every other bad input does.

        argparse would print its usage block first: four lines or more, of which the error
        is the last. The line points to ``--help`` for the usage instead.
        """
        command = self.prog.split()[0]
        self.exit(2, f"{command}: error: {message} (see {self.prog} --help)\n")


def folder(text: str) -> str:
    """A folder to write into (``--out``), else argparse's usage error.

    Blank text is refused rather than read as the current folder: it is most often an unset
    shell variable (``--out "$OUT"``), and would scatter outputs where the command ran.

    Raises:
        argparse.ArgumentTypeError: For empty or blank text.
    """
    if not text.strip():
        msg = f"expected a folder, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return text


def integer(text: str) -> int:
    """An integer written in ASCII digits (``--seed``), else argparse's usage error.

    Raises:
        argparse.ArgumentTypeError: For anything else, "٣" and "1_0" included.
    """
    if not _INTEGER.fullmatch(text.strip()):
        msg = f"expected an integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def positive_int(text: str) -> int:
    """An integer of at least 1 (``--workers``, ``--repeats``), else argparse's usage error.

    Raises:
        argparse.ArgumentTypeError: For text that is not an integer, or one below 1.
    """
    if not _INTEGER.fullmatch(text.strip()):
        msg = f"expected a positive integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    value = int(text)
    if value < 1:
        msg = f"must be a positive integer, got {value}"
        raise argparse.ArgumentTypeError(msg)
    return value


def positive_int_up_to(maximum: int, why: str) -> Callable[[str], int]:
    """An argparse type: a :func:`positive_int` of at most ``maximum``.

    Args:
        maximum: The largest value taken.
        why: What ``maximum`` is, for the message (``"the most years a run can have"``).
    """

    def parse(text: str) -> int:
        value = positive_int(text)
        if value > maximum:
            msg = f"must be at most {maximum} ({why}), got {value}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse

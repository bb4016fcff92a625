"""Argument types the ``floodsim`` subcommands share (argparse ``type=`` callables)."""

from __future__ import annotations

import argparse

__all__ = ["positive_int"]


def positive_int(text: str) -> int:
    """An integer of at least 1 (``--workers``, ``--repeats``), else argparse's usage error.

    Raises:
        argparse.ArgumentTypeError: For text that is not an integer, or one below 1.
    """
    try:
        value = int(text)
    except ValueError:
        msg = f"expected a positive integer, got {text!r}"
        raise argparse.ArgumentTypeError(msg) from None
    if value < 1:
        msg = f"must be a positive integer, got {value}"
        raise argparse.ArgumentTypeError(msg)
    return value

"""How many cores this process may use, and the most workers a pool may ask for.

Kept apart from the runner, which decides by it whether audit lines are written on a second
thread, because ``floodsim audit summarize`` needs it too, and importing the runner would load
Mesa for a command that never builds a model.
"""

from __future__ import annotations

import os

__all__ = ["MAX_WORKERS", "usable_cores"]

#: The most workers an executor (or ``audit summarize``) may ask for: more than any one
#: machine's cores, and a pool forks all of its workers at its first task.
MAX_WORKERS = 1024


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1

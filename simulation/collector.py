"""Keeping Python's cyclic garbage collector out of the yearly hot path.

A simulation year allocates millions of short-lived containers (memory items, write results,
decisions, audit records) while the model holds millions of long-lived ones, which building
the model allocates in one go. With the interpreter's default thresholds the collector runs a
pass every 700 net allocations and keeps rescanning the model's objects in its older
generations: about a fifth of a run's time at 2,000 households, a growing share as the model
grows, and more than half of the time it takes to build 50,000 households. The stepping code
creates no reference cycles (``tests/test_collector.py`` checks a model run), so everything it
discards is freed by reference counting and the collector would find nothing.

:func:`tuned_collector` therefore freezes the built model and pauses automatic collection while
the model steps, or, for runs whose code may create cycles (LLM clients with their connection
pools and threads), only makes collections rarer. :func:`simulation.runner.build_model` pauses
it while the model is built; cyclic garbage the build leaves is collected afterwards.
"""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["RARE_THRESHOLDS", "tuned_collector"]

#: ``gc.set_threshold`` values when collection stays on: a young pass every 10,000 net
#: allocations instead of 700 (the older generations keep their default ratios).
RARE_THRESHOLDS = (10_000, 10, 10)


@contextlib.contextmanager
def tuned_collector(*, pause: bool = True, collect: bool = True) -> Iterator[None]:
    """Run the body with the current heap frozen and collection paused (or made rare).

    Entering collects the garbage that exists (once, a full collection, unless ``collect`` is
    off) and freezes the rest; frozen objects are not collected while frozen. Leaving unfreezes
    them and restores the collector, so a model dropped after its run is reclaimed at the latest
    when the next model is built (batch workers run many models in one process). What the body
    allocated and still holds then counts as old. A nested use leaves the outer one's settings.

    Args:
        pause: Pause automatic collection (for code that creates no reference cycles); when
            ``False``, collect with :data:`RARE_THRESHOLDS` instead.
        collect: Collect before freezing. A full collection traces every live object, half a
            second for a built 50,000-household model; turn it off when the heap is known to
            hold no cyclic garbage worth that (garbage left is frozen and reclaimed after).
    """
    thresholds = gc.get_threshold()
    was_enabled = gc.isenabled()
    was_frozen = gc.get_freeze_count() > 0
    if collect and not was_frozen:
        # Garbage that exists now (a previous run's model, which is full of cycles between the
        # model and its agents) would otherwise be frozen with the live heap and outlive the run.
        gc.collect()
    gc.freeze()
    if pause:
        gc.disable()
    else:
        gc.set_threshold(*RARE_THRESHOLDS)
    try:
        yield
    finally:
        if not was_frozen:
            # What the body allocated goes to the oldest generation, like what was frozen:
            # left young, it would all be traced by the young pass the next allocation
            # triggers (a whole built model, or all memories a run wrote: about a third of a
            # second at 50,000 households, after every build and every run).
            gc.freeze()
            gc.unfreeze()
        gc.set_threshold(*thresholds)
        if was_enabled:
            gc.enable()

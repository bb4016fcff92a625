"""Tests for simulation.collector: the garbage-collector tuning around stepping."""

from __future__ import annotations

import gc
import weakref

from simulation.collector import STEPPING_THRESHOLDS, tuned_collector


class _Node:
    """A container that can take part in a reference cycle."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settings_apply_inside_and_are_restored_after() -> None:
    before = gc.get_threshold()
    with tuned_collector():
        assert gc.get_threshold() == STEPPING_THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settings_are_restored_when_the_body_raises() -> None:
    before = gc.get_threshold()
    try:
        with tuned_collector():
            raise RuntimeError
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_built_before_are_reclaimed_once_the_context_ends() -> None:
    """A model built before stepping is frozen during the run, not leaked after it."""
    ref = _cycle()
    with tuned_collector():
        gc.collect()
        assert ref() is not None  # frozen: out of the collector's sight
    gc.collect()
    assert ref() is None


def test_cycles_made_while_stepping_are_still_collected() -> None:
    with tuned_collector():
        ref = _cycle()
        gc.collect()
        assert ref() is None

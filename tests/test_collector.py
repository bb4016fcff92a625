"""Tests for simulation.collector: the garbage-collector tuning around stepping."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from simulation.collector import RARE_THRESHOLDS, tuned_collector
from simulation.config import load_config
from simulation.runner import build_model

DEFAULT = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"


class _Node:
    """A container that can take part in a reference cycle."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.mark.parametrize("pause", [True, False])
def test_settings_apply_inside_and_are_restored_after(pause: bool) -> None:
    before = gc.get_threshold()
    with tuned_collector(pause=pause):
        assert gc.isenabled() is not pause
        if not pause:
            assert gc.get_threshold() == RARE_THRESHOLDS
        assert gc.get_freeze_count() > 0
    assert gc.isenabled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_settings_are_restored_when_the_body_raises() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), tuned_collector():
        raise RuntimeError
    assert gc.isenabled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_live_cycles_are_frozen_while_stepping_and_reclaimed_after() -> None:
    """A model built before stepping is frozen during the run, not leaked after it."""
    node = _Node()
    node.other = node
    ref = weakref.ref(node)
    with tuned_collector():
        del node
        gc.collect()
        assert ref() is not None  # frozen: out of the collector's sight
    gc.collect()
    assert ref() is None


def test_garbage_from_before_is_collected_not_frozen() -> None:
    """A batch worker's previous model must not be frozen with the next one (it would leak)."""
    ref = _cycle()  # already unreachable
    with tuned_collector():
        assert ref() is None


def test_a_previous_run_is_reclaimed_when_the_next_run_starts() -> None:
    config, base = load_config(DEFAULT, ["households.count=50", "years=2", "audit.level=off"])
    first = build_model(config, base)
    ref = weakref.ref(first)
    with tuned_collector():
        first.step()
    first.release()
    del first
    second = build_model(config, base)
    with tuned_collector():
        assert ref() is None
        second.step()


def test_without_collect_existing_garbage_is_frozen_and_reclaimed_after() -> None:
    ref = _cycle()  # already unreachable
    with tuned_collector(collect=False):
        gc.collect()
        assert ref() is not None
    gc.collect()
    assert ref() is None


def test_building_a_model_leaves_no_cyclic_garbage() -> None:
    """What lets a run freeze a just-built model without collecting first."""
    config, base = load_config(DEFAULT, ["households.count=80", "years=2", "audit.level=off"])
    gc.collect()
    model = build_model(config, base)
    assert gc.collect() == 0
    model.release()


@pytest.mark.parametrize("engine", ["objects", "arrays"])
def test_a_model_dropped_without_release_is_freed(engine: str) -> None:
    """Mesa 3.3's table of agent-id counters kept every model built in a process (#3179)."""
    overrides = ["households.count=30", "years=2", "audit.level=off", f"engine={engine}"]
    config, base = load_config(DEFAULT, overrides)
    model = build_model(config, base)
    model.step()
    dropped = weakref.ref(model)
    del model
    gc.collect()
    assert dropped() is None
    again = build_model(config, base)  # ids still count from 1 for each model
    assert sorted(a.unique_id for a in again.agents)[:2] == [1, 2]
    again.release()


@pytest.mark.parametrize("neighborhood", ["moore", "small_world"])
def test_a_released_model_leaves_garbage_that_does_not_grow_with_it(neighborhood: str) -> None:
    """Households, memories and cells go by reference counting; only the model core needs GC.

    A 52,141-household grid left as cyclic garbage took 0.45 s to collect in each batch run.
    """
    garbage = []
    # The first build also leaves what libraries set up on first use (networkx, for one,
    # compiles its decorators then), so it only warms up.
    for count in (40, 40, 400):
        overrides = [
            f"households.count={count}",
            "years=2",
            "audit.level=off",
            f"social.neighborhood={neighborhood}",
        ]
        config, base = load_config(DEFAULT, overrides)
        gc.collect()  # other tests' garbage
        model = build_model(config, base)
        model.step()
        model.release()
        model.release()  # a second release is harmless
        del model
        garbage.append(gc.collect())
    # Cells left as garbage would add about four objects per household; the core varies by
    # an object or two with the grid's shape.
    assert abs(garbage[2] - garbage[1]) < 36


def test_what_the_body_allocated_leaves_as_old_not_young() -> None:
    """The young pass after leaving must not trace everything the body built."""
    with tuned_collector():
        built = [[] for _ in range(100)]
    assert not any(o is built for o in gc.get_objects(generation=0))
    assert any(o is built for o in gc.get_objects(generation=2))
    assert gc.get_count()[0] < 100


def test_cycles_made_while_collection_is_rare_are_collected() -> None:
    with tuned_collector(pause=False):
        ref = _cycle()
        # No explicit collection: twice the young threshold of new containers triggers one.
        held = [[] for _ in range(2 * RARE_THRESHOLDS[0])]
        assert ref() is None
    del held


@pytest.mark.parametrize(
    ("level", "engine"), [("off", "arrays"), ("full", "arrays"), ("full", "objects")]
)
def test_stepping_the_model_creates_no_reference_cycles(
    tmp_path: Path, level: str, engine: str
) -> None:
    """What makes pausing the collector safe: a year leaves no cyclic garbage behind.

    A change that makes stepping create cycles (a closure capturing its owner, an exception
    kept with its traceback) fails here; such garbage would pile up until the run ends.
    """
    from simulation.audit.writer import AuditWriter

    overrides = ["households.count=150", "years=6", f"audit.level={level}", f"engine={engine}"]
    config, base = load_config(DEFAULT, overrides)
    model = build_model(config, base)
    audit = None
    if level != "off":
        audit = AuditWriter(tmp_path, "cycles", config.audit, config.seed)
        model.attach_audit(audit)
    try:
        model.step()  # first-year set-up (caches, lazily built tables) is not garbage
        gc.collect()
        with tuned_collector():
            for _ in range(5):
                model.step()
            assert gc.collect() == 0
    finally:
        if audit is not None:
            audit.close()  # its files, which garbage collection would otherwise close later


def test_building_a_model_leaves_the_collector_as_it_was() -> None:
    config, base = load_config(DEFAULT, ["households.count=50", "years=2", "audit.level=off"])
    before = gc.get_threshold()
    model = build_model(config, base)
    assert gc.isenabled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    model.release()

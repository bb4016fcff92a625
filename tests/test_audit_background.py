"""Tests for simulation/audit/background.py: calls in order on one thread, failures raised here."""

from __future__ import annotations

import threading
import time

import pytest

from simulation.audit.background import Background


@pytest.fixture
def background():
    worker = Background("test-audit")
    yield worker
    worker.close(quiet=True)


def test_calls_run_in_the_order_submitted_on_one_other_thread(background):
    ran: list[tuple[int, str]] = []

    def record(i: int, pause: float) -> None:
        time.sleep(pause)  # earlier calls take longer: only the queue keeps the order
        ran.append((i, threading.current_thread().name))

    for i in range(20):
        background.submit(record, i, 0.002 * (20 - i))
    background.wait()
    assert [i for i, _ in ran] == list(range(20))
    (name,) = {thread for _, thread in ran}
    assert name.startswith("test-audit")
    assert name != threading.current_thread().name


def test_a_failure_is_raised_by_the_next_call_and_the_later_calls_still_run(background):
    release = threading.Event()
    ran: list[int] = []

    def fail() -> None:
        raise OSError("No space left on device")

    background.submit(release.wait)  # nothing has run when the calls below are submitted
    background.submit(fail)
    later = background.submit(ran.append, 1)
    release.set()
    later.result()
    with pytest.raises(OSError, match="No space left"):
        background.submit(ran.append, 2)
    background.wait()  # the failure is raised once
    assert ran == [1]


def test_wait_raises_a_failure_of_any_call_before_it_returns(background):
    def fail() -> None:
        raise ValueError("bad column")

    background.submit(fail)
    with pytest.raises(ValueError, match="bad column"):
        background.wait()


def test_waiting_until_a_call_leaves_the_later_ones_running(background):
    release = threading.Event()
    ran: list[str] = []
    first = background.submit(ran.append, "first")
    background.submit(release.wait)
    last = background.submit(ran.append, "last")
    background.wait(until=first)
    assert ran == ["first"]
    assert not last.done()
    release.set()
    background.wait()
    assert ran == ["first", "last"]


def test_closing_waits_for_every_call_and_raises_a_failure():
    background = Background("test-audit")
    ran: list[int] = []
    background.submit(time.sleep, 0.05)
    background.submit(ran.append, 1)
    background.close()
    assert ran == [1]

    background = Background("test-audit")
    background.submit(int, "not a number")
    with pytest.raises(ValueError, match="invalid literal"):
        background.close()


def test_closing_quietly_runs_every_call_and_raises_no_failure():
    background = Background("test-audit")
    release = threading.Event()
    ran: list[int] = []
    background.submit(release.wait)  # nothing has run when the calls below are submitted
    background.submit(int, "not a number")
    background.submit(ran.append, 1)
    release.set()
    assert background.close(quiet=True) is False  # a call failed: its work is missing
    assert ran == [1]
    assert not [t for t in threading.enumerate() if t.name.startswith("test-audit")]


def test_closing_tells_whether_every_call_ran_without_failing():
    background = Background("test-audit")
    background.submit(time.sleep, 0.01)
    assert background.close(quiet=True) is True

    # A failure raised earlier counts too: the caller's handling of it may close quietly.
    background = Background("test-audit")
    background.submit(int, "not a number")
    with pytest.raises(ValueError, match="invalid literal"):
        background.wait()
    background.submit(time.sleep, 0.01)
    assert background.close(quiet=True) is False


def test_only_the_worker_is_on_the_worker(background):
    assert not background.on_worker
    assert background.submit(lambda: background.on_worker).result()

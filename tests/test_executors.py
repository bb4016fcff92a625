"""Tests for the process executor and Ctrl-C: its workers ignore it, and it stops them at once.

The functions a worker runs are defined here, at module level: a spawned worker imports this
module to unpickle them.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing import connection
from pathlib import Path

import pytest

from simulation.experiments.executors import ProcessExecutor


def _interrupt_self() -> str:
    """Send this process SIGINT, as Ctrl-C sends it to every process of the terminal's group."""
    # Ignored, not merely blocked (as while a worker starts): unblocked, it would arrive now.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # a handler runs between bytecodes: time to raise, if it would
    except KeyboardInterrupt:
        return "interrupted"
    return "ignored"


def _sleep_in_worker(folder: str) -> None:
    """A long run: say it started, sleep, say it finished."""
    Path(folder, "started").touch()
    time.sleep(60)
    Path(folder, "finished").touch()


def _wait_for(path: Path, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} not written within {timeout_s} s"
        time.sleep(0.05)


def _new_children(before: set[multiprocessing.Process]) -> set[multiprocessing.Process]:
    return set(multiprocessing.active_children()) - before


def _exited(process: multiprocessing.Process) -> bool:
    """Whether ``process`` has ended (its sentinel: the pool's own thread may be reaping it)."""
    return bool(connection.wait([process.sentinel], timeout=0))


def test_a_worker_ignores_ctrl_c(capfd):
    with ProcessExecutor(1) as executor:
        assert executor._submit(_interrupt_self).result(timeout=120) == "ignored"
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_a_worker_interrupted_while_it_starts_runs_its_task(capfd):
    """Ctrl-C right after a batch starts reaches workers still importing floodsim."""
    before = set(multiprocessing.active_children())
    with ProcessExecutor(1) as executor:
        future = executor._submit(os.getpid)
        (worker,) = _new_children(before)
        # Spawned a moment ago: it has seconds of imports to go before its pool initializer.
        os.kill(worker.pid, signal.SIGINT)
        assert future.result(timeout=120) == worker.pid
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_ctrl_c_terminates_the_workers_without_waiting_for_their_runs(tmp_path):
    before = set(multiprocessing.active_children())
    workers = set()

    def ctrl_c_during_a_run() -> None:
        with ProcessExecutor(1) as executor:
            executor._submit(_sleep_in_worker, str(tmp_path))
            _wait_for(tmp_path / "started")
            workers.update(_new_children(before))
            raise KeyboardInterrupt  # as Ctrl-C raises it in the batch's own process

    with pytest.raises(KeyboardInterrupt):
        ctrl_c_during_a_run()
    assert len(workers) == 1
    assert all(_exited(worker) for worker in workers)
    assert not (tmp_path / "finished").exists()

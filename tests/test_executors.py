"""Tests for the process executor and Ctrl-C: it stops its workers at once.

The functions a worker runs are defined here, at module level: a spawned worker imports this
module to unpickle them.
"""

from __future__ import annotations

import multiprocessing
import time
from multiprocessing import connection
from pathlib import Path

import pytest

from simulation.experiments.executors import ProcessExecutor


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

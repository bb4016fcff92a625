"""Tests for the process and Dask executors and Ctrl-C: their workers ignore it, and the batch
stops them at once (but never the workers of a Dask cluster it did not start).

The functions a worker runs are defined here, at module level: a spawned worker imports this
module to unpickle them. The process pool's tests run with workers forked and spawned.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from multiprocessing import connection
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

from simulation.experiments.executors import (
    DaskExecutor,
    ProcessExecutor,
    _sigint_blocked,
    pool_start_method,
)

if TYPE_CHECKING:
    from collections.abc import Iterator


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


def _work_until_told(folder: str) -> None:
    """A run that goes on until a file named ``stop`` appears (or a minute passes)."""
    Path(folder, "started").touch()
    deadline = time.monotonic() + 60
    while not Path(folder, "stop").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
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


# How the process pool's workers start: forked from the batch (auto, on Linux) or spawned.
start_methods = pytest.mark.parametrize("start_method", ["fork", "spawn"])


def test_auto_forks_the_workers_on_linux_only_while_no_other_thread_runs():
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert pool_start_method() == "spawn"
    finally:
        stop.set()
        other.join()
    alone = threading.active_count() == 1
    assert pool_start_method() == ("fork" if sys.platform == "linux" and alone else "spawn")
    assert pool_start_method("spawn") == "spawn"
    with pytest.raises(ValueError, match=r"start method must be auto or one of .*spawn"):
        pool_start_method("thread")


@start_methods
def test_a_worker_ignores_ctrl_c(capfd, start_method):
    with ProcessExecutor(1, start_method) as executor:
        assert executor.submit(_interrupt_self).result(timeout=120) == "ignored"
    assert "KeyboardInterrupt" not in capfd.readouterr().err


@start_methods
def test_a_pool_made_in_a_thread_that_ended_keeps_its_workers(start_method):
    """The kernel kills a worker with the thread that started it, if asked: not here."""
    made: dict[str, ProcessExecutor] = {}
    maker = threading.Thread(target=lambda: made.update(pool=ProcessExecutor(2, start_method)))
    maker.start()
    maker.join()
    time.sleep(0.5)  # a kill the thread's end brought would have landed
    with made["pool"] as executor:
        futures = [executor.submit(pow, 2, 5) for _ in range(4)]
        assert [future.result(timeout=120) for future in futures] == [32] * 4


@start_methods
def test_a_worker_interrupted_while_it_starts_runs_its_task(capfd, start_method):
    """Ctrl-C right after a batch starts reaches workers still importing floodsim."""
    before = set(multiprocessing.active_children())
    with ProcessExecutor(1, start_method) as executor:
        future = executor.submit(os.getpid)
        (worker,) = _new_children(before)
        # Spawned a moment ago: it has seconds of imports to go before its pool initializer.
        os.kill(worker.pid, signal.SIGINT)
        assert future.result(timeout=120) == worker.pid
    assert "KeyboardInterrupt" not in capfd.readouterr().err


@start_methods
def test_ctrl_c_terminates_the_workers_without_waiting_for_their_runs(tmp_path, start_method):
    before = set(multiprocessing.active_children())
    workers = set()

    def ctrl_c_during_a_run() -> None:
        with ProcessExecutor(1, start_method) as executor:
            executor.submit(_sleep_in_worker, str(tmp_path))
            _wait_for(tmp_path / "started")
            workers.update(_new_children(before))
            raise KeyboardInterrupt  # as Ctrl-C raises it in the batch's own process

    with pytest.raises(KeyboardInterrupt):
        ctrl_c_during_a_run()
    assert len(workers) == 1
    assert all(_exited(worker) for worker in workers)
    assert not (tmp_path / "finished").exists()


def test_a_ctrl_c_while_sigint_is_blocked_is_raised_when_the_block_ends():
    """The kernel may hand Ctrl-C to a thread with SIGINT unblocked (numpy's, tqdm's)."""
    idle = threading.Event()
    other = threading.Thread(target=idle.wait)  # started before the block: SIGINT unblocked
    other.start()
    reached = []

    def interrupted_while_blocked() -> None:
        with _sigint_blocked():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)  # a handler runs between bytecodes: time to raise, if it would
            reached.append(True)

    try:
        with pytest.raises(KeyboardInterrupt):
            interrupted_while_blocked()
    finally:
        idle.set()
        other.join()
    assert reached == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@start_methods
def test_ctrl_c_while_closing_after_an_error_terminates_the_workers(tmp_path, start_method):
    """Another error ends the block and close() waits for the run: Ctrl-C then kills it."""
    before = set(multiprocessing.active_children())
    workers = set()
    executor = ProcessExecutor(1, start_method)
    executor.submit(_sleep_in_worker, str(tmp_path))
    _wait_for(tmp_path / "started")
    workers.update(_new_children(before))
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt), executor:
        raise OSError("disk full")
    timer.join()
    assert len(workers) == 1
    assert all(_exited(worker) for worker in workers)
    assert not (tmp_path / "finished").exists()


# ----------------------------------------------------------------------------------------- dask
def _dask_worker_pids(executor: DaskExecutor) -> set[int]:
    """The worker processes of the LocalCluster ``executor`` started (through its nannies)."""
    return {nanny.pid for nanny in executor._cluster.workers.values()}


@contextmanager
def _distributed_warnings() -> Iterator[list[logging.LogRecord]]:
    """The warnings and errors ``distributed`` logs in this process meanwhile."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("distributed")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


def test_two_dask_batches_at_once_start_without_a_port_warning(capfd):
    """Each LocalCluster serves HTTP on a free local port, not both on 8787."""
    pytest.importorskip("distributed")
    with warnings.catch_warnings(record=True) as warned, _distributed_warnings() as said:
        warnings.simplefilter("always")
        with DaskExecutor(1) as first, DaskExecutor(1) as second:
            ports = [
                {s.getsockname() for s in ex._cluster.scheduler.http_server._sockets.values()}
                for ex in (first, second)
            ]
    assert all(host == "127.0.0.1" for pair in ports for host, _ in pair)
    assert ports[0].isdisjoint(ports[1])
    assert not [str(w.message) for w in warned if "in use" in str(w.message)]
    assert not said
    assert "already in use" not in capfd.readouterr().err


def test_a_dask_worker_ignores_ctrl_c(capfd):
    pytest.importorskip("distributed")
    with DaskExecutor(1) as executor:
        (pid,) = _dask_worker_pids(executor)
        os.kill(pid, signal.SIGINT)
        time.sleep(0.5)  # time to raise in its event loop, if it would
        assert executor._client.submit(os.getpid, pure=False).result(timeout=60) == pid
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_ctrl_c_kills_the_dask_workers_without_waiting_for_their_runs(tmp_path, capfd):
    pytest.importorskip("distributed")
    workers = set()
    interrupted_at = 0.0

    def ctrl_c_during_a_run() -> None:
        nonlocal interrupted_at
        with DaskExecutor(1) as executor:
            executor._client.submit(_work_until_told, str(tmp_path))
            _wait_for(tmp_path / "started")
            workers.update(_dask_worker_pids(executor))
            capfd.readouterr()  # whatever the cluster said as it started
            interrupted_at = time.monotonic()
            raise KeyboardInterrupt  # as Ctrl-C raises it in the batch's own process

    with _distributed_warnings() as said, pytest.raises(KeyboardInterrupt):
        ctrl_c_during_a_run()
    took = time.monotonic() - interrupted_at
    assert len(workers) == 1
    assert not any(psutil.pid_exists(pid) for pid in workers)
    assert took < 3, f"{took:.1f} s to stop"
    assert not (tmp_path / "finished").exists()
    assert said == []  # in this process (the nannies and the scheduler)
    assert capfd.readouterr().err == ""  # in the workers' processes


def test_ctrl_c_leaves_the_workers_of_a_cluster_at_an_address_running(tmp_path):
    """Not ours to kill: the batch cancels its tasks, and a worker's run in progress goes on."""
    distributed = pytest.importorskip("distributed")
    ours = {}

    def ctrl_c_during_a_run(address: str) -> None:
        with DaskExecutor(1, address) as executor:
            ours["client"] = executor._client
            ours["future"] = executor._client.submit(_work_until_told, str(tmp_path))
            _wait_for(tmp_path / "started")
            raise KeyboardInterrupt

    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        (nanny,) = cluster.workers.values()
        pid = nanny.pid
        with pytest.raises(KeyboardInterrupt):
            ctrl_c_during_a_run(cluster.scheduler_address)
        assert ours["future"].cancelled()
        assert ours["client"].status == "closed"
        assert nanny.pid == pid  # neither killed nor restarted
        assert psutil.Process(pid).is_running()
        (tmp_path / "stop").touch()
        _wait_for(tmp_path / "finished")

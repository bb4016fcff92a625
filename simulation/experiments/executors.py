"""Where experiment runs execute: here, in a process pool, or on a Dask cluster.

Every executor takes independent :class:`RunTask` objects and yields :class:`RunOutcome` objects
as runs finish (in any order). A run that raises is reported as failed; it never stops the
others. Tasks are plain picklable data. The process pool names its start method rather than
take the default (importing Mesa sets "spawn"): it forks its workers from the batch's process on
Linux while that process runs no other thread, so that they start at once with floodsim
imported (a spawned worker imports it again, about 1.2 s, which took a third of a batch of 8
default runs), and spawns them otherwise (see :func:`pool_start_method`).

An executor is a context manager: the end of its ``with`` block closes it, letting runs in
progress finish, and Ctrl-C ending the block terminates it instead. The workers of the process
pool and of a Dask LocalCluster started here ignore Ctrl-C (it reaches every process of the
terminal's foreground group, and each would print its own traceback); the batch's process alone
handles it, by killing them. A killed run is never recorded complete: its directory, if it has
one yet, says ``running`` (see :mod:`simulation.runner`), so ``--resume`` runs it again. On a
Dask cluster at an address, Ctrl-C cancels the batch's tasks and leaves the workers alone: a run
one of them is in goes on to its end, but the batch does not record it, and ``--resume`` runs
it again too.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import traceback
import uuid
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from multiprocessing import connection, resource_tracker
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from tqdm import tqdm

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from concurrent.futures import Future
    from multiprocessing.process import BaseProcess
    from types import TracebackType

__all__ = [
    "DaskExecutor",
    "Executor",
    "ProcessExecutor",
    "RunOutcome",
    "RunTask",
    "SerialExecutor",
    "execute_run",
    "make_executor",
    "pool_start_method",
]


@dataclass(frozen=True, slots=True)
class RunTask:
    """One run to execute: its id, full config (plain data) and where to write it.

    ``spare_core`` tells the run whether a core is free for its audit's background thread
    (``audit.background: auto``): not where the batch runs several at once.
    """

    run_id: str
    config: dict[str, Any]
    base_dir: str
    out_root: str
    spare_core: bool = True


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended.

    ``run_warnings`` are the warnings floodsim raised while the run went on (such as
    :class:`~simulation.decisions.scripted.IgnoredScriptRowsWarning`), for the batch's own
    process to show: a worker's stderr would show them in Python's format, not floodsim's.
    A complete run whose decisions fell back to the default skill adds a
    :class:`~simulation.runner.FallbackWarning` saying how many, as ``floodsim run`` does.
    """

    run_id: str
    status: str  # complete | failed
    error: str | None
    run_dir: str | None
    duration_s: float
    run_warnings: tuple[Warning, ...] = ()


def execute_run(task: RunTask) -> RunOutcome:
    """Run one task in this process; any exception becomes a failed outcome."""
    # Imported here so that a worker process pays for Mesa only when it runs something.
    from simulation.config import ConfigWarning, RunConfig  # noqa: PLC0415
    from simulation.runner import build_model, run_simulation  # noqa: PLC0415

    start = time.perf_counter()
    model = None
    with warnings.catch_warnings(record=True) as caught:
        try:
            config = RunConfig.model_validate(task.config)
            base_dir = Path(task.base_dir)
            with warnings.catch_warnings():
                # Planning the experiment checked every design point and warned once; every
                # replicate would say it again, from each worker.
                warnings.simplefilter("ignore", ConfigWarning)
                model = build_model(config, base_dir, task.run_id)
            result = run_simulation(
                config,
                base_dir,
                Path(task.out_root),
                progress=False,
                model=model,
                run_id=task.run_id,
                spare_core=task.spare_core,
            )
        except Exception as err:
            detail = "".join(traceback.format_exception_only(type(err), err)).strip()
            outcome = RunOutcome(task.run_id, "failed", detail, None, time.perf_counter() - start)
        else:
            outcome = RunOutcome(
                task.run_id, "complete", None, str(result.run_dir), time.perf_counter() - start
            )
        finally:
            if model is not None:
                model.release()  # a worker runs many models; each must go when its run is done
    ours = []
    for caught_warning in caught:
        if caught_warning.category.__module__.startswith("simulation."):
            ours.append(caught_warning.message)
        else:  # not floodsim's: shown here, as it would have been
            warnings.warn_explicit(
                caught_warning.message,
                caught_warning.category,
                caught_warning.filename,
                caught_warning.lineno,
            )
    return replace(outcome, run_warnings=tuple(ours)) if ours else outcome


class Executor(Protocol):
    """Runs tasks and yields their outcomes as they finish.

    As a context manager, it is closed when the block ends, or terminated when Ctrl-C
    (``KeyboardInterrupt``) ends it.
    """

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Execute ``tasks``; yield each outcome when it is known."""
        ...

    def close(self) -> None:
        """Release workers and connections."""
        ...

    def terminate(self) -> None:
        """Release workers and connections at once, stopping the runs in progress."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class _ExecutorBase:
    """The ``with`` behaviour the executors share."""

    def close(self) -> None:
        """Release workers and connections."""
        raise NotImplementedError

    def terminate(self) -> None:
        """Release workers and connections at once; by default the same as :meth:`close`."""
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # After Ctrl-C the user wants the command back now, not once the runs in progress end.
        if exc_type is not None and issubclass(exc_type, KeyboardInterrupt):
            # Not to be cut short: a second Ctrl-C waits, pending, until the workers are gone
            # (then ends the command as the first would have).
            with _sigint_blocked():
                self.terminate()
        else:
            try:
                self.close()  # waits for the runs in progress (another error ended the block)
            except KeyboardInterrupt:
                with _sigint_blocked():
                    self.terminate()
                raise


class SerialExecutor(_ExecutorBase):
    """Runs tasks one after another in this process."""

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Execute ``tasks`` in order."""
        for task in tasks:
            yield execute_run(task)

    def close(self) -> None:
        """Nothing to release."""


#: Seconds a terminated worker gets to go before it is killed.
_TERMINATE_GRACE_S = 5.0
#: Signal masks are POSIX only (not on Windows).
_CAN_MASK = hasattr(signal, "pthread_sigmask")


def _running_after(processes: list[BaseProcess], timeout_s: float) -> list[BaseProcess]:
    """The ``processes`` still running once they all ended or ``timeout_s`` seconds passed."""
    # Their sentinels, not join(): the pool's own thread reaps its workers too, and of two
    # threads reaping one process, one can find it running still.
    pending = {process.sentinel: process for process in processes}
    deadline = time.monotonic() + timeout_s
    while pending and (left := deadline - time.monotonic()) > 0:
        for sentinel in connection.wait(list(pending), left):
            del pending[sentinel]
    return list(pending.values())


@contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Block SIGINT in this thread for the block; a Ctrl-C meanwhile is raised when it ends.

    Threads started meanwhile inherit the mask, and so do processes (through fork and exec):
    a process started here ignores Ctrl-C until it unblocks SIGINT itself, if ever.
    """
    if not _CAN_MASK:
        yield
        return
    # The mask holds only for this thread: the kernel may hand a Ctrl-C to another one
    # (numpy's BLAS threads, tqdm's monitor), and Python would then raise KeyboardInterrupt
    # here all the same, say between starting a worker and recording it. In the main thread
    # (the only one Python runs signal handlers in) the handler only notes it meanwhile.
    caught: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    if main:
        handler = signal.signal(signal.SIGINT, lambda signum, _: caught.append(signum))
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if main:
            signal.signal(signal.SIGINT, signal.default_int_handler if handler is None else handler)
        if caught:  # even if the block failed: a Ctrl-C is never lost
            raise KeyboardInterrupt


def _init_worker(batch: int | None) -> None:
    """Pool initializer: leave Ctrl-C to the batch's own process, and end with that process.

    Args:
        batch: The process id of the batch's process, the worker's parent; ``None`` for a
            worker a fork server started (its parent is that server).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the launcher's SIGTERM handler; the pool's terminate() sends
    # SIGTERM, which must end the worker, not raise in the run it is in.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if batch is not None:
        _die_with(batch)
    if _CAN_MASK:
        # The worker was spawned with SIGINT blocked (ProcessExecutor.submit); ignoring it
        # discarded any Ctrl-C pending since, so the worker need not keep it blocked.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    # A run's (disabled) progress bar would create tqdm's lock shared between processes, a
    # named semaphore: a terminated worker leaves it registered, and the resource tracker
    # warns of it after the batch's own message. Bars in one worker need a thread lock only.
    tqdm.set_lock(threading.RLock())


def _die_with(parent: int) -> None:
    """Have the kernel kill this worker when its ``parent`` process dies (Linux only).

    A batch killed outright (SIGKILL, an out-of-memory kill) runs no cleanup: its workers, which
    hold both ends of the pipe their tasks come through, would never see it go, and would go on
    to the tasks already queued, writing runs no record lists and holding run directories that
    a ``--resume`` then finds busy. Elsewhere the workers outlive such a kill.
    """
    if not sys.platform.startswith("linux"):
        return
    pr_set_pdeathsig = 1  # <linux/prctl.h>
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
        return  # refused (a sandbox): the worker lives on, as elsewhere
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)


def pool_start_method(choice: str = "auto") -> str:
    """How a process pool started now should start its workers.

    Args:
        choice: ``spawn``, ``fork`` or ``forkserver``, or ``auto``: ``fork`` on Linux while
            this process runs no other thread (a fork copies only the forking thread, and a lock
            another thread held would stay locked in the worker), else ``spawn``.

    Raises:
        ValueError: For a method this platform does not have.
    """
    if choice == "auto":
        alone = threading.active_count() == 1
        return "fork" if sys.platform == "linux" and alone else "spawn"
    if choice not in multiprocessing.get_all_start_methods():
        methods = ", ".join(multiprocessing.get_all_start_methods())
        msg = f"start method must be auto or one of {methods} here, got {choice!r}"
        raise ValueError(msg)
    return choice


class ProcessExecutor(_ExecutorBase):
    """Runs tasks in a pool of ``workers`` processes on this machine.

    The workers ignore Ctrl-C; :meth:`terminate` stops them.

    Args:
        workers: Processes in the pool.
        start_method: How they start (:func:`pool_start_method`). Forked workers start here,
            at once: later this process may run other threads (a progress bar's).
    """

    def __init__(self, workers: int, start_method: str = "auto"):
        self.start_method = pool_start_method(start_method)
        self._pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=multiprocessing.get_context(self.start_method),
            initializer=_init_worker,
            initargs=(self._parent_to_die_with(),),
        )
        if self.start_method == "fork":
            # A pool of forked workers starts all of them at its first task.
            self.submit(int)

    def _parent_to_die_with(self) -> int | None:
        """This process's id, for workers to end with it; ``None`` where they cannot.

        The kernel ties a worker's death to the *thread* that started it: a pool made in a
        thread that then ends would lose its workers. Only a pool made in the main thread, which
        lives as long as the process, asks for it (its workers start there too, as floodsim
        submits from the thread that made the pool); a fork server's workers are its children,
        not this process's.
        """
        if self.start_method == "forkserver":
            return None
        if threading.current_thread() is not threading.main_thread():
            return None
        return os.getpid()

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` in a worker, starting one if none is idle and the pool is not full.

        ``fn`` and its arguments are pickled: ``fn`` must be a module-level function.
        """
        # A spawned worker imports floodsim and its dependencies (seconds) before its
        # initializer runs, and a Ctrl-C meanwhile would end it with a traceback. It inherits
        # this thread's signal mask, so it starts with SIGINT blocked until the initializer
        # ignores it. Here a Ctrl-C waits, pending, only until the mask is restored.
        with _sigint_blocked():
            return self._pool.submit(fn, *args)

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Submit every task; yield outcomes in completion order."""
        futures = {self.submit(execute_run, task): task for task in tasks}
        for future in as_completed(futures):
            task = futures[future]
            try:
                yield future.result()
            except Exception as err:
                yield RunOutcome(task.run_id, "failed", f"worker failed: {err!r}", None, 0.0)

    def close(self) -> None:
        """Shut the pool down: drop the runs not started, wait for those in progress."""
        self._pool.shutdown(cancel_futures=True)

    def terminate(self) -> None:
        """Shut the pool down at once: drop the runs not started, kill those in progress.

        A killed run yields no outcome, and its directory, if it has one yet, says ``running``:
        nothing records it as complete.
        """
        # The pool has no public handle on its workers before Python 3.14
        # (ProcessPoolExecutor.terminate_workers); its own table of them is private. Copied
        # first: shutdown() drops it.
        processes = list((self._pool._processes or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        stuck = _running_after(processes, _TERMINATE_GRACE_S)
        for process in stuck:  # SIGTERM handled, or stuck: no run may outlive the command
            process.kill()
        _running_after(stuck, _TERMINATE_GRACE_S)


@contextmanager
def _distributed_quiet() -> Iterator[None]:
    """Silence ``distributed``'s logging below CRITICAL for the block.

    Stopping a cluster at once is what the user asked for, yet distributed reports it as it
    goes (workers killed, tasks lost, connections cut, pending callbacks cancelled) with
    warnings and tracebacks. Loggers below ``distributed`` with no level of their own follow it.
    """
    loggers = [logging.getLogger("distributed")] + [
        logger
        for name, logger in logging.root.manager.loggerDict.items()
        if name.startswith("distributed.") and isinstance(logger, logging.Logger)
    ]
    levels = {logger: logger.level for logger in loggers if logger.level != logging.NOTSET}
    for logger in levels:
        logger.setLevel(max(logger.level, logging.CRITICAL))
    try:
        yield
    finally:
        for logger, level in levels.items():
            logger.setLevel(level)


def _run_on_dask_worker(task: RunTask) -> RunOutcome:
    """:func:`execute_run` as a Dask task."""
    # As in a process-pool worker (_init_worker): tqdm's lock shared between processes is a
    # named semaphore, which a killed worker would leave for the resource tracker to report.
    tqdm.set_lock(threading.RLock())
    return execute_run(task)


class DaskExecutor(_ExecutorBase):
    """Runs tasks on a dask.distributed cluster.

    The processes of a LocalCluster started here ignore Ctrl-C, like those of a process pool:
    the batch's process alone handles it, and :meth:`terminate` kills the workers. On a cluster
    at ``address``, :meth:`terminate` cancels this batch's tasks and leaves the workers be.

    Args:
        workers: Workers of the LocalCluster started when no ``address`` is given.
        address: Scheduler address of an existing cluster (its workers need floodsim installed).
        processes: LocalCluster workers as processes (``True``) or threads.
    """

    def __init__(self, workers: int, address: str | None = None, *, processes: bool = True):
        from dask.distributed import Client, LocalCluster  # noqa: PLC0415 - optional extra

        self._cluster: LocalCluster | None = None
        self._client: Client | None = None
        self._futures: list[Any] = []
        if address is not None:
            try:
                self._client = Client(address)
            except OSError as err:  # distributed raises OSError when the connection times out
                msg = f"cannot reach the Dask scheduler at {address}: {err}"
                raise OSError(msg) from err
            return
        if _CAN_MASK:
            # Whichever thread first starts multiprocessing's resource tracker (as starting a
            # process does) has SIGINT unblocked afterwards: ensure_running() unblocks it
            # rather than restoring the mask (CPython 3.11). Started here, before the mask.
            resource_tracker.ensure_running()
        try:
            # Its event loop's thread, the threads that thread starts and the worker processes
            # they spawn all inherit the mask: Ctrl-C, sent to every process of the terminal's
            # foreground group, reaches none of them (each would print its own traceback).
            # One pressed while the cluster starts (seconds) waits until it is up.
            with _sigint_blocked():
                self._cluster = LocalCluster(
                    n_workers=workers,
                    threads_per_worker=1,
                    processes=processes,
                    dashboard_address=None,
                    # Without a dashboard the scheduler still serves HTTP, on 8787 unless told
                    # otherwise: a second batch (or notebook cluster) on the machine would print
                    # distributed's "Port 8787 is already in use" warning. Any free local port.
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                )
                self._client = Client(self._cluster)
        except KeyboardInterrupt:  # pressed while the cluster started: no ``with`` block yet
            with _sigint_blocked():
                self.terminate()
            raise

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Scatter tasks to the cluster; yield outcomes in completion order."""
        from dask.distributed import as_completed as dask_completed  # noqa: PLC0415

        assert self._client is not None
        tasks = list(tasks)
        # Run ids repeat across experiments (p000-r000...), and a scheduler hands a task whose
        # key it already holds the result it has: another batch on the same scheduler would
        # get this one's runs. A fresh token per submission keeps the keys apart.
        token = uuid.uuid4().hex[:12]
        futures = self._client.map(
            _run_on_dask_worker, tasks, key=[f"floodsim-{token}-{t.run_id}" for t in tasks]
        )
        self._futures.extend(futures)  # for terminate()
        by_key = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        for future in dask_completed(futures):
            try:
                yield future.result()
            except Exception as err:
                task = by_key[future.key]
                yield RunOutcome(task.run_id, "failed", f"dask task failed: {err!r}", None, 0.0)

    def close(self) -> None:
        """Close the client (and the LocalCluster this executor started)."""
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()

    def terminate(self) -> None:
        """Cancel this executor's tasks and close at once.

        A LocalCluster started here has its worker processes killed, with the runs they are in:
        their directories, if they have one yet, say ``running``. A cluster at ``address`` keeps
        its workers, which finish the runs they are in (their results go nowhere). Either way,
        a run in progress yields no outcome.
        """
        # Each step whatever became of the one before; OSError covers a timeout or a
        # connection lost, which must not hide the Ctrl-C.
        with _distributed_quiet():
            if self._cluster is not None:
                with suppress(OSError):
                    workers = list(self._cluster.workers.values())
                    self._cluster.sync(
                        _kill_workers, workers, callback_timeout=3 * _TERMINATE_GRACE_S
                    )
            if self._client is not None:
                with suppress(OSError):
                    self._client.cancel(self._futures, reason="floodsim batch interrupted")
                with suppress(OSError):
                    self._client.close(timeout=_TERMINATE_GRACE_S)
            if self._cluster is not None:
                with suppress(OSError):
                    self._cluster.close(timeout=_TERMINATE_GRACE_S)


async def _kill_workers(workers: list[Any]) -> None:
    """Kill the processes of a LocalCluster's ``workers`` (its nannies), on the cluster's loop.

    Killed, not asked to stop: a worker in a run would wait for it to end, and report the
    runs it drops. A LocalCluster of threads has no processes to kill.
    """
    import psutil  # noqa: PLC0415 - a dependency of distributed
    from distributed import Nanny  # noqa: PLC0415 - optional extra

    nannies = [worker for worker in workers if isinstance(worker, Nanny)]
    for nanny in nannies:
        # Its worker's death is then the end of it, not a reason to start another. Run on the
        # loop, as the nanny's own code: its status changes nowhere else meanwhile.
        nanny.close_gracefully(reason="floodsim-batch-interrupted")
        if (pid := nanny.pid) is not None:
            with suppress(psutil.NoSuchProcess):  # it has just ended
                psutil.Process(pid).kill()
    # Each nanny joins its dead worker and closes its own connections.
    await asyncio.gather(*(nanny.close(timeout=_TERMINATE_GRACE_S) for nanny in nannies))


def make_executor(kind: str, workers: int = 2, address: str | None = None) -> Executor:
    """The executor for ``kind`` (serial, process or dask).

    Raises:
        ValueError: For an unknown kind.
    """
    if kind == "serial":
        return SerialExecutor()
    if kind == "process":
        return ProcessExecutor(workers)
    if kind == "dask":
        return DaskExecutor(workers, address)
    msg = f"executor must be serial, process or dask, got {kind!r}"
    raise ValueError(msg)

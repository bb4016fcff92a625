"""Where experiment runs execute: here, in a process pool, or on a Dask cluster.

Every executor takes independent :class:`RunTask` objects and yields :class:`RunOutcome` objects
as runs finish (in any order). A run that raises is reported as failed; it never stops the
others. Importing Mesa sets the multiprocessing start method to "spawn", so the process pool
uses a spawn context explicitly and tasks are plain picklable data.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
import uuid
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = [
    "DaskExecutor",
    "Executor",
    "ProcessExecutor",
    "RunOutcome",
    "RunTask",
    "SerialExecutor",
    "execute_run",
    "make_executor",
]


@dataclass(frozen=True, slots=True)
class RunTask:
    """One run to execute: its id, full config (plain data) and where to write it."""

    run_id: str
    config: dict[str, Any]
    base_dir: str
    out_root: str


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How a run ended."""

    run_id: str
    status: str  # complete | failed
    error: str | None
    run_dir: str | None
    duration_s: float


def execute_run(task: RunTask) -> RunOutcome:
    """Run one task in this process; any exception becomes a failed outcome."""
    # Imported here so that a worker process pays for Mesa only when it runs something.
    from simulation.config import ConfigWarning, RunConfig  # noqa: PLC0415
    from simulation.runner import build_model, run_simulation  # noqa: PLC0415

    start = time.perf_counter()
    model = None
    try:
        config = RunConfig.model_validate(task.config)
        base_dir = Path(task.base_dir)
        with warnings.catch_warnings():
            # Planning the experiment checked every design point and warned once; every
            # replicate would say it again, from each worker.
            warnings.simplefilter("ignore", ConfigWarning)
            model = build_model(config, base_dir, task.run_id)
        result = run_simulation(
            config, base_dir, Path(task.out_root), progress=False, model=model, run_id=task.run_id
        )
    except Exception as err:
        detail = "".join(traceback.format_exception_only(type(err), err)).strip()
        return RunOutcome(task.run_id, "failed", detail, None, time.perf_counter() - start)
    finally:
        if model is not None:
            model.release()  # a worker runs many models; each must go when its run is done
    return RunOutcome(
        task.run_id, "complete", None, str(result.run_dir), time.perf_counter() - start
    )


class Executor(Protocol):
    """Runs tasks and yields their outcomes as they finish."""

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Execute ``tasks``; yield each outcome when it is known."""
        ...

    def close(self) -> None:
        """Release workers and connections."""
        ...


class SerialExecutor:
    """Runs tasks one after another in this process."""

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Execute ``tasks`` in order."""
        for task in tasks:
            yield execute_run(task)

    def close(self) -> None:
        """Nothing to release."""


class ProcessExecutor:
    """Runs tasks in a pool of ``workers`` spawned processes on this machine."""

    def __init__(self, workers: int):
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Submit every task; yield outcomes in completion order."""
        futures = {self._pool.submit(execute_run, task): task for task in tasks}
        for future in as_completed(futures):
            task = futures[future]
            try:
                yield future.result()
            except Exception as err:
                yield RunOutcome(task.run_id, "failed", f"worker failed: {err!r}", None, 0.0)

    def close(self) -> None:
        """Shut the pool down."""
        self._pool.shutdown(cancel_futures=True)


class DaskExecutor:
    """Runs tasks on a dask.distributed cluster.

    Args:
        workers: Workers of the LocalCluster started when no ``address`` is given.
        address: Scheduler address of an existing cluster (its workers need floodsim installed).
        processes: LocalCluster workers as processes (``True``) or threads.
    """

    def __init__(self, workers: int, address: str | None = None, *, processes: bool = True):
        from dask.distributed import Client, LocalCluster  # noqa: PLC0415 - optional extra

        self._cluster = None
        if address is None:
            self._cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=processes,
                dashboard_address=None,
            )
            self._client = Client(self._cluster)
        else:
            try:
                self._client = Client(address)
            except OSError as err:  # distributed raises OSError when the connection times out
                msg = f"cannot reach the Dask scheduler at {address}: {err}"
                raise OSError(msg) from err

    def run(self, tasks: Iterable[RunTask]) -> Iterator[RunOutcome]:
        """Scatter tasks to the cluster; yield outcomes in completion order."""
        from dask.distributed import as_completed as dask_completed  # noqa: PLC0415

        tasks = list(tasks)
        # Run ids repeat across experiments (p000-r000...), and a scheduler hands a task whose
        # key it already holds the result it has: another batch on the same scheduler would
        # get this one's runs. A fresh token per submission keeps the keys apart.
        token = uuid.uuid4().hex[:12]
        futures = self._client.map(
            execute_run, tasks, key=[f"floodsim-{token}-{t.run_id}" for t in tasks]
        )
        by_key = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        for future in dask_completed(futures):
            try:
                yield future.result()
            except Exception as err:
                task = by_key[future.key]
                yield RunOutcome(task.run_id, "failed", f"dask task failed: {err!r}", None, 0.0)

    def close(self) -> None:
        """Close the client (and the LocalCluster this executor started)."""
        self._client.close()
        if self._cluster is not None:
            self._cluster.close()


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

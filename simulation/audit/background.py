"""Calls run in order on one background thread, their failures raised in the caller.

:class:`~simulation.audit.writer.AuditWriter` hands the batch work of ``engine: arrays`` (filling
a year's line templates and writing the lines) to a :class:`Background` while the simulation
goes on to its next phase. Most of that work is in pyarrow's kernels and in writing files,
which release the GIL, so the two threads mostly run at once on two cores: at 10,000
households and the ``standard`` level a household-year took about 8.5 µs on one thread and 6
with the lines written behind it (``docs/performance.md``). One thread, and calls in the order
given, keep the files' bytes what they are without it.
"""

from __future__ import annotations

import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Background"]


class Background:
    """One worker thread running calls in the order they were submitted.

    A call's exception is raised in the submitting thread, by the first :meth:`submit` or
    :meth:`wait` after the call ended; the calls after it still run.

    Args:
        name: The thread's name (shown by debuggers and ``py-spy``).
    """

    __slots__ = ("_executor", "_failed", "_pending", "_worker")

    def __init__(self, name: str):
        self._worker: int | None = None  # the thread's identity, once it has started
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=name, initializer=self._started
        )
        self._pending: deque[Future[Any]] = deque()
        self._failed = False  # whether a call has failed, raised or not

    def _started(self) -> None:
        self._worker = threading.get_ident()

    @property
    def on_worker(self) -> bool:
        """Whether the calling thread is the worker (a call that runs more runs them at once)."""
        return threading.get_ident() == self._worker

    def submit(self, call: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``call(*args)`` after every call submitted before it.

        The arguments must not change until the call has run: nothing is copied.

        Raises:
            Exception: The exception of an earlier call that has failed since the last check
                (``call`` is then not submitted).
        """
        self._reap()
        future = self._executor.submit(call, *args)
        self._pending.append(future)
        return future

    def wait(self, until: Future[Any] | None = None) -> None:
        """Block until ``until`` has run (``None``: every call submitted so far).

        Raises:
            Exception: The first failure among the calls that have run.
        """
        if until is None:
            pending = self._pending
            while pending:
                self._result(pending.popleft())
            return
        self._result(until)
        self._reap()

    def close(self, *, quiet: bool = False) -> bool:
        """Wait for every call submitted, then end the thread.

        Args:
            quiet: Raise no failure of the calls (the caller is already handling one).

        Returns:
            Whether every call ever submitted ran without failing.

        Raises:
            Exception: The first failure among the calls, unless ``quiet``.
        """
        try:
            if quiet:
                for future in self._pending:
                    if future.exception() is not None:  # waits; the failure is dropped
                        self._failed = True
                self._pending.clear()
            else:
                self.wait()
        finally:
            self._executor.shutdown(wait=True)
        return not self._failed

    def _reap(self) -> None:
        """Forget the calls that have run, raising the first that failed."""
        pending = self._pending
        while pending and pending[0].done():
            self._result(pending.popleft())

    def _result(self, future: Future[Any]) -> Any:
        """``future.result()``, remembering a failure."""
        try:
            return future.result()
        except BaseException:
            self._failed = True
            raise

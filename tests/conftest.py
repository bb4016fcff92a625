"""Shared fixtures and set-up.

``load_benchmark`` imports a benchmark script (benchmarks/ is no package); ``open_files_under``
lists the files below a folder that the test's process holds open. The suite also takes
Ctrl-C back if the shell that started it had it ignored (see :func:`pytest_configure`).

Hypothesis's deadline (200 ms an example by default) is off for the whole suite: it is a timing
check, and on a shared machine running the suite on every core (``make test``) an example's time
says more about the neighbours than about the code. Speed is judged in benchmarks/.
"""

from __future__ import annotations

import importlib.util
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"

settings.register_profile("floodsim", deadline=None)
settings.load_profile("floodsim")


def pytest_configure() -> None:
    """Catch SIGINT again where the suite was started with it ignored.

    A shell without job control (a script) ignores SIGINT in what it starts in the background
    (``make test &``), and an ignored signal stays ignored in every child. The tests of Ctrl-C
    in batches (tests/test_cli.py, tests/test_executors.py) send SIGINT to the suite and to the
    batches it starts, which would then go on as if nothing had happened. A signal that is
    caught is reset to its default in a child at ``exec``, so Python's own handler here serves
    the children too.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def load_benchmark() -> Callable[[str], ModuleType]:
    """A function importing ``benchmarks/<name>.py`` as a module named ``name``."""
    return _load


def _open_files_under(folder: Path) -> list[str]:
    names = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = fd.readlink()
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if target.is_relative_to(folder):
            names.append(target.name)
    return names


@pytest.fixture
def open_files_under() -> Callable[[Path], list[str]]:
    """A function naming the files below a folder this process holds open (``/proc/self/fd``).

    Skips the test where the system has no ``/proc/self/fd``.
    """
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd")
    return _open_files_under

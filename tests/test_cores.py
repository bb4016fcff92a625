"""Tests for simulation.cores."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from simulation.cores import usable_cores


def test_the_usable_cores_are_at_least_one_and_at_most_the_machines():
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_pinned_to_one_core_has_one_core():
    # A cluster job or `taskset -c 0` gives the process one core of many: the audit writer's
    # second thread and a summary's worker processes would then only take turns.
    pinned = (
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from simulation.cores import usable_cores; print(usable_cores())"
    )
    out = subprocess.run(
        [sys.executable, "-c", pinned], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "1"

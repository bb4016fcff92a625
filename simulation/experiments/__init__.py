"""Batch experiments: sweeps and replicates of a run config on one machine or a Dask cluster."""

from __future__ import annotations

from simulation.experiments.batch import ExperimentResult, combine_metrics, run_experiment
from simulation.experiments.design import (
    ExecutorConfig,
    ExperimentConfig,
    PlannedRun,
    SweepConfig,
    is_experiment,
    load_experiment,
    plan_runs,
    replicate_seeds,
)
from simulation.experiments.executors import (
    DaskExecutor,
    ProcessExecutor,
    RunOutcome,
    RunTask,
    SerialExecutor,
    execute_run,
    make_executor,
)
from simulation.experiments.record import ExperimentRecord, RecordError, RunRecord, read_record

__all__ = [
    "DaskExecutor",
    "ExecutorConfig",
    "ExperimentConfig",
    "ExperimentRecord",
    "ExperimentResult",
    "PlannedRun",
    "ProcessExecutor",
    "RecordError",
    "RunOutcome",
    "RunRecord",
    "RunTask",
    "SerialExecutor",
    "SweepConfig",
    "combine_metrics",
    "execute_run",
    "is_experiment",
    "load_experiment",
    "make_executor",
    "plan_runs",
    "read_record",
    "replicate_seeds",
    "run_experiment",
]

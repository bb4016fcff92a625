"""Reading back ``experiment.json``: the record ``floodsim batch`` keeps of an experiment.

:mod:`simulation.experiments.batch` writes it (the experiment as it ran and one record per run)
and rewrites it after every run. The tools that read an experiment's folder afterwards
(``floodsim report``, ``floodsim check-behaviour``) read it through :func:`read_record`, so that
a record edited or damaged since is refused in one line naming the file and the key, rather than
ending in a ``KeyError`` or ``AttributeError`` halfway through a report.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, Literal

import orjson
from pydantic import Field, ValidationError, field_validator

from simulation.config_base import ConfigModel, describe_validation_error
from simulation.experiments.design import ExperimentConfig  # noqa: TC001 - pydantic resolves it at run time

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["ExperimentRecord", "RecordError", "RunRecord", "read_record"]


class RecordError(ValueError):
    """An ``experiment.json`` that cannot be read as floodsim wrote it; one line, naming it."""


class RunRecord(ConfigModel):
    """One run of the experiment, as ``experiment.json`` lists it.

    Attributes:
        run_id: The run's id, and the name of its folder under ``runs/``.
        point: Its design point (from 0).
        replicate: Its replicate at that point (from 0).
        seed: Its seed.
        params: The swept keys' values at its point.
        status: ``pending`` (planned), ``complete`` or ``failed`` (its ``error`` says why).
        error: What a failed run raised.
        run_dir: Its folder, relative to the experiment's (``runs/<run_id>``) once it ran.
        duration_s: Seconds it took.
    """

    run_id: str = Field(min_length=1)
    point: int = Field(ge=0)
    replicate: int = Field(ge=0)
    seed: int = Field(ge=0)
    params: dict[str, Any]
    status: Literal["pending", "complete", "failed"]
    error: str | None
    run_dir: str | None
    duration_s: Annotated[float, Field(ge=0)] | None

    @field_validator("run_dir", mode="after")
    @classmethod
    def _inside_runs(cls, run_dir: str | None) -> str | None:
        # Joined to the experiment's folder by the readers: it must not lead out of it.
        if run_dir is not None:
            path = PurePosixPath(run_dir)
            if path.parent != PurePosixPath("runs") or path.name in ("", ".", ".."):
                msg = f"expected runs/<run_id>, got {run_dir!r}"
                raise ValueError(msg)
        return run_dir


class ExperimentRecord(ConfigModel):
    """The whole of ``experiment.json``.

    Attributes:
        schema_version: 1.
        experiment: The experiment as it ran (its executor after any command-line override).
        runs: One record per planned run, in plan order.
        wall_s: Seconds the latest attempt took (``None`` while it runs).
    """

    schema_version: Literal[1]
    experiment: ExperimentConfig
    runs: list[RunRecord]
    wall_s: Annotated[float, Field(ge=0)] | None = None


def read_record(folder: Path) -> ExperimentRecord:
    """Read and check ``folder / "experiment.json"``.

    Raises:
        RecordError: Naming the file (and the key) when it cannot be read or is not a record
            floodsim wrote.
    """
    path = folder / "experiment.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as err:
        msg = f"{path}: cannot be read as JSON ({err})"
        raise RecordError(msg) from None
    try:
        return ExperimentRecord.model_validate(data)
    except ValidationError as err:
        raise RecordError(describe_validation_error(err, str(path))) from None

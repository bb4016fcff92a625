"""What kind of floodsim results a folder holds: a run, a batch experiment or a calibration.

``floodsim batch`` and ``floodsim calibrate`` each write their own kind of folder, and refuse,
whatever their flags, a folder that holds another kind: the readers would take the mixed
folder for one kind or the other, and one command's ``--overwrite`` would remove only its own
files, leaving the other's beside results they do not describe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "CALIBRATION",
    "EXPERIMENT",
    "RUN",
    "kind_of",
    "other_kind_error",
    "run_directory_error",
]

#: A run directory (``floodsim run``; :data:`simulation.runner.RUN_FILES`).
RUN = "run"
#: A batch experiment's folder (``floodsim batch``; :mod:`simulation.experiments.batch`).
EXPERIMENT = "experiment"
#: A calibration's folder (``floodsim calibrate``; :mod:`simulation.calibration.fit`).
CALIBRATION = "calibration"

# Files at the top of a folder that only that kind writes there, and what the folder is then.
_MARKS = {
    RUN: (("manifest.json", "config.resolved.yaml"), "a run directory"),
    EXPERIMENT: (("experiment.json",), "a batch experiment's folder"),
    CALIBRATION: (("best.yaml", "evaluations.csv"), "a calibration's folder"),
}


def kind_of(folder: Path) -> str | None:
    """The kind of results ``folder`` holds (:data:`RUN`, ...), by its files; ``None``: none."""
    for kind, (marks, _) in _MARKS.items():
        if any((folder / name).is_file() for name in marks):
            return kind
    return None


def other_kind_error(folder: Path, own: str) -> str | None:
    """The error for writing results of kind ``own`` into ``folder``, if it holds another kind.

    Args:
        folder: The output folder (``--out``).
        own: The kind the command writes: :data:`EXPERIMENT` or :data:`CALIBRATION`.

    Returns:
        One line naming the folder, what it is and the files that say so, or ``None``.
    """
    for kind, (marks, what) in _MARKS.items():
        found = [name for name in marks if kind != own and (folder / name).is_file()]
        if found:
            return (
                f"{folder}: is {what} (it holds {' and '.join(found)}), not "
                f"{_MARKS[own][1]}; give another --out"
            )
    return None


def run_directory_error(folder: Path) -> str | None:
    """The error for ``floodsim run --out`` naming a run directory itself, else ``None``.

    ``--out`` is the folder that holds run directories: a run written into another would
    nest inside it, where nothing that reads the outer run looks for it.
    """
    marks, what = _MARKS[RUN]
    found = [name for name in marks if (folder / name).is_file()]
    if not found:
        return None
    return (
        f"{folder}: is {what} (it holds {' and '.join(found)}); --out is the folder that holds "
        f"run directories (such as {folder.parent})"
    )

"""The analysis subcommands of ``floodsim``: ``report`` (of a run or of a batch experiment).

``simulation.cli`` calls :func:`register` with its subparsers; the handlers follow the CLI's
convention (return the exit code, raise input errors for the CLI to map to exit code 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from simulation.cli_args import folder
from simulation.output_kinds import EXPERIMENT, RUN, kind_of

if TYPE_CHECKING:
    import argparse

__all__ = ["register"]


def _report(args: argparse.Namespace) -> int:
    """Write the report of ``args.run_dir`` and print the path of its ``index.html``.

    A folder ``floodsim batch`` wrote (it holds ``experiment.json``) gets the experiment's
    report, any other the run's.

    Raises:
        ReportError: For a missing or incomplete run directory or experiment (the CLI exits
            with code 2).
        AuditReadError: For an audit line damaged since the run wrote it (exit code 2).
    """
    # Imported on use so that `floodsim --help` does not load pandas and matplotlib.
    from simulation.analysis.experiment_report import (  # noqa: PLC0415
        is_experiment_dir,
        write_experiment_report,
    )
    from simulation.analysis.report import ReportError, write_report  # noqa: PLC0415
    from simulation.audit.conformance import damaged_lines_named  # noqa: PLC0415

    folder = Path(args.run_dir)
    out = Path(args.out) if args.out is not None else None
    if folder.is_dir() and kind_of(folder) not in (RUN, EXPERIMENT):
        # Either kind is reported: the message says which files would make it one.
        msg = (
            f"{folder}: neither a run directory nor an experiment's folder (no manifest.json or "
            "experiment.json)"
        )
        raise ReportError(msg)
    write = write_experiment_report if is_experiment_dir(folder) else write_report
    with damaged_lines_named(folder):
        index = write(folder, out)
    print(index)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand to the ``floodsim`` subparsers.

    ``floodsim report DIR [--out OUT]`` writes PNG figures and ``index.html`` into
    ``DIR/report/`` (or ``OUT``) and prints the path of ``index.html``: a run's
    (:mod:`simulation.analysis.report`) for a run directory, an experiment's
    (:mod:`simulation.analysis.experiment_report`) for a folder ``floodsim batch`` wrote.
    """
    report = subparsers.add_parser(
        "report",
        help="write figures and an HTML summary of a run directory or a batch experiment",
        description=(
            "For a run directory: adaptation, damage/claims, memory and threat-appraisal "
            "figures (PNG) and an index.html with the run's facts. For a batch experiment's "
            "folder: each outcome by swept value, the design points' table (points.csv), the "
            "rank correlation of each swept key that has numbers with each outcome "
            "(sensitivity.csv), each value against the key's first, run against run of the same "
            "seed (paired.csv), and an index.html. Written into DIR/report/ (or --out); prints "
            "the path of index.html."
        ),
    )
    report.add_argument(
        "run_dir",
        metavar="DIR",
        help="a run directory (floodsim run) or an experiment folder (floodsim batch)",
    )
    report.add_argument(
        "--out",
        metavar="OUT",
        type=folder,
        default=None,
        help="report folder (default: DIR/report)",
    )
    report.set_defaults(func=_report)

"""The analysis subcommands of ``floodsim``: ``report``.

``simulation.cli`` calls :func:`register` with its subparsers; the handlers follow the CLI's
convention (return the exit code, raise input errors for the CLI to map to exit code 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["register"]


def _report(args: argparse.Namespace) -> int:
    """Write the report of ``args.run_dir`` and print the path of its ``index.html``.

    Raises:
        ReportError: For a missing or incomplete run directory (the CLI exits with code 2).
    """
    # Imported on use so that `floodsim --help` does not load pandas and matplotlib.
    from simulation.analysis.report import write_report  # noqa: PLC0415

    out = Path(args.out) if args.out is not None else None
    print(write_report(Path(args.run_dir), out))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``report`` subcommand to the ``floodsim`` subparsers.

    ``floodsim report RUN_DIR [--out DIR]`` writes PNG figures and ``index.html`` into
    ``RUN_DIR/report/`` (or ``DIR``) and prints the path of ``index.html``.
    """
    report = subparsers.add_parser(
        "report",
        help="write figures and an HTML summary of a run directory",
        description=(
            "Write adaptation, damage/claims, memory and threat-appraisal figures (PNG) and an "
            "index.html with the run's facts into RUN_DIR/report/ (or --out); print the path "
            "of index.html."
        ),
    )
    report.add_argument("run_dir", metavar="RUN_DIR", help="a run directory written by run")
    report.add_argument(
        "--out", metavar="DIR", default=None, help="report folder (default: RUN_DIR/report)"
    )
    report.set_defaults(func=_report)

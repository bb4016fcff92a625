"""The ``floodsim calibrate`` subcommand.

``simulation.cli`` calls :func:`register` with its subparsers. The handler returns the exit
code, 0 whenever the calibration finishes, whether or not every target passes at the best
point: a calibration is a fit, and how well it fits is reported in the printed table and
``best.yaml`` (check the best point with ``floodsim check-behaviour`` to gate on targets). It
raises :class:`~simulation.calibration.fit.CalibrationError` for a bad calibration file, which
the CLI maps to exit code 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simulation.cli_args import folder, positive_int

if TYPE_CHECKING:
    import argparse

__all__ = ["register"]


def _calibrate(args: argparse.Namespace) -> int:
    """Run the calibration in ``args.file`` and print its result; the folder is the last line.

    Raises:
        CalibrationError: For a bad calibration file (the CLI exits with code 2).
    """
    # Imported on use so that `floodsim --help` does not load pandas, matplotlib and scipy.
    from simulation.analysis.behaviour_commands import format_table  # noqa: PLC0415
    from simulation.calibration.fit import calibrate  # noqa: PLC0415

    result = calibrate(
        args.file,
        args.out,
        executor=args.executor,
        workers=args.workers,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=False if args.quiet else None,
    )
    width = max(len(key) for key in result.best)
    print("best parameters:")
    for key, value in result.best.items():
        print(f"  {key.ljust(width)}  {value:.6g}")
    passed = int(result.table["passed"].sum())
    resumed = (
        f", {result.resumed} of them read back from the earlier attempt" if args.resume else ""
    )
    print(
        f"loss {result.loss:.6g} after {len(result.evaluations)} evaluation(s){resumed} "
        f"({result.message}); {passed} of {len(result.table)} targets pass"
    )
    print(format_table(result.table))
    print(result.out_dir)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``calibrate`` subcommand to the ``floodsim`` subparsers.

    ``floodsim calibrate FILE [--executor K] [--workers N] [--out DIR] [--resume | --overwrite]
    [--quiet]``
    fits the parameters of a calibration file (see :mod:`simulation.calibration.fit`), prints
    the best parameters, their loss and the target table, writes ``evaluations.csv``,
    ``best.yaml`` and ``calibration.png`` into ``DIR`` (default ``outputs/calibration/<name>``)
    and prints that folder as its last line. Exit code 0 whether or not every target passes.
    ``--resume`` continues the attempt in ``DIR``, reading back the evaluations it finished;
    ``--overwrite`` replaces its results, without which a ``DIR`` holding any is refused.
    """
    parser = subparsers.add_parser(
        "calibrate",
        help="fit parameters to behavioural targets (simulated method of moments)",
        description=(
            "Fit the parameters named in a calibration file (e.g. "
            "configs/calibration/baseline.yaml) to the targets it names, by simulated method of "
            "moments with a bounded Nelder-Mead or Powell search; write evaluations.csv, "
            "best.yaml and calibration.png. Exit code 0 when the fit finishes (whether or not "
            "every target passes); 2: bad input."
        ),
    )
    parser.add_argument("file", metavar="FILE", help="calibration YAML file")
    parser.add_argument(
        "--executor",
        choices=("serial", "process", "dask"),
        default=None,
        help="override the file's executor kind",
    )
    parser.add_argument(
        "--workers", type=positive_int, default=None, help="override the number of workers"
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=folder,
        default=None,
        help="output folder (default: outputs/calibration/<name>)",
    )
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help=(
            "continue the calibration interrupted in the output folder (or one that spent its "
            "max_evaluations, with a larger one): the evaluations it finished are read back, "
            "not simulated again"
        ),
    )
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the calibration results the output folder holds (needed when it holds "
        "any, unless --resume continues them)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=_calibrate)

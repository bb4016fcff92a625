"""The ``floodsim check-behaviour`` subcommand.

``simulation.cli`` calls :func:`register` with its subparsers. The handler follows the CLI's
convention: it returns the exit code (0 when every target passes, 1 when any fails) and raises
:class:`~simulation.analysis.behaviour.BehaviourError` for a bad targets file or a path that is
neither a run nor an experiment, which the CLI maps to exit code 2.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from simulation.cli_args import folder

if TYPE_CHECKING:
    import argparse

    import pandas as pd

__all__ = ["format_table", "register"]


def _number(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.3g}"


def format_table(table: pd.DataFrame) -> str:
    """The behaviour table as aligned text: name, simulated, spread, target ± tol, result.

    For a sweep each name is followed by its design point's setting.
    """
    from simulation.analysis.behaviour import row_labels  # noqa: PLC0415 - pandas on use

    header = ("target", "simulated", "spread", "target ± tol", "result")
    rows = [
        (
            label,
            _number(float(r.value)),
            _spread(float(r.spread), int(r.n_infinite), int(r.n_runs)),
            f"{r.target:.3g} ± {r.tolerance:.3g}",
            "PASS" if r.passed else "FAIL",
        )
        for label, r in zip(row_labels(table), table.itertuples(index=False), strict=True)
    ]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    head = "  ".join(cell.ljust(w) for cell, w in zip(header, widths, strict=True))
    return "\n".join([head, "  ".join("-" * w for w in widths), *lines])


def _spread(spread: float, infinite: int, runs: int) -> str:
    """The spread, saying how many infinite runs it leaves out (a duration's spread does)."""
    if infinite and math.isfinite(spread):
        return f"{_number(spread)} ({infinite} of {runs} runs inf)"
    return _number(spread)


def _check_behaviour(args: argparse.Namespace) -> int:
    """Check ``args.path`` against ``args.targets``; write behaviour.csv and behaviour.png.

    Raises:
        BehaviourError: For a bad targets file or path (the CLI exits with code 2).
        AuditReadError: For an audit line damaged since the run wrote it (exit code 2).
    """
    # Imported on use so that `floodsim --help` does not load pandas and matplotlib.
    from simulation.analysis.behaviour import (  # noqa: PLC0415
        ShortWindowWarning,
        UncomputedTargetWarning,
        check_behaviour,
        load_targets,
        plot_behaviour,
    )
    from simulation.analysis.event_study import ShortBaselineWarning  # noqa: PLC0415
    from simulation.audit.conformance import damaged_lines_named  # noqa: PLC0415
    from simulation.config import create_output_folder  # noqa: PLC0415

    # check_behaviour warns once per target and design point whose baseline or year window is
    # short or that some runs cannot answer; those read as the CLI's other warnings. Shown even
    # when a later target stops the check.
    # An output folder that cannot exist is refused before the runs are read (which can take
    # minutes for an experiment), and once the targets are known good, so that a bad targets
    # file leaves no folder behind.
    load_targets(args.targets)
    if args.out is not None:
        create_output_folder(Path(args.out))
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught, damaged_lines_named(args.path):
            table = check_behaviour(args.path, args.targets)
    finally:
        for w in caught:
            if issubclass(
                w.category, (ShortBaselineWarning, ShortWindowWarning, UncomputedTargetWarning)
            ):
                print(f"floodsim: warning: {w.message}", file=sys.stderr)
            else:  # not ours: as Python shows it
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    out = Path(args.out) if args.out is not None else Path(args.path)  # the path: it exists
    table.to_csv(out / "behaviour.csv", index=False)
    plot_behaviour(table).savefig(out / "behaviour.png", dpi=120)
    print(format_table(table))
    if table["value"].isna().any():
        print(
            "-: the statistic has no value in these runs (no post-flood jump to recover from, "
            "no insured spell, no simulated year in its range, or what the warnings above say), "
            "so the target fails"
        )
    if any(math.isinf(value) for value in table["value"]):
        print(
            "inf: a duration that had not ended by the run's last year (take-up not yet back "
            "within the target's fraction of the jump, policies still held): a longer run may "
            "measure it, or the change may level off above that line; a spread leaves such "
            "runs out and says how many"
        )
    failed = int((~table["passed"]).sum())
    points = table["point"].nunique()
    runs = int(table.drop_duplicates("point")["n_runs"].sum())
    over = f"{points} design points, {runs} runs" if points > 1 else f"{runs} run(s)"
    print(
        f"{len(table) - failed} of {len(table)} targets pass ({over}); "
        f"wrote {out / 'behaviour.csv'} and {out / 'behaviour.png'}"
    )
    return 0 if failed == 0 else 1


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``check-behaviour`` subcommand to the ``floodsim`` subparsers.

    ``floodsim check-behaviour RUN_OR_EXPERIMENT --targets FILE [--out DIR]`` prints every
    target with the simulated value, its spread over replicates and PASS/FAIL, writes
    ``behaviour.csv`` and ``behaviour.png`` into ``DIR`` (default: the run or experiment
    folder), and exits 0 when every target passes, 1 when any fails.
    """
    parser = subparsers.add_parser(
        "check-behaviour",
        help="compare a run or experiment with behavioural targets (stylized facts)",
        description=(
            "Compute every target of a targets file (e.g. configs/targets/stylized_facts.yaml) "
            "for a run directory or each run of an experiment folder, print the simulated "
            "value, its spread over replicates and PASS/FAIL, and write behaviour.csv and "
            "behaviour.png. Exit code 0: all targets pass; 1: some fail; 2: bad input."
        ),
    )
    parser.add_argument(
        "path", metavar="RUN_OR_EXPERIMENT", help="a run directory or an experiment folder"
    )
    parser.add_argument("--targets", metavar="FILE", required=True, help="targets YAML file")
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=folder,
        default=None,
        help="folder for behaviour.csv and behaviour.png (default: RUN_OR_EXPERIMENT)",
    )
    parser.set_defaults(func=_check_behaviour)

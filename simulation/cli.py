"""The ``floodsim`` command.

Subcommands:
    run           Run a simulation from a YAML config and write its run directory.
    batch         Run a batch experiment (sweeps x replicates) serially, in processes or on Dask.
    validate      Check a run config or experiment file without running it.
    audit         Rebuild a household's memory from the audit trail; check a run's integrity.
    report        Write PNG figures and an index.html for a run.
    check-behaviour  Compare a run or experiment with target statistics (stylized facts).
    calibrate     Fit parameters to target statistics (simulated method of moments).
    memory-demo   Walk one household's memory through a few flood years and print it.

Bad input (YAML syntax, an empty file, unknown keys, wrong types, out-of-range values, broken
curves or registries, missing files, a file or folder that cannot be read or written) exits with
code 2 and one line naming the file (or the ``--set`` or ``--seed`` flag that gave the value)
and the key. A command that could not finish (disk full, a language-model endpoint with nothing
listening, the folder it writes made unwritable while it ran) exits with code 1 and one line;
``--resume`` continues it.
"""

from __future__ import annotations

import errno
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm import tqdm

from simulation.analysis import behaviour_commands
from simulation.analysis import commands as analysis_commands
from simulation.audit import commands as audit_commands
from simulation.calibration import commands as calibration_commands
from simulation.cli_args import ExactParser, folder, integer, positive_int_up_to
from simulation.config import MAX_YEARS, array_engine_limits
from simulation.decisions.llm import CacheMiss, EndpointUnreachable
from simulation.errors import RESULTS_NOTE, InputError
from simulation.launcher import EXIT_INTERRUPTED, EXIT_TERMINATED, Terminated
from simulation.memory import CognitiveMemory, ReflectionSettings

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import TextIO

    import pandas as pd

    from simulation.config import RunConfig
    from simulation.model import FloodAdaptationModel

__all__ = ["main"]

#: Exit code for bad input.
EXIT_BAD_INPUT = 2
#: Exit code when a command could not finish (disk full, no language-model endpoint listening,
#: the folder it writes made unwritable while it ran): it stays resumable.
EXIT_RUN_FAILED = 1
#: OSErrors about a path given (or a file in a folder given), not about the machine.
_PATH_ERRORS = (
    FileExistsError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
)
_PATH_ERRNOS = frozenset({errno.ELOOP, errno.ENAMETOOLONG, errno.EROFS})
#: Exit code when stdout's reader closed the pipe (128 + SIGPIPE, as shells report it).
EXIT_BROKEN_PIPE = 141
#: How to continue a batch that Ctrl-C stopped.
_CONTINUE_BATCH = "continue with the same command and --resume (complete runs are kept)"
#: How to continue a calibration that Ctrl-C stopped.
_CONTINUE_CALIBRATION = (
    "continue with the same command and --resume (finished evaluations are read back)"
)
#: The note the runner adds to an exception once the run has a directory.
_RUN_DIR_NOTE = "run directory: "


class UsageError(InputError):
    """Arguments that do not fit together."""


#: Errors that mean "the input is wrong"; each message names the file (or flag) and the key.
#: So is a reply missing from the cache of a run under ``decision.llm.mode: replay``.
INPUT_ERRORS = (InputError, CacheMiss)

_SUMMARY_COLUMNS = {
    "year": "year",
    "insured_share": "insured",
    "insured_share_ae": "ins AE",
    "elevated_share": "elevated",
    "relocated_share": "moved",
    "flooded_households": "flooded",
    "total_damage": "damage $M",
    "claims_paid_amount": "claims $M",
    "premium_rate": "rate",
    "subsidy_share": "subsidy",
    "mean_tp": "mean TP",
}


def _summary(metrics: pd.DataFrame) -> str:
    table = metrics[list(_SUMMARY_COLUMNS)].rename(columns=_SUMMARY_COLUMNS).copy()
    table["damage $M"] = table["damage $M"] / 1e6
    table["claims $M"] = table["claims $M"] / 1e6
    return table.to_string(index=False, float_format=lambda v: f"{v:.3f}")


def _announce(model: FloodAdaptationModel) -> None:
    """Print ``floodsim run``'s first line, what runs on which engine, before its years.

    Before, not after: a long run names its engine while it runs, a failed one still names it.
    """
    config = model.config
    print(
        f"floodsim: {config.name}, {_many(len(model.households), 'household')}, "
        f"{_many(config.years, 'year')}, seed {config.seed}, {_engine(config)}",
        flush=True,
    )


def _run(args: argparse.Namespace) -> int:
    from simulation.config import load_config, setting_origin  # noqa: PLC0415 - fast --help
    from simulation.runner import (  # noqa: PLC0415
        FallbackWarning,
        build_model,
        fallback_summary,
        resume_run,
        run_simulation,
    )

    progress = False if args.quiet else None
    if args.resume is not None:
        if args.config is not None or args.set or args.seed is not None or args.out is not None:
            msg = (
                "--resume RUN_DIR takes no CONFIG, --set, --seed or --out: the run keeps its "
                "config and its folder"
            )
            raise UsageError(msg)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FallbackWarning)  # said below, after the table
            result = resume_run(
                Path(args.resume),
                progress=progress,
                checkpoint_every=args.checkpoint_every,
                on_built=None if args.quiet else _announce,
            )
        config = result.model.config
    else:
        if args.config is None:
            msg = "give a CONFIG to run, or --resume RUN_DIR"
            raise UsageError(msg)
        config, base_dir = load_config(args.config, args.set, args.seed)
        # Building the model validates every file the config names before any output exists.
        origin_of = setting_origin(args.config, args.set, args.seed)
        model = build_model(config, base_dir, args.config, origin_of)
        if not args.quiet:
            _announce(model)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FallbackWarning)  # said below, after the table
            result = run_simulation(
                config,
                base_dir,
                Path(args.out or "outputs"),
                progress=progress,
                model=model,
                checkpoint_every=args.checkpoint_every,
            )
    if not args.quiet:
        print(_summary(result.metrics))
    fallbacks = fallback_summary(result.metrics, result.model.registry.default_skill)
    if fallbacks:
        print(f"floodsim: warning: {fallbacks}", file=sys.stderr)
    print(result.run_dir)
    return 0


def _validate(args: argparse.Namespace) -> int:
    from simulation.config import (  # noqa: PLC0415
        ConfigError,
        file_kind,
        load_config,
        read_yaml,
        setting_origin,
    )
    from simulation.experiments import load_experiment, plan_runs  # noqa: PLC0415
    from simulation.runner import build_model  # noqa: PLC0415

    kind = file_kind(read_yaml(Path(args.config)))
    if (args.set or args.seed is not None) and kind != "run":
        flag = "--set" if args.set else "--seed"
        if kind in ("experiment", "calibration"):
            own = "`set:`" if args.set else "`seed:` (each replicate's seed is drawn from it)"
            msg = (
                f"{args.config}: {flag}: applies to run configs; {kind} files have their own {own}"
            )
        else:
            msg = f"{args.config}: {flag}: applies to run configs, not to a {kind} file"
        raise ConfigError(msg)
    if kind == "targets":
        from simulation.analysis.behaviour import load_targets  # noqa: PLC0415

        targets = load_targets(args.config)
        print(f"{args.config}: ok (targets file: {len(targets)} targets)")
        return 0
    if kind == "calibration":
        from simulation.calibration.fit import load_calibration  # noqa: PLC0415

        calibration, _ = load_calibration(args.config)
        print(
            f"{args.config}: ok (calibration {calibration.name}: "
            f"{len(calibration.parameters)} parameters, {calibration.replicates} replicates, "
            f"at most {calibration.max_evaluations} evaluations)"
        )
        return 0
    if kind == "experiment":
        experiment, base, _ = load_experiment(args.config)
        runs = plan_runs(experiment, base, args.config)
        points = len(runs) // experiment.replicates
        print(
            f"{args.config}: ok (experiment {experiment.name}: {_many(len(runs), 'run')} = "
            f"{_many(points, 'design point')} x {_many(experiment.replicates, 'replicate')}, "
            f"executor {experiment.executor.kind})"
        )
        return 0
    config, base_dir = load_config(args.config, args.set, args.seed)
    origin_of = setting_origin(args.config, args.set, args.seed)
    model = build_model(config, base_dir, args.config, origin_of)
    print(
        f"{args.config}: ok ({_many(len(model.households), 'household')}, "
        f"{_many(config.years, 'year')}, "
        f"hazard {config.hazard.source}, decisions {config.decision.policy}, "
        f"{_engine(config)})"
    )
    return 0


def _batch(args: argparse.Namespace) -> int:
    from simulation.experiments import run_experiment  # noqa: PLC0415

    result = run_experiment(
        args.experiment,
        args.out,
        executor=args.executor,
        workers=args.workers,
        address=args.address,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=False if args.quiet else None,
    )
    done = sum(r["status"] == "complete" for r in result.runs)
    took = f"{result.wall_s:,.1f} s"
    if result.wall_s >= 60:
        took += f" ({tqdm.format_interval(result.wall_s)})"
    print(
        f"floodsim: {done} of {len(result.runs)} runs complete ({result.skipped} kept from an "
        f"earlier attempt), {result.failed} failed, in {took}"
    )
    for record in result.runs:
        if record["status"] == "failed":
            print(f"  failed {record['run_id']}: {record['error']}", file=sys.stderr)
    print(result.out_dir)
    return 1 if result.failed else 0


def _memory_demo(_: argparse.Namespace) -> int:
    """Show consolidation, decay-weighted retrieval and reflection for one household."""
    mem = CognitiveMemory("H001", reflection=ReflectionSettings(enabled=True, threshold=2.0))
    script = {
        1: [("flood", 62_000.0)],
        2: [("decision", "buy_insurance")],
        4: [("flood", 8_500.0)],
        6: [("decision", "do_nothing")],
    }
    for year in range(1, 8):
        for kind, value in script.get(year, []):
            if kind == "flood":
                mem.update_after_flood(float(value), year)
            else:
                mem.update_after_decision(str(value), year)
        report = mem.end_year(year)
        print(f"Year {year}: retrieved for next year's decision:")
        for scored in mem.retrieve_scored(top_k=3, current_year=year + 1):
            print(f"  {scored.score:5.3f} [{scored.source:<8}] {scored.item.content}")
        for reflection in report.reflections:
            print(f"  reflection: {reflection.content}")
    print(mem)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``floodsim`` command."""
    parser = ExactParser(
        prog="floodsim", description="Agent-based flood adaptation simulator on Mesa."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run a simulation and write its run directory")
    run.add_argument("config", nargs="?", help="run config (YAML)")
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key (dotted), e.g. --set memory.decay_rate=0.9",
    )
    run.add_argument("--seed", type=integer, help="override the config's seed")
    run.add_argument("--out", type=folder, help="folder for run directories (default outputs)")
    run.add_argument("--quiet", action="store_true", help="print only the run directory")
    run.add_argument(
        "--checkpoint-every",
        type=positive_int_up_to(MAX_YEARS, "the most years a run can have"),
        metavar="K",
        help="write a checkpoint every K years (resume with --resume RUN_DIR)",
    )
    run.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue an interrupted run from its last checkpoint (from the start without one)",
    )
    run.set_defaults(func=_run)

    validate = commands.add_parser(
        "validate",
        help="check a run config, experiment, calibration or targets file without running it",
    )
    validate.add_argument(
        "config", help="run config, experiment, calibration or targets file (YAML)"
    )
    validate.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="check a run config with this key overridden, as floodsim run --set would",
    )
    validate.add_argument(
        "--seed",
        type=integer,
        help="check a run config with this seed, as floodsim run --seed would",
    )
    validate.set_defaults(func=_validate)

    batch = commands.add_parser("batch", help="run a batch experiment (sweeps x replicates)")
    batch.add_argument("experiment", help="experiment file (YAML)")
    batch.add_argument(
        "--executor", choices=["serial", "process", "dask"], help="override the file's executor"
    )
    batch.add_argument("--workers", type=integer, help="processes or local Dask workers")
    batch.add_argument("--address", help="Dask scheduler address, e.g. tcp://host:8786")
    batch.add_argument(
        "--out", type=folder, help="output folder (default outputs/<experiment name>)"
    )
    again = batch.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        action="store_true",
        help="continue the experiment in the output folder: keep complete, unchanged runs; "
        "rerun failed, missing or changed ones",
    )
    again.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the experiment results the output folder holds (needed when it holds "
        "any, unless --resume continues the same experiment)",
    )
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    batch.set_defaults(func=_batch)

    audit_commands.register(commands)
    analysis_commands.register(commands)
    behaviour_commands.register(commands)
    calibration_commands.register(commands)

    demo = commands.add_parser("memory-demo", help="walk one household's memory through floods")
    demo.set_defaults(func=_memory_demo)
    return parser


def _one_line_warnings(show: Callable[..., None]) -> Callable[..., None]:
    """Wrap ``warnings.showwarning``: floodsim's own warnings on one line, like its errors."""

    def show_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if category.__module__.startswith("simulation."):
            print(f"floodsim: warning: {message}", file=file or sys.stderr)
        else:  # not ours: as Python (or whoever installed ``show``) shows it
            show(message, category, filename, lineno, file, line)

    return show_warning


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``floodsim`` command; returns the process exit code."""
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:  # before anything ran: nothing to continue
        print("floodsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warnings(warnings.showwarning)
        return _dispatch(args)


def _dispatch(args: argparse.Namespace) -> int:
    try:
        return args.func(args)
    except KeyboardInterrupt as err:
        # Ctrl-C (or SIGTERM) is the user's own doing: a line saying what to do next, not a
        # traceback.
        said = "terminated" if isinstance(err, Terminated) else "interrupted"
        print(f"floodsim: {said}{_continue_hint(args.command, err)}", file=sys.stderr)
        return EXIT_TERMINATED if isinstance(err, Terminated) else EXIT_INTERRUPTED
    except INPUT_ERRORS as err:
        print(f"floodsim: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        # The reader of stdout went away (`floodsim run ... | head`): like any Unix tool, stop
        # without a word. Python would report the pipe again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except EndpointUnreachable as err:
        # Not bad input (the URL may be right and the server merely not started), and the run
        # directory exists: like a full disk, the run is resumed once the cause is gone.
        run_dirs = _run_dirs(err)
        then = f" Start it, then continue with: floodsim run --resume {run_dirs[0]}"
        print(f"floodsim: error: {err}{then if run_dirs else ''}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except OSError as err:
        return _os_error(err, args.command)


def _os_error(err: OSError, command: str) -> int:
    """Print ``err`` as one line; returns the exit code: 2 for a path, 1 for the machine."""
    run_dirs, results = _run_dirs(err), _notes(err, RESULTS_NOTE)
    if _about_a_path(err) and not run_dirs and not results:
        # A run directory that cannot be read, an --out that cannot be written, a folder where a
        # file goes: the path given is wrong, as with a missing config.
        print(f"floodsim: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # Disk full, or the folder being written made unwritable: say what and where; what was
    # written so far is continued once the cause is mended.
    where = f" ({err.filename})" if err.filename else ""
    hint = ""
    if run_dirs:
        hint = f"; run directory: {run_dirs[0]}, resume with: floodsim run --resume {run_dirs[0]}"
    elif results and command in ("batch", "calibrate"):
        then = _CONTINUE_BATCH if command == "batch" else _CONTINUE_CALIBRATION
        # The outermost folder, noted last: a calibration's, not its evaluation's batch.
        hint = f"; results so far in {results[-1]}: {then}"
    print(f"floodsim: error: {err.strerror or err}{where}{hint}", file=sys.stderr)
    return EXIT_RUN_FAILED


def _about_a_path(err: OSError) -> bool:
    """Whether ``err`` is about a path it names (permissions, a folder where a file goes).

    A full disk or a failing device is the machine's, and so is an error that names no path
    (a read-only ``/dev/shm`` refusing a process pool its semaphores): the same command
    succeeds once the machine is mended, so such errors keep exit code 1.
    """
    named = err.filename is not None
    return named and (isinstance(err, _PATH_ERRORS) or err.errno in _PATH_ERRNOS)


def _run_dirs(err: BaseException) -> list[str]:
    """The run directory the runner noted on ``err`` (none before the directory was written)."""
    return _notes(err, _RUN_DIR_NOTE)


def _notes(err: BaseException, prefix: str) -> list[str]:
    """What follows ``prefix`` in each of the notes on ``err`` that start with it."""
    return [n[len(prefix) :] for n in getattr(err, "__notes__", []) if n.startswith(prefix)]


def _continue_hint(command: str, err: BaseException) -> str:
    """How to continue what Ctrl-C stopped (empty when there is nothing to continue)."""
    if command == "batch":
        return f"; {_CONTINUE_BATCH}"
    if command == "calibrate":
        return f"; {_CONTINUE_CALIBRATION}"
    if command != "run":
        return ""
    run_dirs = _run_dirs(err)
    if not run_dirs:
        return " before its run directory was written"
    return (
        f"; continue it with: floodsim run --resume {run_dirs[0]} (from its last checkpoint, "
        "or from the start without one)"
    )


def _many(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless the count is 1 ("1 year", "30 years")."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _engine(config: RunConfig) -> str:
    """The engine a run uses and, on objects, what keeps it off the faster arrays engine."""
    if config.engine == "arrays":
        return "engine arrays"
    sections = {"decision": config.decision, "memory": config.memory, "audit": config.audit}
    limits = array_engine_limits(sections)
    if not limits:  # chosen: engine objects
        return "engine objects"
    return f"engine objects (arrays does not implement {'; '.join(limits)})"


if __name__ == "__main__":
    sys.exit(main())

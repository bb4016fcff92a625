"""Tests for simulation.analysis: metrics tables, figures, write_report and ``floodsim report``."""

from __future__ import annotations

import argparse
import json
import shutil
import struct
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from simulation.analysis import metrics, plots, report
from simulation.analysis.commands import register
from simulation.analysis.event_study import event_study
from simulation.analysis.report import FIGURES, ReportError, write_report
from simulation.audit.readers import AuditReadError, memory_counts, retrievals
from simulation.cli import main
from simulation.config import load_config
from simulation.errors import InputError
from simulation.runner import run_simulation

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "configs" / "default.yaml"
SMALL = ["households.count=80", "years=6"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_NAMES = ("adaptation.png", "damage_claims.png", "memory.png", "threat.png")
SKILLS = {"buy_insurance", "buy_contents_insurance", "elevate_house", "relocate", "do_nothing"}


def simulate(out_root: Path, *overrides: str) -> Path:
    config, base_dir = load_config(DEFAULT, [*SMALL, *overrides])
    return run_simulation(config, base_dir, out_root, progress=False).run_dir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A small audited run (audit level standard, the default)."""
    return simulate(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def bare_run_dir(tmp_path_factory) -> Path:
    """The same run without audit streams."""
    return simulate(tmp_path_factory.mktemp("bare"), "audit.level=off")


@pytest.fixture(scope="module")
def report_index(run_dir) -> Path:
    return write_report(run_dir)


@pytest.fixture(scope="module")
def run(run_dir) -> metrics.RunData:
    return metrics.load_run(run_dir)


def stream_lines(run_dir: Path, name: str) -> int:
    with (run_dir / f"{name}.jsonl").open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, path
    width, height = struct.unpack(">II", data[16:24])  # IHDR comes first
    return width, height


def assert_report(index: Path, run_id: str) -> None:
    assert index.name == "index.html"
    page = index.read_text(encoding="utf-8")
    for name in PNG_NAMES:
        png = index.parent / name
        width, height = png_size(png)
        assert width >= 600, (name, width)
        assert height >= 300, (name, height)
        assert png.stat().st_size > 10_000, name
        assert f'src="{name}"' in page
    assert page.count("<figcaption>") == 4
    assert f"<title>floodsim report: {run_id}</title>" in page


# ------------------------------------------------------------------------------- report
def test_write_report_writes_four_pngs_and_an_index_into_run_dir_report(run_dir, report_index):
    assert report_index == run_dir / "report" / "index.html"
    assert_report(report_index, run_dir.name)
    assert tuple(FIGURES) == PNG_NAMES


def test_index_lists_run_facts_from_the_manifest(run_dir, report_index):
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    page = report_index.read_text(encoding="utf-8")
    for label, value in (
        ("households", 80),
        ("years", 6),
        ("seed", manifest["seed"]),
        ("config hash", manifest["config_hash"]),
        ("status", "complete"),
    ):
        assert f"<tr><th>{label}</th><td>{value}</td></tr>" in page
    assert "household_traces, memory_updates" in page


def test_a_report_counts_the_audit_lines_it_reads_on_a_bar_per_stream(run_dir, tmp_path, capsys):
    write_report(run_dir, tmp_path / "shown", progress=True)
    shown = capsys.readouterr().err
    for name in ("household_traces", "memory_updates"):
        assert f"{name}:   0%|" in shown
        assert f"/{stream_lines(run_dir, name)} [" in shown  # the manifest's count
    write_report(run_dir, tmp_path / "quiet")  # only where stderr is a terminal, not here
    assert capsys.readouterr().err == ""


def test_report_is_the_same_for_gzipped_streams(run_dir, tmp_path):
    gz_run = simulate(tmp_path / "gz", "audit.gzip=true")
    assert (gz_run / "household_traces.jsonl.gz").is_file()
    pd.testing.assert_frame_equal(metrics.tp_distribution(gz_run), metrics.tp_distribution(run_dir))
    pd.testing.assert_frame_equal(
        metrics.memory_composition(gz_run), metrics.memory_composition(run_dir)
    )


def test_missing_run_dir_is_a_report_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-run"
    with pytest.raises(ReportError, match="does not exist") as info:
        write_report(missing)
    message = str(info.value)
    assert str(missing) in message
    assert "\n" not in message
    assert isinstance(info.value, ValueError)


def test_folder_without_manifest_is_a_report_error(tmp_path):
    with pytest.raises(ReportError, match=r"manifest\.json is missing") as info:
        write_report(tmp_path)
    assert str(tmp_path) in str(info.value)
    assert not (tmp_path / "report").exists()


def test_folder_without_model_years_is_a_report_error(run_dir, tmp_path):
    shutil.copy(run_dir / "manifest.json", tmp_path / "manifest.json")
    with pytest.raises(ReportError, match=r"model_years\.csv is missing") as info:
        write_report(tmp_path)
    assert str(tmp_path) in str(info.value)


@pytest.mark.parametrize("name", ["manifest.json", "model_years.csv"])
def test_a_folder_where_a_run_file_goes_is_named_as_one_not_as_missing(run_dir, tmp_path, name):
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("report"))
    (broken / name).unlink()
    (broken / name).mkdir()
    with pytest.raises(ReportError, match="a folder, not a file") as info:
        write_report(broken)
    assert str(info.value) == f"{broken / name}: a folder, not a file"


def test_unreadable_files_are_report_errors_naming_the_file(run_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / "model_years.csv").write_text("year,foo\n1,2\n", encoding="utf-8")
    with pytest.raises(ReportError, match="missing column") as info:
        write_report(broken)
    assert str(broken / "model_years.csv") in str(info.value)
    (broken / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ReportError, match="cannot be read as JSON") as info:
        write_report(broken)
    assert str(broken / "manifest.json") in str(info.value)


def test_corrupt_audit_stream_is_a_report_error(run_dir, tmp_path):
    broken = tmp_path / "corrupt"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("report"))
    traces = broken / "household_traces.jsonl"
    lines = traces.read_text(encoding="utf-8").splitlines(keepends=True)
    traces.write_text("".join([lines[0], "{garbage\n", *lines[1:]]), encoding="utf-8")
    with pytest.raises(ReportError, match="line 2") as info:
        write_report(broken)
    assert str(traces) in str(info.value)


def test_a_config_that_is_not_utf8_is_a_report_error(run_dir, tmp_path):
    """It ended the report with a UnicodeDecodeError."""
    broken = tmp_path / "not-utf8"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("report"))
    config = broken / "config.resolved.yaml"
    config.write_bytes(config.read_bytes()[:100] + b"\x98\xc5" + config.read_bytes()[102:])
    with pytest.raises(ReportError, match="cannot be read as YAML") as info:
        write_report(broken)
    assert str(config) in str(info.value)


def _repeat_second_row(raw: bytes) -> bytes:
    rows = raw.splitlines(keepends=True)
    return b"".join([*rows[:2], rows[1], *rows[2:]])


def _drop_row(index: int) -> Callable[[bytes], bytes]:
    def drop(raw: bytes) -> bytes:
        rows = raw.splitlines(keepends=True)
        del rows[index]
        return b"".join(rows)

    return drop


def _set_cell(column: str, value: str, row: int = 3) -> Callable[[bytes], bytes]:
    """Set ``column`` of data row ``row`` (1 = the first year) to ``value``."""

    def edit(raw: bytes) -> bytes:
        rows = raw.decode().splitlines(keepends=True)
        at = rows[0].rstrip("\n").split(",").index(column)
        cells = rows[row].rstrip("\n").split(",")
        cells[at] = value
        rows[row] = ",".join(cells) + "\n"
        return "".join(rows).encode()

    return edit


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        # Values no run writes: read as data, a share of -0.5 had turned a target from failed
        # to passed.
        (_set_cell("insured_share_ae", "-0.5"), r"'insured_share_ae' holds a negative value \(-0"),
        (_set_cell("insured_share", "1e300"), "'insured_share' holds a share above 1"),
        (_set_cell("damaged_households", "2.5"), "'damaged_households' holds a count that is not"),
        (lambda raw: raw[: len(raw) // 2], "cut short: its last row has no newline"),
        (lambda raw: raw.replace(b"\n3,", b"\n,", 1), "a year is missing or not a whole"),
        (lambda raw: raw.replace(b",4.0,", b",1e400,", 1), "column 'premium_rate' holds an infin"),
        (lambda raw: raw.replace(b",4.0,", b",four,", 1), "column 'premium_rate' holds text"),
        # The header joined to the first row: a report ended with pandas' KeyError.
        (lambda raw: raw.replace(b"mean_working,", b"", 1).replace(b"\n", b"", 1), "header is"),
        (lambda raw: raw.replace(b"insured_share,", b"", 1), "row holds more values than"),
        (lambda raw: raw.replace(b"mean_working", b"mean_wrking", 1), r"column\(s\) mean_working"),
        (_repeat_second_row, "years do not follow one another"),
        # Years that still follow one another: only the manifest's count tells.
        (_drop_row(1), "holds years 2 to 6, but the run's manifest says it completed years 1 to 6"),
        (_drop_row(-1), "holds years 1 to 5, but the run's manifest says it completed years 1 to"),
    ],
    ids=[
        *("negative", "share-above-1", "count-not-whole"),
        *("cut-short", "year-missing", "infinite", "text", "joined", "short", "renamed"),
        *("repeat", "first-gone", "last-gone"),
    ],
)
def test_a_metrics_table_damaged_since_the_run_is_named(run_dir, tmp_path, capsys, damage, problem):
    """It was read as it stood: a table cut short ended check-behaviour with a ValueError, and
    an infinite value ended the report's figures with one."""
    broken = tmp_path / "damaged"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("report"))
    table = broken / "model_years.csv"
    table.write_bytes(damage(table.read_bytes()))
    with pytest.raises(metrics.RunDirError, match=problem):
        metrics.load_run(broken)
    assert main(["report", str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"floodsim: error: {table}: ")
    assert err.count("\n") == 1


def test_an_infinite_value_read_as_text_is_named_infinite(run_dir, tmp_path, monkeypatch):
    """pandas before 3.0 reads 1e400 as text; the refusal names it infinite all the same."""
    broken = tmp_path / "damaged"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("report"))
    table = broken / "model_years.csv"
    table.write_bytes(table.read_bytes().replace(b",4.0,", b",1e400,", 1))
    read_csv = pd.read_csv
    monkeypatch.setattr(
        metrics.pd,
        "read_csv",
        lambda *a, **k: read_csv(*a, **k, dtype={"premium_rate": object}),
    )
    with pytest.raises(metrics.RunDirError, match="column 'premium_rate' holds an infinite"):
        metrics.load_run(broken)


@pytest.mark.parametrize(
    ("command", "change", "problem"),
    [
        ("report", {"versions": 3}, "versions: Input should be a valid dictionary (got 3)"),
        ("report", {"counts": {"years": "30"}}, "counts.years: Input should be a valid integer"),
        ("audit", {"audit": 1.5}, "audit: Input should be a valid dictionary (got 1.5)"),
    ],
)
def test_a_manifest_damaged_since_the_run_is_named(
    run_dir, tmp_path, capsys, command, change, problem
):
    """The report's facts and audit memory reached into these with an AttributeError."""
    broken = tmp_path / "damaged"
    shutil.copytree(run_dir, broken, ignore=shutil.ignore_patterns("report"))
    path = broken / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text(encoding="utf-8")), **change}))
    argv = ["report", str(broken)]
    if command == "audit":
        argv = ["audit", "memory", str(broken), "--agent", "H00001", "--year", "2"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"floodsim: error: {path}: {problem}")
    assert err.count("\n") == 1


# ---------------------------------------------------------------------------------- CLI
def report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="floodsim")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def test_report_subcommand_writes_into_out_and_prints_the_index_path(run_dir, tmp_path, capsys):
    out = tmp_path / "nested" / "report"
    args = report_parser().parse_args(["report", str(run_dir), "--out", str(out)])
    assert args.func(args) == 0
    assert capsys.readouterr().out == f"{out / 'index.html'}\n"
    assert_report(out / "index.html", run_dir.name)


def test_report_subcommand_of_a_run_without_audit_streams(bare_run_dir, capsys):
    args = report_parser().parse_args(["report", str(bare_run_dir)])
    assert args.func(args) == 0
    index = bare_run_dir / "report" / "index.html"
    assert capsys.readouterr().out == f"{index}\n"
    assert_report(index, bare_run_dir.name)
    assert "<td>none written</td>" in index.read_text(encoding="utf-8")


def test_report_subcommand_raises_report_error_for_a_bad_run_dir(tmp_path):
    args = report_parser().parse_args(["report", str(tmp_path / "missing")])
    with pytest.raises(ReportError, match="missing"):
        args.func(args)


def test_report_of_a_folder_of_neither_kind_names_both(tmp_path, capsys):
    """The command reports a run or an experiment: the error says what makes a folder either."""
    (tmp_path / "notes.txt").write_text("not a run\n", encoding="utf-8")
    assert main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"floodsim: error: {tmp_path}: neither a run directory nor an experiment's folder (no "
        "manifest.json or experiment.json)\n"
    )
    assert not (tmp_path / "report").exists()


def test_floodsim_report_via_main(run_dir, tmp_path, capsys):
    assert main(["report", str(run_dir), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'index.html'}\n"
    missing = tmp_path / "missing"
    assert main(["report", str(missing)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("floodsim: error: ")
    assert str(missing) in lines[0]


# ------------------------------------------------------------------------------ metrics
def test_load_run(run, run_dir):
    assert run.run_dir == run_dir
    assert run.run_id == run_dir.name
    assert run.manifest["counts"]["households"] == 80
    assert run.config["households"]["count"] == 80
    assert run.metrics["year"].tolist() == [1, 2, 3, 4, 5, 6]


def test_adaptation_shares_and_take_up(run):
    shares = metrics.adaptation_shares(run.metrics)
    assert tuple(shares.columns) == metrics.SHARE_COLUMNS
    assert shares.index.tolist() == [1, 2, 3, 4, 5, 6]
    assert ((shares >= 0) & (shares <= 1)).all().all()
    np.testing.assert_allclose(shares["insured_share"], run.metrics["insured_share"])
    take_up = metrics.take_up(run.metrics, last_years=2)
    assert take_up["insured_share"] == pytest.approx(run.metrics["insured_share"].tail(2).mean())
    for last_years in (0, -1, 2.5, True):  # pandas would take -1 as "all but the first year"
        with pytest.raises(ValueError, match="last_years must be a whole number of at least 1"):
            metrics.take_up(run.metrics, last_years=last_years)


def test_damage_and_claims_are_in_millions(run):
    losses = metrics.damage_and_claims(run.metrics)
    assert tuple(losses.columns) == metrics.DAMAGE_COLUMNS
    np.testing.assert_allclose(losses["damage_musd"], run.metrics["total_damage"] / 1e6)
    np.testing.assert_allclose(losses["claims_paid_musd"], run.metrics["claims_paid_amount"] / 1e6)
    assert losses["flooded_households"].dtype == np.int64  # a count, as model_years has it
    assert losses["flooded_households"].tolist() == run.metrics["flooded_households"].tolist()


def test_tp_distribution_has_one_value_per_trace_and_matches_mean_tp(run, run_dir):
    tp = metrics.tp_distribution(run_dir)
    assert list(tp.columns) == ["year", "agent_id", "tp", "tp_level"]
    assert len(tp) == stream_lines(run_dir, "household_traces")
    assert tp["tp"].between(0, 1).all()
    assert set(tp["tp_level"]) <= {"VL", "L", "M", "H", "VH"}
    # Every active household is traced (sample 1.0), so the trace mean is model_years' mean_tp
    # up to the rounding of values in the traces.
    mean_tp = run.metrics.set_index("year")["mean_tp"]
    np.testing.assert_allclose(tp.groupby("year")["tp"].mean(), mean_tp, atol=1e-3)
    summary = metrics.tp_summary(tp)
    # Households active at the start of a year decide in it (relocation happens in decisions).
    deciding = [80, *run.metrics["active_households"].iloc[:-1]]
    assert summary["count"].tolist() == deciding
    assert (summary["q10"] <= summary["median"]).all()
    assert (summary["median"] <= summary["q90"]).all()


def test_memory_composition_counts_every_memory_write(run, run_dir):
    composition = metrics.memory_composition(run_dir)
    np.testing.assert_allclose(
        composition["mean_working"].dropna(), run.metrics["mean_working"].to_numpy()
    )
    writes = composition.filter(like=metrics.WRITE_PREFIX)
    assert {"writes_decision", "writes_flood"} <= set(writes.columns)
    assert int(writes.to_numpy().sum()) == stream_lines(run_dir, "memory_updates")


def test_flood_events_agree_with_model_years(run, run_dir):
    floods = metrics.flood_events(run_dir)
    by_year = run.metrics.set_index("year")
    per_year = floods.groupby("year").size().reindex(by_year.index, fill_value=0)
    assert per_year.tolist() == by_year["flooded_households"].astype(int).tolist()
    damage = floods.groupby("year")["damage"].sum().reindex(by_year.index, fill_value=0.0)
    np.testing.assert_allclose(damage, by_year["total_damage"], rtol=1e-9, atol=1e-6)


def test_household_tables(run_dir):
    floods = metrics.flood_events(run_dir)
    agent = floods.sort_values("damage").iloc[-1]["agent_id"]
    mine = metrics.flood_events(run_dir, agent)
    assert set(mine["agent_id"]) == {agent}
    decisions = metrics.household_decisions(run_dir, agent)
    assert decisions["year"].is_monotonic_increasing
    assert set(decisions["decision"]) <= SKILLS
    assert decisions["TP"].between(0, 1).all()
    retrieved = metrics.household_retrievals(run_dir, agent)
    assert list(retrieved.columns) == [
        "year",
        "rank",
        "id",
        "score",
        "store",
        "item_year",
        "content",
    ]
    assert not retrieved.empty
    assert retrieved["content"].notna().all()  # every retrieved id resolves to a memory text
    assert (retrieved["item_year"] <= retrieved["year"]).all()
    counts = retrieved.groupby("year").size()
    assert (counts <= metrics.load_run(run_dir).config["memory"]["retrieval"]["top_k"]).all()
    assert (
        counts.reindex(decisions["year"], fill_value=0).tolist() == decisions["retrieved"].tolist()
    )


@pytest.mark.parametrize("table", [metrics.household_decisions, metrics.household_retrievals])
def test_every_households_table_is_each_households_in_one(run_dir, table):
    # A notebook looping over households would read the streams once for each of them.
    every = table(run_dir)
    assert every.columns[0] == "agent_id"
    traced = metrics.read_stream_frame(run_dir, "household_traces")["agent_id"]
    assert set(every["agent_id"]) <= set(traced)
    assert len(set(every["agent_id"])) > 1
    pieces = [
        table(run_dir, agent).assign(agent_id=agent) for agent in sorted(set(every["agent_id"]))
    ]
    alone = pd.concat(pieces, ignore_index=True)[every.columns]
    pd.testing.assert_frame_equal(every, alone, check_dtype=False)


def test_tables_of_a_run_without_audit_streams_are_empty(bare_run_dir):
    assert metrics.tp_distribution(bare_run_dir).empty
    assert metrics.tp_summary(metrics.tp_distribution(bare_run_dir)).empty
    assert list(metrics.memory_composition(bare_run_dir).columns) == [
        "mean_working",
        "mean_episodic",
    ]
    assert metrics.flood_events(bare_run_dir).empty
    assert metrics.household_decisions(bare_run_dir, "H00001").empty
    assert metrics.household_retrievals(bare_run_dir, "H00001").empty
    assert list(metrics.household_decisions(bare_run_dir).columns)[:2] == ["agent_id", "year"]
    assert list(metrics.household_retrievals(bare_run_dir).columns)[:2] == ["agent_id", "year"]
    assert metrics.read_stream_frame(bare_run_dir, "household_traces").empty


@pytest.mark.parametrize(
    "table",
    [
        metrics.tp_distribution,
        metrics.flood_events,
        metrics.household_decisions,
        metrics.household_retrievals,
        lambda run_dir: metrics.tp_summary(metrics.tp_distribution(run_dir)).reset_index(),
    ],
    ids=["tp_distribution", "flood_events", "decisions", "retrievals", "tp_summary"],
)
def test_an_empty_table_has_the_column_types_of_a_full_one(run_dir, bare_run_dir, table):
    """Else a notebook's concat of an unaudited run's table with another's has object years."""
    full, empty = table(run_dir), table(bare_run_dir)
    assert not full.empty
    assert empty.empty
    pd.testing.assert_series_equal(empty.dtypes, full.dtypes)
    pd.testing.assert_series_equal(pd.concat([empty, full]).dtypes, full.dtypes)
    assert full["year"].dtype == np.int64


def test_household_decisions_counts_retrievals_in_a_nullable_integer_column(run_dir, tmp_path):
    decisions = metrics.household_decisions(run_dir)
    assert decisions["retrieved"].dtype == "Int64"
    assert decisions["valid"].dtype == bool
    minimal = simulate(tmp_path, "audit.level=minimal", "households.count=20", "years=2")
    retrieved = metrics.household_decisions(minimal)["retrieved"]
    assert retrieved.dtype == "Int64"  # not object: the level records no retrievals
    assert retrieved.isna().all()
    assert len(retrieved) > 0


def test_stream_tables_refuse_what_is_not_a_run_rather_than_read_it_as_unaudited(tmp_path):
    file = tmp_path / "file.txt"
    file.write_text("x", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    tables = [
        metrics.tp_distribution,
        metrics.flood_events,
        metrics.household_decisions,
        metrics.household_retrievals,
        lambda folder: metrics.read_stream_frame(folder, "household_traces"),
    ]
    for table in tables:
        with pytest.raises(InputError, match=r"no such folder"):
            table(tmp_path / "no_such_run")
        with pytest.raises(InputError, match=r"a file, not a folder"):
            table(file)
        with pytest.raises(metrics.RunDirError, match=r"empty: not a run directory: manifest"):
            table(tmp_path / "empty")


def test_an_unknown_stream_is_refused_not_empty(run_dir, bare_run_dir):
    for folder in (run_dir, bare_run_dir):
        with pytest.raises(InputError, match="unknown audit stream 'traces'; expected one of"):
            metrics.read_stream_frame(folder, "traces")


_READ_FROM = [
    (metrics.household_decisions, "household_traces"),
    (metrics.household_retrievals, "household_traces"),
    (metrics.flood_events, "memory_updates"),
]


@pytest.mark.parametrize(("table", "stream"), _READ_FROM, ids=["decisions", "retrievals", "floods"])
def test_a_household_the_streams_lack_is_refused_not_an_empty_table(
    run_dir, tmp_path, table, stream
):
    """A typo, or a household the sample left out, is not a household that did nothing."""
    with pytest.raises(InputError, match=f"household 'H99999' does not appear in {stream}$"):
        table(run_dir, "H99999")
    sampled = simulate(tmp_path, "audit.sample=0.3", "households.count=20", "years=2")
    traced = set(metrics.household_decisions(sampled)["agent_id"])
    left_out = min({f"H{i:05d}" for i in range(1, 21)} - traced)  # ids run from H00001
    with pytest.raises(
        InputError, match=f"does not appear in {stream} \\(audited sample: 0\\.3\\)$"
    ):
        table(sampled, left_out)


def test_a_household_that_remembers_no_flood_has_an_empty_table(run_dir):
    every = metrics.flood_events(run_dir)
    dry = min(set(metrics.household_decisions(run_dir)["agent_id"]) - set(every["agent_id"]))
    floods = metrics.flood_events(run_dir, dry)
    assert floods.empty
    pd.testing.assert_series_equal(floods.dtypes, every.dtypes)


def test_an_id_that_is_not_a_string_is_refused_by_each_household_table(run_dir):
    for table in (metrics.household_decisions, metrics.household_retrievals, metrics.flood_events):
        with pytest.raises(InputError, match=r"agent_id must be a household's id .* got 1$"):
            table(run_dir, 1)


def test_a_damaged_value_in_a_decision_is_named_not_passed_on(run_dir, tmp_path):
    damaged = tmp_path / run_dir.name
    shutil.copytree(run_dir, damaged)
    traces = damaged / "household_traces.jsonl"
    lines = traces.read_bytes().splitlines(keepends=True)
    record = json.loads(lines[9])
    record["reasoning"]["constructs"]["TP"]["value"] = "high"
    lines[9] = json.dumps(record).encode() + b"\n"
    traces.write_bytes(b"".join(lines))
    with pytest.raises(InputError, match=r"household_traces\.jsonl: line 10 is malformed: .*TP"):
        metrics.household_decisions(damaged)


def test_read_stream_frame_flattens_nested_fields(run_dir):
    traces = metrics.read_stream_frame(run_dir, "household_traces")
    assert {"reasoning.constructs.TP.value", "action.decision_skill"} <= set(traces.columns)


def test_combine_runs_adds_swept_keys(run_dir, bare_run_dir):
    frame = metrics.combine_runs([run_dir, bare_run_dir], keys=["memory.decay_rate", "no.such"])
    assert list(frame.columns[:4]) == ["run_id", "seed", "decay_rate", "such"]
    assert len(frame) == 12
    assert set(frame["decay_rate"]) == {metrics.load_run(run_dir).config["memory"]["decay_rate"]}
    assert frame["such"].isna().all()
    assert metrics.combine_runs([]).empty


def test_combined_runs_that_share_an_id_are_told_apart_by_folder(run_dir, tmp_path):
    twin = tmp_path / "other_experiment" / run_dir.name  # another folder, the same run id
    shutil.copytree(run_dir, twin)
    frame = metrics.combine_runs([run_dir, twin])
    assert set(frame["run_id"]) == {str(run_dir), str(twin)}
    with pytest.raises(ValueError, match="has a year more than once"):
        event_study(frame.assign(run_id="same"), flood_year=None)


def test_combine_runs_takes_a_key_once_and_refuses_one_that_is_a_column(run_dir):
    frame = metrics.combine_runs([run_dir], keys=["memory.decay_rate", "memory.decay_rate"])
    assert list(frame.columns[:4]) == ["run_id", "seed", "decay_rate", "year"]
    alone = metrics.combine_runs([run_dir], keys="memory.decay_rate")  # one key, as a string
    pd.testing.assert_frame_equal(alone, frame)
    for key in ("seed", "year"):
        with pytest.raises(InputError, match=f"key '{key}' would be a second '{key}' column"):
            metrics.combine_runs([run_dir], keys=[key])


def test_combine_runs_keeps_keys_apart_that_end_alike(run_dir):
    keys = [
        "decision.pmt.asc.buy_insurance",
        "decision.pmt.response_efficacy.buy_insurance",
        "decision.llm.seed",
    ]
    frame = metrics.combine_runs([run_dir], keys=keys)
    config = metrics.load_run(run_dir).config["decision"]
    assert list(frame.columns[:5]) == ["run_id", "seed", *keys]
    assert set(frame[keys[0]]) == {config["pmt"]["asc"]["buy_insurance"]}
    assert set(frame[keys[1]]) == {config["pmt"]["response_efficacy"]["buy_insurance"]}
    assert set(frame["seed"]) == {metrics.load_run(run_dir).manifest["seed"]}


def test_check_run_dir_rejects_a_file(tmp_path):
    file = tmp_path / "file.txt"
    file.write_text("x", encoding="utf-8")
    with pytest.raises(metrics.RunDirError, match="not a directory"):
        metrics.check_run_dir(file)


# -------------------------------------------------------------------------------- plots
def texts(fig: Figure) -> str:
    parts = [fig.get_suptitle()]
    for ax in fig.axes:
        parts += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        parts += [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            parts += [t.get_text() for t in legend.get_texts()]
    for legend in fig.legends:  # placed outside the axes
        parts += [t.get_text() for t in legend.get_texts()]
    return "\n".join(parts)


def test_figures_have_titles_labels_and_legends(run, run_dir):
    composition = metrics.memory_composition(run_dir)
    figures = {
        "adaptation": plots.plot_adaptation(run.metrics, run_id="R"),
        "damage": plots.plot_damage_claims(run.metrics, run_id="R"),
        "memory": plots.plot_memory(composition, working_capacity=10, run_id="R"),
        "threat": plots.plot_threat(metrics.tp_distribution(run_dir), run_id="R"),
    }
    expected = {
        "adaptation": [
            "Adaptation over time (R)",
            "insured, floodplain (AE, A, VE, V)",
            "moved away",
            "share",
        ],
        "damage": ["$ million", "flooded households", "claims paid", "simulation year"],
        "memory": ["items per household", "episodic", "writes by source", "decision"],
        "threat": ["threat appraisal TP", "mean", "80 traced households"],
    }
    for name, fig in figures.items():
        assert isinstance(fig, Figure)
        text = texts(fig)
        for snippet in expected[name]:
            assert snippet in text, (name, snippet)


def test_the_threat_figure_counts_households_as_they_move_away():
    rows = [(1, f"H{n}", 0.3, "L") for n in range(1200)]
    rows += [(2, f"H{n}", 0.4, "L") for n in range(1100)]
    tp = pd.DataFrame(rows, columns=["year", "agent_id", "tp", "tp_level"])
    assert "1,100 to 1,200 traced households per year" in texts(plots.plot_threat(tp))
    assert "1,200 traced households per year" in texts(plots.plot_threat(tp[tp["year"] == 1]))


def test_a_sampled_audit_labels_its_write_counts_as_the_samples(tmp_path):
    sampled = metrics.load_run(simulate(tmp_path, "audit.sample=0.5"))
    plotted = plots.plot_memory(metrics.memory_composition(sampled.run_dir))
    assert "memory writes (all households)" in texts(plotted)
    memory = report._figures(sampled)["memory.png"]
    assert "memory writes (audited households only)" in texts(memory)


def test_figures_without_audit_streams_say_so(bare_run_dir):
    run = metrics.load_run(bare_run_dir)
    threat = texts(plots.plot_threat(metrics.tp_distribution(bare_run_dir), metrics=run.metrics))
    assert "traces were not written" in threat
    assert "mean TP, all households" in threat
    memory = texts(plots.plot_memory(metrics.memory_composition(bare_run_dir)))
    assert "memory_updates stream not written" in memory


def test_the_threat_figure_of_an_audited_sample_without_households_does_not_blame_the_policy(
    tmp_path,
):
    sampled = metrics.load_run(simulate(tmp_path, "households.count=5", "audit.sample=0.01"))
    assert metrics.household_decisions(sampled.run_dir).empty  # 5 x 0.01 draws nobody
    said = texts(report._figures(sampled)["threat.png"])
    assert "hold no household (audited sample: 0.01)" in said
    assert "carry no appraisals" not in said


def test_the_threat_figure_of_scripted_decisions_says_they_appraise_no_threat(tmp_path):
    table = tmp_path / "decisions.csv"
    table.write_text("agent_id,year,skill_id\nH00001,1,do_nothing\n", encoding="utf-8")
    scripted = metrics.load_run(
        simulate(tmp_path, "decision.policy=scripted", f"decision.script={table}")
    )
    figure = report._figures(scripted)["threat.png"]
    said = texts(figure)
    assert "(decision.policy scripted) carry no appraisals" in said
    assert "read from its script" in said
    assert "traces were not written" not in said
    (ax,) = figure.axes
    assert not ax.lines  # mean_tp is NaN every year: no line, and no legend entry for one
    assert ax.get_legend() is None
    assert ax.get_xlim() == (0.5, 6.5)  # the run's years


def test_a_one_year_run_draws_its_shares_as_points(tmp_path):
    one_year = metrics.load_run(simulate(tmp_path, "years=1", "audit.level=off"))
    figure = plots.plot_adaptation(one_year.metrics)
    lines = [line for ax in figure.axes for line in ax.lines]
    assert lines
    assert all(line.get_marker() == "o" for line in lines)
    several = plots.plot_adaptation(metrics.load_run(simulate(tmp_path / "six")).metrics)
    assert all(line.get_marker() in ("None", None, "") for ax in several.axes for line in ax.lines)


def test_a_one_year_run_draws_its_memory_and_its_sweep_lines_as_points(tmp_path):
    """Lines through one year drew nothing but a legend (helper 80)."""
    run_dir = simulate(tmp_path, "years=1")
    composition = metrics.memory_composition(run_dir)
    sizes = plots.plot_memory(composition, working_capacity=10).axes[0]
    stored = [line for line in sizes.lines if line.get_label() in ("working", "episodic")]
    assert len(stored) == 2
    assert all(line.get_marker() == "o" for line in stored)
    frame = metrics.load_run(run_dir).metrics.assign(run_id="r", point=0)
    (line,) = plots.plot_sweep(frame, "point").axes[0].lines
    assert line.get_marker() == "o"


def test_plot_sweep_draws_one_line_and_band_per_level(run):
    frame = pd.concat(
        [run.metrics.assign(decay_rate=rate, seed=seed) for rate in (0.8, 0.95) for seed in (1, 2)],
        ignore_index=True,
    )
    fig = plots.plot_sweep(frame, "decay_rate")
    (ax,) = fig.axes
    assert len(ax.lines) == 2
    assert len(ax.collections) == 2
    assert ax.get_legend().get_title().get_text() == "band: min-max over replicates"
    across = plots.plot_sweep(frame, "decay_rate", band="min-max over runs, across every budget")
    assert across.axes[0].get_legend().get_title().get_text() == (
        "band: min-max over runs, across every budget"
    )
    assert "decay_rate = 0.8 (n = 2)" in texts(fig)
    # A null level (e.g. government.budget: no limit) is a design point like the others.
    budgets = pd.concat(
        [run.metrics.assign(budget=budget) for budget in (None, None, 1e6)], ignore_index=True
    )
    legend = texts(plots.plot_sweep(budgets, "budget"))
    assert "budget = null (n = 2)" in legend
    assert "budget = 1000000.0 (n = 1)" in legend
    zone_ae = plots.plot_sweep(frame, "decay_rate", "insured_share_ae")
    assert isinstance(zone_ae.axes[0].yaxis.get_major_formatter(), PercentFormatter)
    assert zone_ae.axes[0].get_ylim()[0] == 0


def test_a_run_without_floods_says_so_on_its_damage_figure(tmp_path):
    dry = metrics.load_run(
        simulate(tmp_path, "hazard.source=scripted", "hazard.events={}", "audit.level=off")
    )
    assert not dry.metrics["flooded_households"].any()
    assert "no household was flooded in this run" in texts(plots.plot_damage_claims(dry.metrics))
    wet = metrics.load_run(simulate(tmp_path / "wet", "audit.level=off"))
    assert wet.metrics["flooded_households"].any()
    assert "no household was flooded" not in texts(plots.plot_damage_claims(wet.metrics))


def test_a_zone_without_households_gets_no_line_or_legend_entry(tmp_path):
    # Every home below the base flood elevation: nobody is outside the floodplain.
    town = metrics.load_run(simulate(tmp_path, "households.bfe_ft=100", "audit.level=off"))
    assert town.metrics["insured_share_x"].isna().all()
    top = plots.plot_adaptation(town.metrics).axes[0]
    labels = [line.get_label() for line in top.lines]
    assert labels == ["insured, all zones", "insured, floodplain (AE, A, VE, V)"]
    assert [t.get_text() for t in top.get_legend().get_texts()] == labels


def test_a_minimal_run_refuses_what_its_traces_do_not_hold(tmp_path):
    """Its traces name every audited household but hold no memory: not empty tables."""
    minimal = simulate(tmp_path, "audit.level=minimal", "households.count=20", "years=2")
    for table, named in ((retrievals, "retrievals"), (memory_counts, "memory_counts")):
        with pytest.raises(AuditReadError, match=f"{named}: the household_traces .* no memory"):
            table(minimal, source="traces")
    with pytest.raises(InputError, match=r"'H99999' does not appear in household_traces$"):
        metrics.household_retrievals(minimal, "H99999")
    assert metrics.household_retrievals(minimal, "H00001").empty  # traced, nothing retrieved
    off = simulate(tmp_path / "off", "audit.level=off", "households.count=20", "years=2")
    frame = metrics.read_stream_frame(off, "household_traces")
    assert frame.empty
    assert list(frame.columns) == ["schema_version", "run_id", "year", "agent_id"]

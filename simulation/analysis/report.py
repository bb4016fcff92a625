"""``floodsim report``: a static HTML page with the key figures of one run.

:func:`write_report` writes ``adaptation.png``, ``damage_claims.png``, ``memory.png``,
``threat.png`` and ``index.html`` (run facts from the manifest and the figures with captions)
into ``RUN_DIR/report/`` or another folder. The page references the PNGs by relative path, so
the folder can be copied or served as it is.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.analysis.metrics import (
    RunDirError,
    household_decisions,
    load_run,
    memory_composition,
    stream_path,
    tp_distribution,
)
from simulation.audit.readers import AuditReadError, sample_hint

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from simulation.analysis.metrics import RunData

__all__ = ["FIGURES", "REPORT_DIR", "ReportError", "figures_html", "page_html", "write_report"]

#: Default report folder inside a run directory.
REPORT_DIR = "report"
#: Figure files of a report, in page order, with their captions.
FIGURES = {
    "adaptation.png": (
        "Adaptation over time. Top: share of active households holding flood insurance at year "
        "end, overall, in the mapped 100-year floodplain (zones AE, A, VE, V) and outside it "
        "(X, B, C, D). "
        "Bottom, on its own scale: share of active households that have elevated their home, "
        "and share of all households that have moved away."
    ),
    "damage_claims.png": (
        "Flood losses per year. Bars: total flood damage to structures and contents and "
        "insurance claims paid, in millions of dollars (left axis). Line: households whose home "
        "was reached by flood water that year (right axis)."
    ),
    "memory.png": (
        "Household memory. Mean number of items in working and episodic memory per active "
        "household at year end and, when the run wrote the memory_updates stream, the memory "
        "writes of each year by source (flood, claim, decision, policy, neighbour, ...)."
    ),
    "threat.png": (
        "Threat appraisal (protection motivation theory): distribution of the threat appraisal "
        "TP in [0, 1] across traced households each year (box: quartiles; whiskers: 1.5 IQR; "
        "diamonds: mean). TP rises with remembered floods and fades as memories decay."
    ),
}
_DPI = 110
_AUDIT_STREAMS = ("household_traces", "memory_updates", "consolidation", "tool_invocations")


class ReportError(RunDirError):
    """The report cannot be written; the message names the path and what is missing."""


def _figures(run: RunData, progress: bool | None = False) -> dict[str, Figure]:
    # Imported here so `floodsim --help` and the CLI's error mapping (which imports this module
    # for ReportError) do not pay matplotlib's start-up time.
    from simulation.analysis import plots  # noqa: PLC0415

    memory_config = run.config.get("memory") or {}
    sample = (run.config.get("audit") or {}).get("sample", 1.0)
    everyone = sample in (1, 1.0) and not isinstance(sample, bool)
    writers = "all households" if everyone else "audited households only"
    return {
        "adaptation.png": plots.plot_adaptation(run.metrics, run_id=run.run_id),
        "damage_claims.png": plots.plot_damage_claims(run.metrics, run_id=run.run_id),
        "memory.png": plots.plot_memory(
            memory_composition(run.run_dir, run.metrics, progress=progress),
            working_capacity=memory_config.get("working_capacity"),
            run_id=run.run_id,
            writers=writers,
        ),
        "threat.png": plots.plot_threat(
            tp_distribution(run.run_dir, progress=progress),
            metrics=run.metrics,
            run_id=run.run_id,
            why_empty=_why_no_threat(run),
        ),
    }


def _why_no_threat(run: RunData) -> str:
    """What the threat figure says when no trace carries a threat appraisal (TP)."""
    from simulation.analysis import plots  # noqa: PLC0415 - see _figures

    if not stream_path(run.run_dir, "household_traces"):
        return plots.NO_TRACES
    if household_decisions(run.run_dir).empty:  # an audited sample that drew no household
        return plots.no_traced_household(sample_hint(run.run_dir, run.manifest))
    return plots.no_appraisal((run.config.get("decision") or {}).get("policy"))


def _facts(run: RunData) -> list[tuple[str, Any]]:
    manifest = run.manifest
    counts = manifest.get("counts") or {}
    versions = manifest.get("versions") or {}
    decision = (run.config.get("decision") or {}).get("policy")
    hazard = (run.config.get("hazard") or {}).get("source")
    streams = [name for name in _AUDIT_STREAMS if stream_path(run.run_dir, name)]
    duration = manifest.get("duration_s")
    return [
        ("run id", run.run_id),
        ("status", manifest.get("status", "unknown")),
        ("households", counts.get("households", "?")),
        ("years", counts.get("years", len(run.metrics))),
        ("seed", manifest.get("seed", "?")),
        ("config hash", manifest.get("config_hash", "?")),
        ("decision policy", decision or "?"),
        ("hazard source", hazard or "?"),
        ("started", manifest.get("started_at", "?")),
        ("duration", f"{duration} s" if duration is not None else "?"),
        ("floodsim version", versions.get("floodsim", "?")),
        ("audit streams", ", ".join(streams) if streams else "none written"),
    ]


def _html(run: RunData) -> str:
    rows = "\n".join(
        f"    <tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in _facts(run)
    )
    figures = figures_html(
        {name: (html.escape(caption.split(".")[0]), caption) for name, caption in FIGURES.items()}
    )
    return page_html(f"floodsim report: {run.run_id}", f"<table>\n{rows}\n</table>\n{figures}")


def figures_html(figures: dict[str, tuple[str, str]]) -> str:
    """``<figure>`` elements: file name -> (its alt text, already escaped; its caption)."""
    return "\n".join(
        f'  <figure>\n    <img src="{html.escape(name)}" alt="{alt}">\n'
        f"    <figcaption>{html.escape(caption)}</figcaption>\n  </figure>"
        for name, (alt, caption) in figures.items()
    )


def page_html(title: str, body: str) -> str:
    """A report's page: ``title`` (escaped here) as its title and heading, then ``body``."""
    title = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
  body {{ font-family: system-ui, sans-serif; max-width: 1160px; margin: 2em auto;
         padding: 0 1em; color: #222; }}
  table {{ border-collapse: collapse; margin-bottom: 2em; }}
  th, td {{ text-align: left; padding: 0.25em 1em 0.25em 0; border-bottom: 1px solid #ddd; }}
  th {{ font-weight: 600; color: #555; }}
  td {{ font-family: ui-monospace, monospace; }}
  figure {{ margin: 0 0 2.5em 0; }}
  img {{ max-width: 100%; border: 1px solid #eee; }}
  figcaption {{ color: #444; font-size: 0.95em; margin-top: 0.4em; }}
</style>
</head>
<body>
<h1>{title}</h1>
{body}
</body>
</html>
"""


def write_report(
    run_dir: str | Path, out_dir: str | Path | None = None, *, progress: bool | None = None
) -> Path:
    """Write the figures and ``index.html`` of a run.

    Args:
        run_dir: The run directory (with ``manifest.json`` and ``model_years.csv``).
        out_dir: Folder for the report (default ``RUN_DIR/report``); created when missing.
        progress: Count the audit lines read on a bar per stream on stderr (a report of
            10,000 households over 30 years at ``standard`` reads about 900,000 of them);
            ``None``: only when stderr is a terminal.

    Returns:
        The path of ``index.html``.

    Raises:
        ReportError: When ``run_dir`` is not a readable run directory or the report folder
            cannot be written; one line naming the path and what is missing.
    """
    try:
        run = load_run(run_dir)
    except RunDirError as err:
        raise ReportError(str(err)) from None
    target = Path(out_dir) if out_dir is not None else run.run_dir / REPORT_DIR
    try:
        figures = _figures(run, progress)
    except AuditReadError as err:
        # A corrupt audit stream (not a missing one: those give figures that say so).
        raise ReportError(str(err)) from None
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name, figure in figures.items():
            figure.savefig(target / name, dpi=_DPI)
        index = target / "index.html"
        index.write_text(_html(run), encoding="utf-8")
    except OSError as err:
        msg = f"{target}: cannot write the report ({err.strerror or err})"
        raise ReportError(msg) from None
    return index

"""Analysis of run directories: tables, figures and the HTML report of ``floodsim report``.

Modules: :mod:`.metrics` (DataFrames from run directories), :mod:`.plots` (matplotlib
figures), :mod:`.report` (PNGs and ``index.html``) and :mod:`.commands` (the CLI subcommand).

The package itself imports nothing heavy; import the submodule you need, e.g.
``from simulation.analysis.metrics import load_run``.
"""

from __future__ import annotations

__all__: list[str] = []

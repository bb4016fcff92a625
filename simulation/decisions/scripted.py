"""The ``scripted`` decision policy: every decision read from a table.

For tests and for replaying observed behaviour (DESIGN.md section 5). The table is a CSV file
with one row per decision::

    agent_id,year,skill_id
    H00001,1,buy_insurance
    H00001,2,buy_insurance
    H00002,3,elevate_house

A household-year without a row proposes the registry's default skill (``do_nothing`` in the
shipped registry). The registry validates every scripted proposal like any other: a skill the
household may not take that year (not eligible, unaffordable, already done) is not executed,
the default skill is, and the year's ``invalid_proposals`` counts it. Scripted decisions carry no
threat or coping appraisal and draw no random numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from simulation.decisions.base import Proposal

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence
    from pathlib import Path

    import numpy as np

    from simulation.agents.state import HouseholdState
    from simulation.decisions.base import Option
    from simulation.memory import ScoredMemory

__all__ = ["SCRIPT_COLUMNS", "ScriptError", "ScriptedPolicy", "load_script"]

#: Columns a decision table must have.
SCRIPT_COLUMNS = ("agent_id", "year", "skill_id")


class ScriptError(ValueError):
    """A decision table that cannot be used; the message names the file and the row."""


def load_script(
    path: Path, skill_ids: Collection[str], households: Collection[str] | None = None
) -> dict[tuple[str, int], str]:
    """Read a decision table into ``{(agent_id, year): skill_id}``.

    Args:
        path: The CSV file.
        skill_ids: The registry's skills; every row must name one of them.
        households: The run's agent ids; every row must name one of them (None: not checked).

    Raises:
        ScriptError: For a missing or unreadable file, a missing column, a household that is
            not one of ``households``, a year that is not a whole number from 1, an unknown
            skill, or two rows for one household-year. Rows are numbered as in a spreadsheet
            (the header is row 1).
    """
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except FileNotFoundError:
        msg = f"{path}: file not found"
        raise ScriptError(msg) from None
    except pd.errors.EmptyDataError:
        msg = f"{path}: empty file: expected a header row {','.join(SCRIPT_COLUMNS)}"
        raise ScriptError(msg) from None
    except (OSError, pd.errors.ParserError, UnicodeDecodeError) as err:
        msg = f"{path}: cannot read the table: {err}"
        raise ScriptError(msg) from None
    missing = [c for c in SCRIPT_COLUMNS if c not in table.columns]
    if missing:
        columns = ", ".join(SCRIPT_COLUMNS)
        msg = f"{path}: missing required column {missing[0]!r} (columns: {columns})"
        raise ScriptError(msg)
    decisions: dict[tuple[str, int], str] = {}
    for row, (agent_id, year_text, skill_id) in enumerate(
        table[list(SCRIPT_COLUMNS)].itertuples(index=False, name=None), start=2
    ):
        where = f"{path}: row {row}"
        if not agent_id:
            msg = f"{where}, column agent_id: empty"
            raise ScriptError(msg)
        if households is not None and agent_id not in households:
            # Usually a table written for another population: say how much of it is foreign.
            foreign = (~table["agent_id"].isin(households)).sum()
            msg = (
                f"{where}, column agent_id: {agent_id!r} is not a household of this run "
                f"({foreign} of {len(table)} rows name unknown households)"
            )
            raise ScriptError(msg)
        year = int(year_text) if year_text.isdigit() else 0
        if year < 1:
            msg = f"{where}, column year: expected a whole number from 1, got {year_text!r}"
            raise ScriptError(msg)
        if skill_id not in skill_ids:
            msg = f"{where}, column skill_id: unknown skill {skill_id!r} ({', '.join(skill_ids)})"
            raise ScriptError(msg)
        if (agent_id, year) in decisions:
            msg = f"{where}: a second decision for {agent_id} in year {year}"
            raise ScriptError(msg)
        decisions[agent_id, year] = skill_id
    return decisions


class ScriptedPolicy:
    """Proposes what a decision table says; satisfies :class:`~simulation.decisions.DecisionPolicy`.

    Args:
        decisions: ``{(agent_id, year): skill_id}``, as :func:`load_script` reads it.
        default_skill: Proposed for household-years the table does not list.
    """

    def __init__(self, decisions: Mapping[tuple[str, int], str], default_skill: str) -> None:
        self.decisions = dict(decisions)
        self.default_skill = default_skill

    def decide(
        self,
        state: HouseholdState,
        memories: Sequence[ScoredMemory],
        options: Sequence[Option],
        context: Mapping[str, Any],
        rng: np.random.Generator,
        *,
        explain: bool = True,
    ) -> Proposal:
        """The table's skill for this household and year, else the default skill."""
        year = int(context["year"])
        skill_id = self.decisions.get((state.agent_id, year))
        if skill_id is None:
            justification = f"no scripted decision for year {year}: {self.default_skill}"
            skill_id = self.default_skill
        else:
            justification = f"scripted decision for year {year}"
        return Proposal(skill_id=skill_id, justification=justification if explain else "")

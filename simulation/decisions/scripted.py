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

A household that relocated has left the model: it decides nothing in later years, so rows for
those years are never read. The run warns once, when it has ended
(:class:`IgnoredScriptRowsWarning`), naming how many rows that left unused and the first few.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import TYPE_CHECKING, Any

import pandas as pd

from simulation.decisions.base import Proposal
from simulation.input_files import check_not_a_device, longer_row

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence
    from pathlib import Path

    import numpy as np

    from simulation.agents.state import HouseholdState
    from simulation.decisions.base import Option
    from simulation.memory import ScoredMemory

__all__ = [
    "SCRIPT_COLUMNS",
    "IgnoredScriptRowsWarning",
    "Script",
    "ScriptError",
    "ScriptedPolicy",
    "load_script",
]

#: Columns a decision table must have.
SCRIPT_COLUMNS = ("agent_id", "year", "skill_id")
#: Ignored rows a warning names one by one; it counts the rest.
_NAMED_ROWS = 3


class ScriptError(ValueError):
    """A decision table that cannot be used; the message names the file and the row."""


class IgnoredScriptRowsWarning(UserWarning):
    """Decision-table rows a run never used: their household had relocated (left the model)."""


class Script(dict[tuple[str, int], str]):
    """A decision table: ``{(agent_id, year): skill_id}`` in the table's order.

    Attributes:
        rows: The row of each decision, in the same order, numbered as a spreadsheet shows the
            file (the header is row 1, and blank lines count).
    """

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[int] = []


def load_script(
    path: Path, skill_ids: Collection[str], households: Collection[str] | None = None
) -> Script:
    """Read a decision table into ``{(agent_id, year): skill_id}``.

    Args:
        path: The CSV file.
        skill_ids: The registry's skills; every row must name one of them.
        households: The run's agent ids; every row must name one of them (None: not checked).

    Returns:
        The decisions in the table's order, with their row numbers. Blank lines are skipped but
        counted, so that a row number is the line an editor shows.

    Raises:
        ScriptError: For a missing or unreadable file, a missing column, a household that is
            not one of ``households``, a year that is not a whole number from 1, an unknown
            skill, or two rows for one household-year. Rows are numbered as in a spreadsheet
            (the header is row 1).
    """
    table, rows = _read_table(path)
    missing = [c for c in SCRIPT_COLUMNS if c not in table.columns]
    if missing:
        # What the header holds, beside what it needs: a typo there is then seen at once.
        needed, found = ", ".join(SCRIPT_COLUMNS), ", ".join(map(str, table.columns))
        msg = f"{path}: missing required column {missing[0]!r} (needs {needed}; found {found})"
        raise ScriptError(msg)
    decisions = Script()
    for row, (agent_id, year_text, skill_id) in zip(
        rows, table[list(SCRIPT_COLUMNS)].itertuples(index=False, name=None), strict=True
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
        # ASCII digits only: "²" is a digit to str.isdigit but no number to int().
        year = int(year_text) if year_text.isascii() and year_text.isdigit() else 0
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
        decisions.rows.append(row)
    return decisions


def _read_table(path: Path) -> tuple[pd.DataFrame, list[int]]:
    """The table's rows of cells, named by its header, and the line each row is on.

    Raises:
        ScriptError: For a missing, unreadable, empty or malformed file, or a column name the
            header repeats.
    """
    try:
        check_not_a_device(path)  # pandas would read /dev/zero until memory ran out
        # The header is read as a row, so that pandas neither renames a repeated column name
        # nor takes a row one field longer than the header for an index and a shifted row.
        raw = pd.read_csv(
            path, dtype=str, keep_default_na=False, skipinitialspace=True, header=None
        )
        rows = _row_numbers(path, len(raw) - 1)
    except FileNotFoundError:
        msg = f"{path}: file not found"
        raise ScriptError(msg) from None
    except pd.errors.EmptyDataError:
        msg = f"{path}: empty file: expected a header row {','.join(SCRIPT_COLUMNS)}"
        raise ScriptError(msg) from None
    except OSError as err:
        msg = f"{path}: cannot read the table: {err.strerror or err}"
        raise ScriptError(msg) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as err:
        if longer := longer_row(err):  # as a household table says it
            msg = f"{path}: row {longer[0]}: {longer[1]}"
        else:
            msg = f"{path}: cannot read the table: {err}"
        raise ScriptError(msg) from None
    header = [str(name) for name in raw.iloc[0].fillna("")]
    for name, count in Counter(header).items():
        if count > 1 and name:
            msg = f"{path}: row 1, column {name}: repeated in the header"
            raise ScriptError(msg)
    table = raw.iloc[1:].fillna("")  # a short row's missing cells are empty
    table.columns = header
    return table, rows


def _row_numbers(path: Path, count: int) -> list[int]:
    """The line of each of the ``count`` rows pandas read from ``path`` (the header is line 1).

    pandas skips blank lines, so its row index alone would number every row after one too low.
    A table whose lines do not match its rows one to one (a quoted field spanning lines) is
    numbered as if it had no blank lines.
    """
    try:
        lines = [n for n, line in enumerate(path.read_bytes().splitlines(), 1) if line.strip()]
    except OSError:
        lines = []
    if len(lines) == count + 1:
        return lines[1:]
    return list(range(2, count + 2))


class ScriptedPolicy:
    """Proposes what a decision table says; satisfies :class:`~simulation.decisions.DecisionPolicy`.

    Args:
        decisions: ``{(agent_id, year): skill_id}`` in the table's order, as :func:`load_script`
            reads it.
        default_skill: Proposed for household-years the table does not list.
        rows: The table row of each decision, for warnings (default: a :class:`Script`'s own
            ``rows``, else 2, 3, ... as in a table without blank lines).
    """

    def __init__(
        self,
        decisions: Mapping[tuple[str, int], str],
        default_skill: str,
        rows: Sequence[int] | None = None,
    ) -> None:
        self.decisions = dict(decisions)
        self.default_skill = default_skill
        if rows is None:
            rows = decisions.rows if isinstance(decisions, Script) else None
        self.rows = list(rows) if rows is not None else list(range(2, len(self.decisions) + 2))
        if len(self.rows) != len(self.decisions):
            msg = f"rows: {len(self.rows)} numbers for {len(self.decisions)} decisions"
            raise ValueError(msg)

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

    def ignored_rows(
        self, relocated_in: Mapping[str, int], last_year: int
    ) -> list[tuple[int, str, int]]:
        """The rows a run never read because their household had relocated before their year.

        Args:
            relocated_in: The year each relocated household moved away, by agent id.
            last_year: The last year run (rows for the years after the run's last are warned
                about when the run is built, not here).

        Returns:
            ``(row, agent_id, year)`` of every such row, in the table's order.
        """
        return [
            (row, agent_id, year)
            for row, (agent_id, year) in zip(self.rows, self.decisions, strict=True)
            if (moved := relocated_in.get(agent_id)) is not None and moved < year <= last_year
        ]

    def warn_ignored_rows(
        self, relocated_in: Mapping[str, int], last_year: int, where: str
    ) -> None:
        """Warn once about the rows :meth:`ignored_rows` finds (nothing when there are none).

        Args:
            relocated_in: The year each relocated household moved away, by agent id.
            last_year: The last year run.
            where: What the message starts with: the config file and key.
        """
        ignored = self.ignored_rows(relocated_in, last_year)
        if not ignored:
            return
        named = ", ".join(
            f"row {row} ({agent_id}, year {year})" for row, agent_id, year in ignored[:_NAMED_ROWS]
        )
        more = len(ignored) - _NAMED_ROWS
        rows = "1 row was" if len(ignored) == 1 else f"{len(ignored):,} rows were"
        message = (
            f"{where}: {rows} ignored because the household had relocated (left the model) in an "
            f"earlier year: {named}{f' and {more:,} more' if more > 0 else ''}"
        )
        warnings.warn(message, IgnoredScriptRowsWarning, stacklevel=3)

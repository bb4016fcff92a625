"""Checkpoints: the state a run needs to continue exactly where it stopped.

A checkpoint is taken at the end of a year. It holds everything that changes during a run, as
plain JSON: each household's state, memory (:meth:`CognitiveMemory.to_dict`), latest decision
(which a household that moved away keeps to the end) and what its neighbours can observe of it;
the government's and insurer's levers; every random stream (Mesa's ``random`` and the model's
numpy generators); the metrics collected so far; and the byte offset and line count each audit
stream had committed. Everything else (population layout, registry, curves, hazard source) is
rebuilt from the run's resolved config, deterministically.

A checkpoint is read back whole and checked before any of it is used (:class:`Checkpoint`):
every value has its JSON type and range, the households, metrics and audit streams are those of
the run's config, and the skills it names are in the run's registry. A damaged or edited file is
refused with the first problem's path (``households.12.state.insured_years: ...``) rather than
failing years later, or resuming a run whose results nobody could reproduce.

The file is written to a temporary name, flushed to disk and renamed, so a crash at any moment
leaves either the previous checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import fields
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired, get_type_hints

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictStr,
    StringConstraints,
    TypeAdapter,
    ValidationError,
)
from typing_extensions import TypedDict

from simulation.agents.institutions import RATE_DIGITS, SUBSIDY_DIGITS
from simulation.agents.state import FloodZone, HouseholdState
from simulation.atomic import replace_file
from simulation.config import describe_validation_error
from simulation.cycle import ADOPTION_PHRASES
from simulation.memory import CognitiveMemory
from simulation.memory.snapshot import MemorySnapshot  # noqa: TC001 - pydantic reads it
from simulation.model import METRIC_COLUMNS, DecisionSummary

if TYPE_CHECKING:
    from pathlib import Path

    from simulation.model import FloodAdaptationModel

__all__ = [
    "CHECKPOINT_FILE",
    "FORMAT_VERSION",
    "Checkpoint",
    "capture",
    "read_checkpoint",
    "restore",
    "write_checkpoint",
]

CHECKPOINT_FILE = "checkpoint.json"
FORMAT_VERSION = 1
_RNGS = ("population_rng", "hazard_rng", "claims_rng", "decision_rng", "assignment_rng", "rng")
_STATE_FIELDS = tuple(f.name for f in fields(HouseholdState))

# Values of their JSON type, as capture() writes them: no "1" or true for 1, no 1.0 for 1.
_Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
_Amount = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
_Count = Annotated[int, Strict(), Field(ge=0)]
_Word = Annotated[int, Strict(), Field(ge=0, le=0xFFFFFFFF)]  # of the Mersenne Twister's state
_STRICT = {bool: StrictBool, int: _Count, float: _Finite, str: StrictStr}
# State fields never negative: dollar amounts, and the first floor's height above the ground
# (generated and read from tables at 0 or more, and raised by elevation). Ground elevations and
# positions may be.
_NON_NEGATIVE = (
    "income",
    "structure_value",
    "contents_value",
    "cumulative_damage",
    "last_damage",
    "first_floor_height",
)


class _Part(BaseModel):
    """Part of a checkpoint: no unknown keys (a misspelt one would be a missing one)."""

    model_config = ConfigDict(extra="forbid")


# Households are checked one at a time, as typed dicts rather than models: at 100,000
# households that took 1.4 s where one model of the whole checkpoint took 6.5, and no
# validated copy of them all is built beside the checkpoint.
_State = TypedDict(
    "_State",
    {
        name: _STRICT[hint]
        for name, hint in get_type_hints(HouseholdState).items()
        if name in _STATE_FIELDS
    }
    | {"tenure": Literal["owner", "renter"], "flood_zone": FloodZone}
    | dict.fromkeys(_NON_NEGATIVE, _Amount),
)
_State.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]


class _Household(TypedDict):
    """One household: what :func:`capture` keeps of it (see there)."""

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    state: _State
    memory: MemorySnapshot  # its consistency is checked by CognitiveMemory.from_dict
    adopted_last_year: StrictStr | None
    uses_llm: StrictBool
    relocated_in: NotRequired[_Count | None]  # absent from checkpoints written before it was kept
    # A DecisionSummary, field by field.
    last_decision: (
        tuple[_Count, StrictStr, StrictStr, StrictBool, _Finite, _Finite | None, StrictBool, _Count]
        | None
    )


_HOUSEHOLD = TypeAdapter(_Household)


class _Government(_Part):
    subsidy_share: Annotated[float, Strict(), Field(ge=0, le=1, allow_inf_nan=False)]
    quiet_years: _Count
    spent_this_year: _Amount


class _Insurer(_Part):
    rate: Annotated[float, Strict(), Field(gt=0, allow_inf_nan=False)]
    history: list[tuple[_Amount, _Amount]]  # (premiums, claims) of the years under review


def _below(bits: int) -> AfterValidator:
    def check(text: str) -> str:
        if int(text) >> bits:
            msg = f"must be below 2**{bits}"
            raise ValueError(msg)
        return text

    return AfterValidator(check)


# The generators' integers are kept as decimal text (JSON numbers lose 128-bit precision).
_Digits = Annotated[str, Strict(), StringConstraints(pattern=r"^(0|[1-9][0-9]{0,38})$")]


class _PCG64State(_Part):
    state: Annotated[_Digits, _below(128)]
    inc: Annotated[_Digits, _below(128)]


class _BitGenerator(_Part):
    """A numpy generator's ``bit_generator.state``, as :func:`capture` writes it.

    numpy takes what it is given and converts it (``3.0`` for a 128-bit state, ``true`` for
    ``has_uint32``) or fails with an ``OverflowError``: a damaged value would silently give
    another run, or a traceback.
    """

    bit_generator: Literal["PCG64"]  # numpy.random.default_rng's
    state: _PCG64State
    has_uint32: Literal["0", "1"]
    uinteger: Annotated[_Digits, _below(32)]


class _Committed(_Part):
    """How far an audit stream had been written when the checkpoint was taken."""

    offset: _Count  # bytes
    lines: _Count


class Checkpoint(_Part):
    """The layout of ``checkpoint.json``, as :func:`capture` writes it.

    Attributes:
        format_version: :data:`FORMAT_VERSION`.
        year: The last completed year.
        random: Mesa's ``random.Random`` state (version, 625 words, the pending gauss value).
        numpy: Each numpy generator's bit-generator state (128-bit integers as text).
        government: The subsidy share, quiet years and this year's spending.
        insurer: The premium rate and the (premiums, claims) history it reviews.
        premiums_collected: Premiums paid for the coming year's coverage, dollars.
        metrics: Each model metric's value in every year so far (null: undefined that year).
        households: Each household in the model's order (checked one by one, :func:`restore`).
        streams: Each audit stream's committed offset and line count.
    """

    format_version: Literal[1]  # an integer: checked before the rest
    year: _Count
    random: tuple[
        Literal[3],
        Annotated[list[_Word], Field(min_length=625, max_length=625)],
        _Finite | None,
    ]
    numpy: dict[str, _BitGenerator]
    government: _Government
    insurer: _Insurer
    premiums_collected: _Amount
    metrics: dict[str, list[_Finite | None]]
    households: list[dict[str, Any]]
    streams: dict[str, _Committed]


def capture(model: FloodAdaptationModel, streams: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model's dynamic state after a completed year, as JSON-ready data."""
    version, internal, gauss = model.random.getstate()
    return {
        "format_version": FORMAT_VERSION,
        "year": model.steps,
        "random": [version, list(internal), gauss],
        # PCG64 states hold 128-bit integers: stored as decimal strings.
        "numpy": {name: _stringify(getattr(model, name).bit_generator.state) for name in _RNGS},
        "government": {
            "subsidy_share": model.government.subsidy_share,
            "quiet_years": model.government.quiet_years,
            "spent_this_year": model.government.spent_this_year,
        },
        "insurer": {"rate": model.insurer.rate, "history": list(model.insurer.history)},
        "premiums_collected": model.premiums_collected,
        "metrics": {k: list(v) for k, v in model.datacollector.model_vars.items()},
        "households": [
            {
                "state": h.state.to_dict(),
                "memory": h.memory.to_dict(),
                "adopted_last_year": h.adopted_last_year,
                "uses_llm": h.uses_llm,
                "relocated_in": h.relocated_in,
                "last_decision": None if h.last_decision is None else list(h.last_decision),
            }
            for h in model.households
        ],
        "streams": streams or {},
    }


def restore(model: FloodAdaptationModel, data: dict[str, Any]) -> None:
    """Put a freshly built model (same config) into the state of a checkpoint.

    Raises:
        TypeError: For data that is not a JSON object.
        ValueError: For an unknown format, a value that is not of its type or range (see
            :class:`Checkpoint`), or a checkpoint of another population, metrics or registry.
    """
    if not isinstance(data, dict):
        msg = f"expected a JSON object, got {type(data).__name__}"
        raise TypeError(msg)
    found = data.get("format_version")
    if found.__class__ is not int or found != FORMAT_VERSION:
        msg = f"checkpoint format_version must be {FORMAT_VERSION}, got {found!r}"
        raise ValueError(msg)
    try:
        Checkpoint.model_validate(data)
    except ValidationError as err:
        raise ValueError(_problem(err)) from None
    for position, record in enumerate(data["households"]):
        try:
            _HOUSEHOLD.validate_python(record)
        except ValidationError as err:
            raise ValueError(_problem(err, f"households.{position}")) from None
    _check_fits(model, data)
    saved = data["households"]
    model.steps = int(data["year"])
    model.running = model.steps < model.config.years
    version, internal, gauss = data["random"]
    model.random.setstate((version, tuple(internal), gauss))
    for name in _RNGS:
        getattr(model, name).bit_generator.state = _unstringify(data["numpy"][name])
    gov = data["government"]
    model.government.subsidy_share = gov["subsidy_share"]
    model.government.quiet_years = gov["quiet_years"]
    model.government.spent_this_year = gov["spent_this_year"]
    model.insurer.rate = data["insurer"]["rate"]
    model.insurer.history = deque(
        (tuple(pair) for pair in data["insurer"]["history"]), maxlen=model.insurer.config.window
    )
    model.premiums_collected = data["premiums_collected"]
    # JSON has no NaN: a metric undefined in a year (a share of nobody) is stored as null.
    model.datacollector.model_vars = {
        k: [math.nan if x is None else x for x in v] for k, v in data["metrics"].items()
    }
    for household, record in zip(model.households, saved, strict=True):
        if record["state"]["agent_id"] != household.state.agent_id:
            msg = (
                f"checkpoint household {record['state']['agent_id']} != {household.state.agent_id}"
            )
            raise ValueError(msg)
        for name in _STATE_FIELDS:
            setattr(household.state, name, record["state"][name])
        old = household.memory
        household.memory = CognitiveMemory.from_dict(
            record["memory"],
            relevance=old.relevance,
            reflector=old.reflector,
            texts=old.texts,
            checked=True,  # by _HOUSEHOLD, above
        )
        household.adopted_last_year = record["adopted_last_year"]
        household.adopted_this_year = None
        household.uses_llm = record["uses_llm"]
        # Checkpoints from before the year was kept: a household that had moved away did so by
        # the checkpoint's year at the latest.
        default = model.steps if household.state.relocated else None
        household.relocated_in = record.get("relocated_in", default)
        # Checkpoints from before it was kept leave it unknown, as they did.
        decided = record.get("last_decision")
        household.last_decision = None if decided is None else DecisionSummary(*decided)


def write_checkpoint(run_dir: Path, data: dict[str, Any]) -> None:
    """Write ``data`` atomically as the run's checkpoint."""
    # orjson writes NaN as null (restore turns the metrics' back) and integer keys as text, as
    # the standard library's encoder would, at a twentieth of its time.
    data_bytes = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS)
    replace_file(run_dir / CHECKPOINT_FILE, data_bytes, durable=True)


def _problem(error: ValidationError, within: str = "") -> str:
    """The first problem as ``key.path: what is wrong``; ``within`` is the path to the part."""
    detail = describe_validation_error(error, "-").removeprefix("-: ")
    if detail.startswith("(top level)"):
        return f"{within or '(top level)'}{detail.removeprefix('(top level)')}"
    return f"{within}.{detail}" if within else detail


def _check_fits(model: FloodAdaptationModel, data: dict[str, Any]) -> None:
    """Refuse a well-formed checkpoint of another run: population, years, metrics or skills."""
    saved = data["households"]
    if len(saved) != len(model.households):
        msg = f"checkpoint has {len(saved)} households, the config builds {len(model.households)}"
        raise ValueError(msg)
    year = data["year"]
    if year > model.config.years:
        msg = f"year: {year} is past the run's last year ({model.config.years})"
        raise ValueError(msg)
    missing = set(_RNGS) - set(data["numpy"])
    if missing:
        msg = f"numpy: no state for {sorted(missing)}"
        raise ValueError(msg)
    metrics = data["metrics"]
    if set(metrics) != set(METRIC_COLUMNS):
        names = sorted(set(metrics) ^ set(METRIC_COLUMNS))
        msg = f"metrics: the metrics are not the model's ({names} differ)"
        raise ValueError(msg)
    short = next((name for name, values in metrics.items() if len(values) != year), None)
    if short is not None:
        msg = f"metrics.{short}: {len(metrics[short])} values for {year} years"
        raise ValueError(msg)
    _check_levers(model, data)
    skills = model.registry.skills
    for position, record in enumerate(saved):
        adopted = record["adopted_last_year"]
        if adopted is not None and adopted not in ADOPTION_PHRASES:
            msg = (
                f"households.{position}.adopted_last_year: {adopted!r} is none of "
                f"{sorted(ADOPTION_PHRASES)}"
            )
            raise ValueError(msg)
        decided = record["last_decision"]
        if decided is not None:
            # A language model may propose a skill that does not exist; the rules never do.
            named = (1,) if decided[6] else (1, 2)  # the executed skill, the proposed one
            for field in named:
                if decided[field] not in skills:
                    where = f"households.{position}.last_decision.{field}"
                    msg = f"{where}: {decided[field]!r} is not a skill of the registry"
                    raise ValueError(msg)
        owner = record["memory"].get("agent_id")
        if owner != record["state"]["agent_id"]:  # its items' ids would name another household
            msg = f"households.{position}.memory.agent_id: {owner!r} is not the household's"
            raise ValueError(msg)
        moved = record.get("relocated_in")
        if moved is not None and (moved > year or not record["state"]["relocated"]):
            problem = "after the checkpoint's year" if moved > year else "but it has not moved"
            msg = f"households.{position}.relocated_in: {moved}, {problem}"
            raise ValueError(msg)


def _check_levers(model: FloodAdaptationModel, data: dict[str, Any]) -> None:
    """Refuse a subsidy share or premium rate the run's institutions could not have set.

    The share starts within its config's bounds and every change is rounded, then held to
    them. So is the rate, when the insurer adjusts it; when it does not, the rate is the
    starting one. A hair outside a bound given with more decimals than are kept is accepted:
    floodsim before 0a87b24 clamped first and rounded after, and its checkpoints hold such
    values.
    """
    government, insurer = model.config.government, model.config.insurer
    share = data["government"]["subsidy_share"]
    if not _within(share, government.min_subsidy, government.max_subsidy, SUBSIDY_DIGITS):
        msg = (
            f"government.subsidy_share: {share} is outside the config's [min_subsidy, "
            f"max_subsidy] = [{government.min_subsidy}, {government.max_subsidy}]"
        )
        raise ValueError(msg)
    rate = data["insurer"]["rate"]
    if not insurer.enabled:
        start = model.config.insurance.rate_per_1000
        if rate != start:
            msg = f"insurer.rate: {rate}, but the insurer is disabled and the rate stays {start}"
            raise ValueError(msg)
    elif not _within(rate, insurer.min_rate, insurer.max_rate, RATE_DIGITS):
        msg = (
            f"insurer.rate: {rate} is outside the config's [min_rate, max_rate] = "
            f"[{insurer.min_rate}, {insurer.max_rate}]"
        )
        raise ValueError(msg)


def _within(value: float, low: float, high: float, digits: int) -> bool:
    """Whether a lever held to ``[low, high]`` and rounded to ``digits`` can be ``value``.

    Rounded before it was held today, after it in checkpoints of floodsim before 0a87b24.
    """
    return min(low, round(low, digits)) <= value <= max(high, round(high, digits))


def read_checkpoint(run_dir: Path) -> dict[str, Any] | None:
    """The run's checkpoint, or ``None`` when it has none yet."""
    path = run_dir / CHECKPOINT_FILE
    if not path.exists():
        return None
    return orjson.loads(path.read_bytes())


def _stringify(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stringify(v) for k, v in value.items()}
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


def _unstringify(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unstringify(v) for k, v in value.items()}
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value

"""Run configuration: typed models, loading, ``base:`` inheritance and ``--set`` overrides.

A run config is a YAML file whose sections map onto the models below; every key is documented
by its ``Field`` description (and in ``configs/default.yaml``). :func:`load_config` reads,
merges and validates a file and everything it refers to (damage curves, skill registry,
household table, hazard rasters) before anything runs. Any problem raises :class:`ConfigError`
with one line naming the file, the key and the problem.

Sections defined next to the code that uses them are imported here: ``households``
(:class:`~simulation.agents.population.PopulationConfig`), ``decision.pmt``
(:class:`~simulation.decisions.pmt.PMTConfig`) and the memory settings dataclasses.
"""

from __future__ import annotations

import copy
import errno
import functools
import itertools
import os
import re
import shutil
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    HttpUrl,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from simulation.agents.population import MAX_GROUND_FT, PopulationConfig
from simulation.agents.state import FloodZone  # noqa: TC001 - pydantic resolves it at run time
from simulation.config_base import (
    LAX,
    SECRET_KEY_NAMES,
    ConfigModel,
    describe_validation_error,
    url_holds_credentials,
)
from simulation.decisions.pmt import PMTConfig
from simulation.errors import InputError, shown_value, spoken_list
from simulation.hazard import (
    HazardSource,
    RasterSource,
    ScriptedSource,
    StochasticSource,
    is_curve_file,
)
from simulation.input_files import read_text
from simulation.memory import ReflectionSettings, RetentionSettings, RetrievalSettings
from simulation.memory.pool import MAX_SLOTS, store_widths
from simulation.skills.templates import TemplateError, render, shows_text, template_fields
from simulation.yaml_errors import describe_decode_error, describe_yaml_error, load_yaml

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

__all__ = [
    "CALIBRATION_KEYS",
    "DEFAULT_LLM_CACHE",
    "DEFAULT_WORLD_KEYS",
    "EXPERIMENT_KEYS",
    "MAX_YEARS",
    "WHOLE_TABLES",
    "AdaptationConfig",
    "AuditConfig",
    "CodeDefaultsWarning",
    "ConfigError",
    "ConfigWarning",
    "DamageConfig",
    "DecisionConfig",
    "EventMemoryConfig",
    "EventTemplate",
    "GovernmentConfig",
    "HazardConfig",
    "IgnoredKeyWarning",
    "InsuranceConfig",
    "InsurerConfig",
    "LLMConfig",
    "MemoryConfig",
    "RunConfig",
    "Section",
    "SocialConfig",
    "apply_overrides",
    "array_engine_limits",
    "canonical_key",
    "canonical_keys",
    "check_event_templates",
    "check_file_kind",
    "create_output_folder",
    "describe_validation_error",
    "file_kind",
    "ignored_keys",
    "is_curve_file",
    "load_config",
    "read_yaml",
    "rebase_paths",
    "remove_outputs",
    "resolve_base",
    "setting_origin",
    "table_year",
    "warn_code_defaults",
    "warn_ignored_keys",
    "year_key",
]


_HTTP_URL = TypeAdapter(HttpUrl)
#: A year key of hazard.events or hazard.rasters, read as their fields read it (lax).
_YEAR_KEY = TypeAdapter(int)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: Prefixes of common providers' API keys and tokens (OpenAI, Anthropic, Groq, Hugging Face,
#: GitHub, xAI, AWS, Google, Slack).
_KEY_PREFIXES = ("sk-", "sk_", "gsk_", "hf_", "ghp_", "github_pat_", "xai-", "AKIA", "AIza", "xox")


def _looks_like_a_secret(value: str) -> bool:
    """Whether ``value`` looks like an API key or token rather than a variable's name.

    A provider's key prefix, or a random-looking run of 16 or more letters and digits: at least
    two digits, and the kind of character (upper case, lower case, digit) changing at two in
    five positions or more, as it does about every other position in a random key and rarely
    in names (``OPENAI_API_KEY``, ``ProjectKey2024``).
    """
    if value.startswith(_KEY_PREFIXES):
        return True
    for part in re.split(r"[_\W]+", value):
        if len(part) >= 16 and sum(c.isdigit() for c in part) >= 2:
            kinds = [c.isupper() - c.isdigit() for c in part]  # 1 upper, 0 lower, -1 digit
            changes = sum(a != b for a, b in itertools.pairwise(kinds))
            if changes >= 0.4 * len(part):
                return True
    return False


class ConfigError(InputError):
    """A configuration problem; the message names the file and the key."""


class ConfigWarning(UserWarning):
    """A configuration that runs but likely not as meant (e.g. events after the last year)."""


class CodeDefaultsWarning(ConfigWarning):
    """A config whose ``base:`` chain leaves keys of the default world unset.

    See :func:`warn_code_defaults`.
    """


class IgnoredKeyWarning(ConfigWarning):
    """Keys set away from their defaults that the run never reads (see :func:`ignored_keys`).

    A warning, not an error, for settings a user keeps on purpose while switching the setting
    that reads them off: the ``decision.llm`` section of an LLM scenario run with ``--set
    decision.policy=pmt`` for comparison.
    """


class Section(ConfigModel):
    """Base of every section of a run or experiment config (see :class:`ConfigModel`)."""


class HazardConfig(Section):
    """Where each year's flood depths come from (``hazard:``)."""

    source: Literal["stochastic", "scripted", "raster"] = Field(
        "stochastic",
        description="stochastic: annual maximum water level drawn from `distribution`; "
        "scripted: listed `events`; raster: one ESRI ASCII depth grid per year in `rasters`.",
    )
    distribution: Literal["gumbel", "lognormal"] = Field(
        "gumbel", description="stochastic: distribution of the annual maximum water level."
    )
    loc: float | None = Field(
        2.0,
        validate_default=True,
        description="gumbel: location of the annual maximum level, ft above datum.",
    )
    scale: float | None = Field(
        1.5, gt=0, description="gumbel: scale, ft; the 100-year level is loc + 4.6 * scale."
    )
    mean: float | None = Field(
        None, validate_default=True, description="lognormal: mean of log(level)."
    )
    sigma: float | None = Field(
        None, gt=0, validate_default=True, description="lognormal: sd of log(level)."
    )
    spatial_noise_sd: float = Field(
        0.0, ge=0, description="stochastic: sd (ft) of per-household noise on the level."
    )
    events: dict[
        Annotated[int, Field(ge=1), LAX],
        Annotated[float, Field(ge=-MAX_GROUND_FT, le=MAX_GROUND_FT)],
    ] = Field(
        default_factory=dict,
        description="scripted: year (from 1, the first simulated year) -> water level (ft above "
        "datum) or depth (ft), by `kind`, within +-100,000 ft (as a household table's ground). "
        "Years past the run's end never happen (a warning names "
        "them). A table given in a child config, with --set or by an experiment replaces its "
        "base's whole (`{}` is a flood-free run), unlike a section, which merges key by key.",
    )
    kind: Literal["level", "depth"] = Field(
        "level", description="scripted: whether `events` give levels or uniform depths."
    )
    rasters: dict[Annotated[int, Field(ge=1), LAX], str] = Field(
        default_factory=dict,
        validate_default=True,
        description="raster: year (from 1) -> path of an .asc depth grid (relative to the "
        "config file). Grids of years past the run's end are checked but never used (a warning "
        "names them). Like `events`, replaced whole by a table given in a child config, with "
        "--set or by an experiment.",
    )
    units: Literal["ft", "m"] = Field("ft", description="raster: depth units of the grids.")

    @field_validator("loc", "scale", "mean", "sigma", mode="after")
    @classmethod
    def _distribution_parameters(cls, value: float | None, info: ValidationInfo) -> float | None:
        # Field-level, so the message names the exact key (e.g. hazard.mean).
        needed = {"gumbel": ("loc", "scale"), "lognormal": ("mean", "sigma")}
        distribution = info.data.get("distribution", "")
        if (
            value is None
            and info.data.get("source") == "stochastic"
            and info.field_name in needed.get(distribution, ())
        ):
            msg = f"required for distribution {distribution}"
            raise ValueError(msg)
        # A parameter away from its default that the run would not read is a forgotten switch
        # (loc and scale have defaults, mean and sigma none).
        changed = value != cls.model_fields[info.field_name].default
        source = info.data.get("source")
        if changed and source is not None and source != "stochastic":
            msg = f"only read by source stochastic (source is {source})"
            raise ValueError(msg)
        for reader, names in needed.items():
            if changed and info.field_name in names and distribution not in ("", reader):
                msg = f"only read by distribution {reader} (distribution is {distribution})"
                raise ValueError(msg)
        return value

    @field_validator("events", mode="after")
    @classmethod
    def _events_need_scripted(
        cls, value: dict[int, float], info: ValidationInfo
    ) -> dict[int, float]:
        # Forgetting `source: scripted` would otherwise run random floods instead of these.
        if value and info.data.get("source") != "scripted":
            msg = f"only read by source scripted (source is {info.data.get('source')})"
            raise ValueError(msg)
        return value

    @field_validator("distribution", "spatial_noise_sd", "kind", "units", mode="after")
    @classmethod
    def _read_by_one_source(cls, value: object, info: ValidationInfo) -> object:
        # A setting away from its default under another source would be silently dropped:
        # `units: m` with Gumbel parameters in metres would read them as feet.
        reader, default = {
            "distribution": ("stochastic", "gumbel"),
            "spatial_noise_sd": ("stochastic", 0.0),
            "kind": ("scripted", "level"),
            "units": ("raster", "ft"),
        }[info.field_name]
        source = info.data.get("source")
        if value != default and source != reader:
            msg = f"only read by source {reader} (source is {source})"
            raise ValueError(msg)
        return value

    @field_validator("events", "rasters", mode="before")
    @classmethod
    def _each_year_once(cls, value: object) -> object:
        # 2, "2", "02" and "2.0" are one year: pydantic would keep whichever came last,
        # without a word. Each key is read as pydantic reads it, to compare.
        if isinstance(value, dict):
            seen: dict[str, object] = {}
            for key in value:
                try:
                    year = str(_YEAR_KEY.validate_python(key))
                except ValidationError:  # not a year: refused by the field itself, by name
                    year = str(key).strip()
                if year in seen:
                    msg = f"year {year} is given twice ({seen[year]!r} and {key!r})"
                    raise ValueError(msg)
                seen[year] = key
        return value

    @field_validator("rasters", mode="after")
    @classmethod
    def _some_rasters(cls, value: dict[int, str], info: ValidationInfo) -> dict[int, str]:
        source = info.data.get("source")
        if source == "raster" and not value:
            msg = "a raster source needs at least one year's grid"
            raise ValueError(msg)
        if value and source != "raster":
            msg = f"only read by source raster (source is {source})"
            raise ValueError(msg)
        return value

    @model_validator(mode="after")
    def _depths_not_negative(self) -> HazardConfig:
        # Checked here, not only by ScriptedSource, so that the error names the file or --set
        # flag that gave the depth rather than whichever file set the hazard section.
        if self.kind == "depth":
            for year, depth in self.events.items():
                if depth < 0:
                    msg = f"events: year {year}: a depth (kind depth) must be >= 0, got {depth}"
                    raise ValueError(msg)
        return self

    def build(self, base_dir: Path) -> HazardSource:
        """The configured hazard source (raster files are checked to exist here).

        Raises:
            HazardError: Naming the file and year of a missing or malformed raster.
        """
        if self.source == "stochastic":
            keys = ("loc", "scale") if self.distribution == "gumbel" else ("mean", "sigma")
            return StochasticSource(
                self.distribution,
                spatial_noise_sd=self.spatial_noise_sd,
                **{k: getattr(self, k) for k in keys},
            )
        if self.source == "scripted":
            return ScriptedSource(self.events, kind=self.kind)
        paths = {year: base_dir / path for year, path in self.rasters.items()}
        source = RasterSource(paths, units=self.units)
        for year in paths:  # read every grid now: a malformed one must stop the run up front
            source.grid(year)
        return source


class DamageConfig(Section):
    """How flood depth becomes damage (``damage:``)."""

    curves: str = Field(
        "usace_one_story_no_basement",
        min_length=1,
        description="Shipped curve set (usace_one_story_no_basement, jrc_north_america) or a "
        "YAML file of the same shape (relative to the config file; its name ends in .yaml or "
        ".yml, or holds a /, as in ./survey_curves.txt): one set of "
        "simulation/hazard/curves_data.yaml, bare or under one name, with `source` (text), "
        "`units: feet_above_first_floor`, `structure` and `contents` (each `depth`, in ft above "
        "the first floor and rising, and `damage_fraction`, in [0, 1] and non-decreasing) and "
        "optionally `contents_basis` (structure or contents).",
    )
    owner_contents_basis: Literal["auto", "structure", "contents"] = Field(
        "auto",
        description="The value owners' contents curve is applied to: `auto` (as the curve "
        "set is published: its `contents_basis`, structure for USACE EGM 01-03, contents for "
        "JRC and by default for curve files), `structure` or `contents`. Renters follow "
        "the same basis (see renter_contents_ratio).",
    )
    renter_contents_ratio: float = Field(
        0.5,
        gt=0,
        le=5,
        description="Contents value as a multiple of the building's value, for a home with no "
        "structure value (a renter's) when the contents curve is a share of structure value: "
        "the curve is applied to contents_value / this ratio, the building value such "
        "contents imply (capped at the contents value, as owners' are), so the same water takes "
        "the same share of a renter's contents as of an owner's. Keep it equal to "
        "households.contents_ratio (0.5, the HAZUS/FEMA assumption). Unused when the contents "
        "curve is applied to contents value.",
    )


class InsuranceConfig(Section):
    """NFIP-like annual flood insurance (``insurance:``)."""

    rate_per_1000: float = Field(
        4.0,
        gt=0,
        description="Initial premium per $1,000 of coverage in zone AE. $4 gives about $1,400 "
        "for full owner coverage, near the Risk Rating 2.0 average for AE single-family homes.",
    )
    zone_multiplier: dict[FloodZone, Annotated[float, Field(ge=0)]] = Field(
        default_factory=lambda: {"AE": 1.0, "X": 0.3},
        description="Premium multiplier (>= 0) by FEMA flood zone; X-zone policies cost about a "
        "third (preferred-risk policies). An unlisted floodplain zone (A, VE, V) takes AE's "
        "entry and an unlisted zone outside it (B, C, D) X's; 1.0 when that is not listed "
        "either. Entries given in a child config, with --set or by an experiment override their "
        "base's one by one.",
    )
    elevated_multiplier: float = Field(
        0.5, gt=0, le=1, description="Premium multiplier for elevated homes."
    )
    structure_limit: float = Field(250_000, gt=0, description="NFIP structure coverage limit.")
    contents_limit: float = Field(100_000, gt=0, description="NFIP contents coverage limit.")
    deductible: float = Field(1_250, ge=0, description="Deductible per claim, dollars.")
    claim_approval_probability: float = Field(
        0.85,
        ge=0,
        le=1,
        description="Chance a claim is paid; roughly a quarter of NFIP claims historically "
        "close without payment, many for damage under the deductible (handled separately).",
    )


class InsurerConfig(Section):
    """The insurer agent moving the premium rate by loss ratio (``insurer:``)."""

    enabled: bool = Field(True, description="Whether the insurer adjusts the rate.")
    min_rate: float = Field(2.0, gt=0, description="Lowest rate per $1,000.")
    max_rate: float = Field(12.0, gt=0, description="Highest rate per $1,000.")
    target_loss_ratio: float = Field(
        0.8,
        gt=0,
        description="Claims over premiums the insurer aims for over `window` years (each "
        "year's claims against the premiums bought the year before, for that year's cover).",
    )
    window: int = Field(5, ge=1, description="Years of losses and premiums averaged.")
    max_change: float = Field(
        0.18,
        gt=0,
        lt=1,
        description="Largest yearly relative rate change (NFIP caps most increases at 18%).",
    )
    tolerance: float = Field(
        0.25,
        ge=0,
        description="Dead band relative to the target: the rate moves only when the loss "
        "ratio lies outside target x (1 ± tolerance), e.g. 0.6 to 1.0 for 0.8 and 0.25 "
        "(insurers file rate changes, not yearly drifts).",
    )

    @model_validator(mode="after")
    def _bounds(self) -> InsurerConfig:
        if self.min_rate > self.max_rate:
            msg = f"min_rate ({self.min_rate}) must not exceed max_rate ({self.max_rate})"
            raise ValueError(msg)
        return self


class GovernmentConfig(Section):
    """The government agent setting the elevation subsidy (``government:``)."""

    initial_subsidy: float = Field(
        0.5, ge=0, le=1, description="Share of elevation cost the government pays at first."
    )
    min_subsidy: float = Field(0.2, ge=0, le=1, description="Lowest subsidy share.")
    max_subsidy: float = Field(0.95, ge=0, le=1, description="Highest subsidy share.")
    step: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Change of the share after a trigger (0: the share stays initial_subsidy "
        "all run, for an experiment that compares fixed subsidies).",
    )
    heavy_loss_per_household: float = Field(
        2_000.0,
        ge=0,
        description="Mean damage per active household ($) that makes a year heavy-loss; "
        "the subsidy is raised by `step` at once, before that year's decisions.",
    )
    relax_after: int | None = Field(
        10,
        ge=1,
        description="Quiet years after which the subsidy is lowered by `step` (null: never).",
    )
    budget: float | None = Field(
        None,
        ge=0,
        description="Yearly subsidy budget in dollars (null: unlimited); once spent, further "
        "elevations that year get no subsidy.",
    )

    @model_validator(mode="after")
    def _bounds(self) -> GovernmentConfig:
        if not self.min_subsidy <= self.initial_subsidy <= self.max_subsidy:
            msg = (
                f"initial_subsidy ({self.initial_subsidy}) must lie within "
                f"[min_subsidy, max_subsidy] = [{self.min_subsidy}, {self.max_subsidy}]"
            )
            raise ValueError(msg)
        return self


class AdaptationConfig(Section):
    """Costs and effects of elevation and relocation (``adaptation:``)."""

    elevation_cost: float = Field(
        90_000,
        ge=0,
        description="Cost of elevating a single-family home before subsidy; FEMA puts typical "
        "projects at $30-$90 per sq ft, so about $45k-$135k for 1,500 sq ft.",
    )
    elevation_height_ft: float = Field(
        6.0, gt=0, description="Feet an elevation raises the first floor."
    )
    owner_relocation_cost: float = Field(
        30_000,
        ge=0,
        description="Out-of-pocket cost of moving for owners after a buyout at market value "
        "(transaction and moving costs).",
    )
    renter_relocation_cost: float = Field(
        5_000, ge=0, description="Out-of-pocket cost of moving for renters."
    )


class EventTemplate(Section):
    """A memory written when an event happens: template, importance and tags."""

    template: str = Field(description="Text with {placeholders}, not blank; see EventMemoryConfig.")
    importance: float = Field(ge=0, le=1, description="Importance; >= threshold -> episodic.")
    tags: Annotated[tuple[str, ...], LAX] = Field(
        (),
        description="Tags of the memory, not blank. The PMT policy reads a flood's severity "
        "from the tag major, minor or no_damage and a denied claim from the tag denied "
        "(decision.pmt.memory_weights).",
    )

    @field_validator("template", mode="after")
    @classmethod
    def _template_has_text(cls, template: str) -> str:
        # Blank text would be remembered, retrieved and audited as it is, every event, unseen.
        if not shows_text(template):
            msg = "empty: the memory would hold no text"
            raise ValueError(msg)
        return template

    @field_validator("tags", mode="after")
    @classmethod
    def _tags_have_text(cls, tags: tuple[str, ...]) -> tuple[str, ...]:
        for index, tag in enumerate(tags):
            if not shows_text(tag):
                msg = f"tag {index} is empty"
                raise ValueError(msg)
            if tag in tags[:index]:  # as in a skill's memory (simulation.skills.registry)
                msg = f"tag {index} ({tag!r}) is given twice (first as tag {tags.index(tag)})"
                raise ValueError(msg)
        return tags


# The values each kind of event memory is rendered with.
_FLOOD = ("year", "damage", "depth")
_CLAIM = ("year", "payout", "damage")
_POLICY = ("year", "old", "new")


def _event(
    meaning: str,
    placeholders: tuple[str, ...],
    template: str,
    importance: float,
    tags: tuple[str, ...],
) -> Any:
    """An event-memory field: its default template and a description naming its placeholders."""
    listed = " ".join(f"{{{name}}}" for name in placeholders)
    return Field(
        EventTemplate(template=template, importance=importance, tags=tags),
        description=f"{meaning}; placeholders {listed}.",
        json_schema_extra={"placeholders": list(placeholders)},
    )


class EventMemoryConfig(Section):
    """Memories of events (``events:``); defaults follow seed 000 sections 5.2 and 10.3.

    Placeholders: floods ``{year} {damage} {depth}``; claims ``{year} {payout} {damage}``;
    policy changes ``{year} {old} {new}``; neighbours ``{year} {count} {total} {action}``.

    Attributes:
        major_damage_threshold: Damage ($) at or above which a flood is remembered as major.
        flood_major: A flood that did at least ``major_damage_threshold`` of damage.
        flood_minor: A flood that did less damage than that.
        flood_no_damage: Water reached the home but did no damage (with the default USACE
            curve, water 2 ft or more below the first floor; water closer to the floor
            already does damage).
        claim_paid: The insurer paid a claim.
        claim_denied: The insurer denied a claim.
        subsidy_change: The government changed the elevation subsidy.
        premium_change: The insurer changed the premium rate.
        neighbor_adaptation: Neighbours adopted a measure last year (one memory per measure).
    """

    major_damage_threshold: float = Field(
        50_000, ge=0, description="Damage ($) at or above which a flood is major."
    )
    flood_major: EventTemplate = _event(
        "A flood that did at least major_damage_threshold of damage",
        _FLOOD,
        "Year {year}: A major flood caused ${damage:,.0f} in damages",
        0.9,
        ("flood", "major"),
    )
    flood_minor: EventTemplate = _event(
        "A flood that did less damage than major_damage_threshold",
        _FLOOD,
        "Year {year}: A minor flood caused ${damage:,.0f} in damages",
        0.6,
        ("flood", "minor"),
    )
    flood_no_damage: EventTemplate = _event(
        "Water reached the home but did no damage (default curve: 2 ft or more below the first "
        "floor)",
        _FLOOD,
        "Year {year}: A flood occurred but caused no damage to my property",
        0.4,
        ("flood", "no_damage"),
    )
    claim_paid: EventTemplate = _event(
        "The insurer paid a claim",
        _CLAIM,
        "Year {year}: Insurance paid ${payout:,.0f} for my claim",
        0.7,
        ("insurance", "claim", "approved"),
    )
    claim_denied: EventTemplate = _event(
        "The insurer denied a claim",
        _CLAIM,
        "Year {year}: My insurance claim was denied",
        0.8,
        ("insurance", "claim", "denied"),
    )
    subsidy_change: EventTemplate = _event(
        "The government changed the elevation subsidy (every household remembers it)",
        _POLICY,
        "Year {year}: The government changed the elevation subsidy from {old:.0%} to {new:.0%}",
        0.5,
        ("policy", "subsidy"),
    )
    premium_change: EventTemplate = _event(
        "The insurer changed the premium rate (every household remembers it)",
        _POLICY,
        "Year {year}: The flood insurance rate changed from ${old:.2f} to ${new:.2f} per $1,000 "
        "of coverage",
        0.5,
        ("policy", "premium"),
    )
    neighbor_adaptation: EventTemplate = _event(
        "Neighbours adopted a measure last year, one memory per measure",
        ("year", "count", "total", "action"),
        "Year {year}: {count} of my {total} neighbours {action} last year",
        0.4,
        ("neighbor",),
    )


#: Placeholders each event template may use.
EVENT_FIELDS: dict[str, frozenset[str]] = {
    name: frozenset(field.json_schema_extra["placeholders"])
    for name, field in EventMemoryConfig.model_fields.items()
    if field.annotation is EventTemplate
}
#: A value of the type the model gives each event placeholder, to check format specs with:
#: years and neighbour counts are integers, the adoption is a phrase, the rest dollars, feet
#: or rates.
_EVENT_SAMPLES: dict[str, object] = {
    "year": 0,
    "count": 0,
    "total": 0,
    "action": "x",
    **dict.fromkeys(("damage", "depth", "payout", "old", "new"), 0.0),
}


#: Retrieval settings only the ``weighted`` strategy reads.
_WEIGHTED_ONLY = ("w_recency", "w_importance", "w_relevance", "recency_decay")
#: Retention settings and the one policy that reads each.
_RETENTION_READER = {
    "w_importance": "importance_weighted",
    "w_recency": "importance_weighted",
    "archive_capacity": "tiered",
    "demote_below": "tiered",
    "promote_after": "tiered",
}


class MemoryConfig(Section):
    """Each household's CognitiveMemory (``memory:``); see simulation.memory for the fields."""

    working_capacity: int = Field(10, ge=1, description="Working-memory FIFO capacity.")
    episodic_capacity: int = Field(50, ge=1, description="Episodic-memory capacity.")
    consolidation_threshold: float = Field(
        0.7, ge=0, le=1, description="Importance at or above which memories become episodic."
    )
    decay_rate: float = Field(
        0.95, gt=0, le=1, description="Per-year decay of importance in retrieval and retention."
    )
    retrieval: RetrievalSettings = Field(
        default_factory=RetrievalSettings,
        description="strategy (spec|weighted), top_k, w_recency, w_importance, w_relevance, "
        "recency_decay, relevance (keyword; embedding only from Python), query. The weights, "
        "recency_decay and query are read by weighted only: under spec they are refused away "
        "from their defaults.",
    )
    retention: RetentionSettings = Field(
        default_factory=RetentionSettings,
        description="policy (decayed_importance|fifo|importance_weighted|tiered), w_importance, "
        "w_recency (importance_weighted only), archive_capacity, demote_below, promote_after "
        "(tiered only): a policy's keys are refused away from their defaults under another.",
    )
    reflection: ReflectionSettings = Field(
        default_factory=ReflectionSettings,
        description="enabled, threshold, importance, semantic_capacity.",
    )

    @field_validator("retrieval", mode="after")
    @classmethod
    def _relevance_a_run_can_score(cls, retrieval: RetrievalSettings) -> RetrievalSettings:
        if retrieval.relevance == "embedding":
            msg = (
                "relevance: embedding needs a sentence embedder, which only Python code can "
                "give a memory (CognitiveMemory(relevance=EmbeddingRelevance(...))); a run "
                "scores relevance with keyword"
            )
            raise ValueError(msg)
        return retrieval

    @field_validator("retrieval", mode="after")
    @classmethod
    def _weights_need_weighted(cls, retrieval: RetrievalSettings) -> RetrievalSettings:
        # A run retrieves with the configured strategy only (Python code may pass another per
        # call, which is why RetrievalSettings itself allows this): a weight changed under spec
        # would be a study of nothing.
        if retrieval.strategy == "spec":
            default = RetrievalSettings()
            for name in _WEIGHTED_ONLY:
                if getattr(retrieval, name) != getattr(default, name):
                    msg = f"{name}: only read by strategy weighted (strategy is spec)"
                    raise ValueError(msg)
        elif retrieval.query is None and retrieval.w_relevance != RetrievalSettings().w_relevance:
            # A run's retrievals have no query of their own: relevance is never scored.
            msg = "w_relevance: only read with a query (query is null)"
            raise ValueError(msg)
        return retrieval

    @field_validator("retention", mode="after")
    @classmethod
    def _retention_keys_need_their_policy(cls, retention: RetentionSettings) -> RetentionSettings:
        # As the retrieval weights: a setting its policy does not read would be a study of
        # nothing (a sweep over policies sets each policy's keys in its own design points).
        default = RetentionSettings()
        for name, policy in _RETENTION_READER.items():
            if retention.policy != policy and getattr(retention, name) != getattr(default, name):
                msg = f"{name}: only read by policy {policy} (policy is {retention.policy})"
                raise ValueError(msg)
        return retention


class SocialConfig(Section):
    """Who observes whom (``social:``)."""

    neighborhood: Literal["moore", "von_neumann", "small_world"] = Field(
        "moore",
        description="moore / von_neumann: grid neighbours of each home's cell; small_world: a "
        "Watts-Strogatz network over households in grid order.",
    )
    k: int = Field(
        6,
        ge=2,
        multiple_of=2,
        description="small_world: neighbours each household starts with, k/2 on each side of "
        "it in grid order (so even); capped below the population size (a k set beyond it is warned "
        "of: the graph is then almost complete). "
        "Refused away from its default under another neighborhood.",
    )
    p: float = Field(
        0.1,
        ge=0,
        le=1,
        description="small_world: rewiring probability. Refused away from its default under "
        "another neighborhood.",
    )
    observe: bool = Field(True, description="Write neighbour-adaptation memories.")

    @field_validator("k", "p", mode="after")
    @classmethod
    def _small_world_only(cls, value: float, info: ValidationInfo) -> float:
        # Grid neighbourhoods have a fixed size: a k or p away from its default would be a
        # network setting that silently does nothing (as hazard keys of another source).
        neighborhood = info.data.get("neighborhood")
        changed = value != cls.model_fields[info.field_name].default
        if changed and neighborhood is not None and neighborhood != "small_world":
            msg = f"only read by neighborhood small_world (neighborhood is {neighborhood})"
            raise ValueError(msg)
        return value


#: The most years a run may simulate (``years``); ``--checkpoint-every`` is held to it too.
MAX_YEARS = 1000
#: The LLM reply cache of a config that names none, beside the run's config file.
DEFAULT_LLM_CACHE = "llm_cache.sqlite"


class LLMConfig(Section):
    """A language model deciding for households (``decision.llm:``).

    Any OpenAI-compatible chat-completions endpoint works: Ollama (``/v1``), vLLM, a llama.cpp
    server, hosted APIs. The API key is read from the environment variable named here and is
    never written to any output.
    """

    base_url: str = Field(
        "http://localhost:11434/v1",
        description="Endpoint root, an http(s) URL (the part before /chat/...).",
    )
    model: str = Field("gemma3:4b", min_length=1, description="Model name the endpoint serves.")
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="Name of the environment variable holding the API key (unset: no key is "
        "sent). Never the key itself: a value that looks like a key is refused without being "
        "shown, since the config is written to every run directory.",
    )
    temperature: float = Field(0.0, ge=0, le=2, description="Sampling temperature.")
    seed: int | None = Field(
        None, description="Sampling seed sent to the endpoint (null: the run's seed)."
    )
    max_tokens: int = Field(400, ge=16, description="Reply length limit.")
    timeout_s: float = Field(60.0, gt=0, description="Per-request timeout, seconds.")
    retries: int = Field(
        2,
        ge=0,
        le=10,
        description="Extra attempts: for transport faults (with backoff) and, separately, for "
        "replies that fail validation (the errors are fed back to the model).",
    )
    max_concurrency: int = Field(16, ge=1, description="Requests in flight at once.")
    mode: Literal["live", "record", "replay"] = Field(
        "live",
        description="live: call the endpoint; record: call and store every reply in `cache`; "
        "replay: answer only from `cache` (a miss stops the run) - reproduces a recorded run.",
    )
    cache: str | None = Field(
        None,
        min_length=1,
        description="SQLite reply cache (relative to the config file that names it; null: "
        f"{DEFAULT_LLM_CACHE} beside the run's config file).",
    )
    prompt: str | None = Field(
        None,
        min_length=1,
        description="Prompt template file (relative to the config file; null: the shipped "
        "simulation/decisions/llm/household_prompt.txt).",
    )

    def cache_path(self, base_dir: Path) -> Path:
        """The reply cache of a run whose relative paths resolve against ``base_dir``."""
        return base_dir / (self.cache or DEFAULT_LLM_CACHE)

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str) -> str:
        if _looks_like_a_secret(value):
            msg = (
                "looks like an API key, not the name of the environment variable holding one "
                "(the value is not shown); put the key in a variable (export "
                "OPENAI_API_KEY=...) and name the variable here"
            )
            raise ValueError(msg)
        if not _ENV_NAME.fullmatch(value):
            msg = (
                "must name an environment variable: letters, digits and underscores, not "
                "starting with a digit"
            )
            raise ValueError(msg)
        return value

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        # Checked with pydantic's URL parser but kept as written: HttpUrl would normalise it
        # (a trailing slash on a bare host), which would change the config's hash.
        try:
            _HTTP_URL.validate_python(value)
        except ValidationError:
            msg = "must be an http:// or https:// URL, e.g. http://localhost:11434/v1"
            raise ValueError(msg) from None
        if url_holds_credentials(value):
            # The resolved config is written into the run directory, and errors echo URLs.
            msg = (
                "holds a password or a key (the value is not shown): the config is written "
                "into the run directory; put the key in a variable (export OPENAI_API_KEY=...) "
                "and name it in decision.llm.api_key_env"
            )
            raise ValueError(msg)
        return value


class DecisionConfig(Section):
    """How households decide (``decision:``)."""

    policy: Literal["pmt", "llm", "scripted"] = Field(
        "pmt",
        description="pmt: Protection Motivation Theory; llm: a language model decides for a "
        "share `llm_share` of households and PMT for the rest; scripted: every decision is "
        "read from the table `script` (for tests and replaying observed behaviour).",
    )
    script: str | None = Field(
        None,
        min_length=1,
        description="policy scripted: CSV with columns agent_id, year, skill_id (relative to the "
        "config file); a household-year without a row proposes the registry's default skill. "
        "Rows for years past the run's end are never used (a warning names them).",
    )
    llm_share: float = Field(
        1.0,
        ge=0,
        le=1,
        description="policy llm: share of households (drawn once from the seed) that use it. "
        "Ignored under another policy, with a warning when away from its default.",
    )
    pmt: PMTConfig = Field(default_factory=PMTConfig, description="PMT coefficients.")
    llm: LLMConfig = Field(
        default_factory=LLMConfig,
        description="Language-model settings, read by policy llm only: under another policy the "
        "keys away from their defaults are named in a warning (IgnoredKeyWarning).",
    )

    @model_validator(mode="after")
    def _script_for_scripted(self) -> DecisionConfig:
        if self.policy == "scripted" and self.script is None:
            msg = "script: required by policy scripted (a CSV of agent_id, year, skill_id)"
            raise ValueError(msg)
        if self.policy != "scripted" and self.script is not None:
            msg = f"script: only read by policy scripted (policy is {self.policy})"
            raise ValueError(msg)
        return self


class AuditConfig(Section):
    """The JSONL audit trail (``audit:``); see simulation/audit/schemas for each stream."""

    level: Literal["full", "standard", "minimal", "off"] = Field(
        "standard",
        description="full: traces with memory snapshots and explanations; standard: ids and "
        "counts in traces, every memory write, consolidation and retrieval streamed (enough to "
        "rebuild any household's memory); minimal: traces with decisions only; off: no streams.",
    )
    timestamps: bool = Field(
        True,
        description="Stamp lines with wall-clock UTC time (one stamp per year per stream "
        "batch); false makes outputs byte-identical across runs with the same seed.",
    )
    sample: float | list[str] = Field(
        1.0,
        description="Households audited: a fraction in (0, 1] (each household in or out by a "
        "hash of seed and id, stable across runs, so the count varies about the fraction: 110 "
        "of 400 households at 0.25 with seed 42) or a list of agent ids, each of which must be a "
        "household's.",
    )
    gzip: bool = Field(False, description="Write streams as .jsonl.gz.")
    gzip_level: int = Field(
        1,
        ge=0,
        le=3,
        description="Compression level of ISA-L (python-isal), whose output is ordinary gzip. "
        "1 (the default) compresses the audit streams about 16-fold at about 2 GB/s; 3 about "
        "17-fold at about 400 MB/s; 0 about 13-fold. zlib's level 1 ran at about 440 MB/s, which "
        "made compression several percent of a large run. Read only with gzip true: set "
        "without it, a warning names it.",
    )
    buffer_bytes: int = Field(
        4_000_000,
        ge=1,
        description="Bytes of lines gathered per stream before a write to disk (engine "
        "arrays writes a batch of lines of 64 KiB or more directly, after what is gathered). "
        "With gzip a small buffer compresses worse: at 1000 the object path's streams came out "
        "1.3 to 1.7 times larger (3,000 households x 4 years).",
    )
    background: bool | Literal["auto"] = Field(
        "auto",
        description="engine arrays: fill and write a year's lines on a second thread while the "
        "simulation runs on (simulation/audit/background.py); the files are the same, byte for "
        "byte, run id included (the key is left out of the run's config hash, and a run may be "
        "resumed with it changed). On 2 cores it took a quarter off a standard-level year at "
        "4,000 households and two fifths at 10,000, but added about 6% at 1,000. auto: on for "
        "a run of 2,000 households or more that has a spare core (floodsim run; a batch "
        "running one run at a time), off where a batch's runs share the cores (more than one "
        "worker) and for smaller runs (runner.BACKGROUND_FROM_HOUSEHOLDS); unused by engine "
        "objects.",
    )

    @field_validator("background", mode="before")
    @classmethod
    def _background_choice(cls, value: Any) -> Any:
        if value is True or value is False or value == "auto":
            return value
        msg = "must be auto, true or false"
        raise ValueError(msg)

    @field_validator("level", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        # YAML 1.1 reads a bare `off` as false; `level: off` must still mean "off".
        return "off" if value is False else value

    @field_validator("sample", mode="before")
    @classmethod
    def _one_id_is_a_list(cls, value: Any) -> Any:
        # Otherwise pydantic reports the union's members ("audit.sample.float: Input should be
        # a valid number") for what is only a missing pair of brackets.
        if isinstance(value, str):
            msg = f"a fraction in (0, 1] or a list of agent ids: one id is [{value}]"
            raise ValueError(msg)
        if isinstance(value, list) and (numbers := [v for v in value if not isinstance(v, str)]):
            # A table's ids 1, 2, 3 are text: YAML reads [1, 2] as numbers.
            msg = (
                f"a list of agent ids, which are text: quote an id that looks like a number "
                f"(['{numbers[0]}'], not [{numbers[0]}])"
            )
            raise ValueError(msg)
        return value

    @field_validator("sample")
    @classmethod
    def _sample(cls, value: float | list[str]) -> float | list[str]:
        if isinstance(value, float | int) and not 0.0 < value <= 1.0:
            msg = "must be a fraction in (0, 1] or a list of agent ids"
            raise ValueError(msg)
        if isinstance(value, list) and not value:  # to audit nobody, use level: off
            msg = "an empty list of agent ids audits nobody (use audit.level: off)"
            raise ValueError(msg)
        return value


class RunConfig(Section):
    """A whole run. Paths inside are relative to the config file's folder."""

    name: str = Field(
        "run",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
        description="Run name, used in the run directory name (letters, digits, _ . -).",
    )
    seed: int = Field(
        42,
        ge=0,
        lt=2**64,
        description="Root seed; every random stream derives from it (0 to 2**64 - 1).",
    )
    years: int = Field(30, ge=1, le=MAX_YEARS, description="Simulated years (model steps).")
    registry: str = Field(
        "skill_registry.yaml",
        min_length=1,
        description="Skill registry file (relative to the config file).",
    )
    households: PopulationConfig = Field(
        default_factory=PopulationConfig, description="The households: generated or a table."
    )
    hazard: HazardConfig = Field(
        default_factory=HazardConfig, description="Where each year's flood depths come from."
    )
    damage: DamageConfig = Field(default_factory=DamageConfig, description="Depth-damage curves.")
    insurance: InsuranceConfig = Field(
        default_factory=InsuranceConfig, description="Flood insurance policies and claims."
    )
    insurer: InsurerConfig = Field(
        default_factory=InsurerConfig, description="The insurer moving the premium rate."
    )
    government: GovernmentConfig = Field(
        default_factory=GovernmentConfig, description="The government setting the subsidy."
    )
    adaptation: AdaptationConfig = Field(
        default_factory=AdaptationConfig, description="Costs and effects of elevation, moving."
    )
    events: EventMemoryConfig = Field(
        default_factory=EventMemoryConfig, description="The memories events leave."
    )
    memory: MemoryConfig = Field(
        default_factory=MemoryConfig, description="Each household's cognitive memory."
    )
    social: SocialConfig = Field(
        default_factory=SocialConfig, description="Who observes whom (neighbourhoods)."
    )
    decision: DecisionConfig = Field(
        default_factory=DecisionConfig, description="How households decide."
    )
    audit: AuditConfig = Field(default_factory=AuditConfig, description="The JSONL audit trail.")
    engine: Literal["auto", "objects", "arrays"] = Field(
        "auto",
        description="How years are computed. objects: household by household, each with its "
        "state and CognitiveMemory objects (every feature). arrays: all households at once on "
        "columns and a memory pool (simulation/array_engine.py): the same results several times "
        "faster, for the pmt and scripted policies with spec or weighted retrieval (a query "
        "too), every retention policy, with or without reflection, at every audit level, with "
        "memory capacities of up to 8,192 items a household in all, a spare slot per long-term "
        "store included (simulation/memory/pool.py, MAX_SLOTS). auto "
        "(the default): arrays where it implements the config, else objects (the run's "
        "config.resolved.yaml names the engine chosen; floodsim run and validate also name "
        "what keeps a config off arrays).",
        validate_default=True,  # so that auto is resolved when no config names an engine
    )

    @field_validator("engine", mode="after")
    @classmethod
    def _engine_runs_config(cls, engine: str, info: ValidationInfo) -> str:
        if engine == "objects":
            return engine
        problems = array_engine_limits(info.data)
        if engine == "auto":
            # Both engines give the same results (tests/test_array_engine.py), so the choice
            # changes only the speed; it is made here so that every reader sees a real engine.
            return "objects" if problems else "arrays"
        if problems:
            msg = f"arrays does not implement {'; '.join(problems)}; use engine: objects"
            raise ValueError(msg)
        return engine

    @field_validator("insurer", mode="after")
    @classmethod
    def _premium_within_bounds(cls, insurer: InsurerConfig, info: ValidationInfo) -> InsurerConfig:
        insurance = info.data.get("insurance")  # absent when that section failed validation
        if insurance is None or not insurer.enabled:
            return insurer
        rate = insurance.rate_per_1000
        if not insurer.min_rate <= rate <= insurer.max_rate:
            # The insurer would clamp it at its first review: a jump past max_change.
            msg = (
                f"the starting premium insurance.rate_per_1000 ({rate}) lies outside "
                f"[min_rate, max_rate] = [{insurer.min_rate}, {insurer.max_rate}]"
            )
            raise ValueError(msg)
        return insurer

    def to_yaml_dict(self) -> dict[str, Any]:
        """The fully merged config as plain data (for ``config.resolved.yaml``)."""
        return self.model_dump(mode="json")

    def with_settings(self, settings: Mapping[str, Any]) -> RunConfig:
        """A copy with dotted keys set, validated as :func:`load_config` validates a file.

        Pydantic's ``model_copy(update=...)`` does not validate: a misspelt key or a value of
        the wrong type would reach the model. A mapping merges into the section it names, as
        ``--set`` does (``{"memory": {"decay_rate": 0.9}}`` keeps the other memory keys). A
        relative file path is, like the config's own, relative to the folder the model is
        built with (``build_model(config, base_dir)``), not to the working directory.

        Args:
            settings: Dotted key (``"memory.decay_rate"``) to value.

        Raises:
            ConfigError: One line naming the key and the problem.
            TypeError: When ``settings`` is not a mapping (``"years=5"``).

        Example:
            >>> RunConfig().with_settings({"years": 5, "memory.decay_rate": 0.9}).years
            5
        """
        origin = "with_settings"
        if not isinstance(settings, Mapping):
            msg = f"settings: a mapping of dotted keys to values, not {type(settings).__name__}"
            raise TypeError(msg)
        data = self.to_yaml_dict()
        for key, given in settings.items():
            value = _plain(given)
            *sections, name = str(key).split(".")
            node = data
            for part in sections:
                node = node.get(part) if isinstance(node, dict) else None
                if not isinstance(node, dict):
                    msg = f"{origin}: {key}: {part} is not a section"
                    raise ConfigError(msg)
            current = node.get(name)
            merges = isinstance(value, dict) and isinstance(current, dict)
            node[name] = _deep_merge(current, value, (*sections, name)) if merges else value
        try:
            config = RunConfig.model_validate(data)
        except ValidationError as err:
            raise ConfigError(describe_validation_error(err, origin)) from None
        check_event_templates(config, origin)
        return config


def array_engine_limits(sections: Mapping[str, Any]) -> list[str]:
    """What of a run config's validated sections ``engine: arrays`` does not implement.

    Each entry names the key and its value; sections that failed validation are skipped.
    """
    problems = []
    decision = sections.get("decision")
    if decision is not None and decision.policy == "llm":
        problems.append(f"decision.policy {decision.policy}")
    memory = sections.get("memory")
    if memory is not None:
        slots = sum(
            store_widths(
                memory.working_capacity,
                memory.episodic_capacity,
                memory.retention,
                memory.reflection,
            )
        )
        if slots > MAX_SLOTS:
            problems.append(
                f"memory capacities of {slots:,} items a household (it sets aside every item's "
                f"place when a run starts, up to {MAX_SLOTS:,})"
            )
    return problems


def ignored_keys(config: RunConfig, curves_basis: str | None = None) -> list[tuple[list[str], str]]:
    """Keys set away from their defaults that this run never reads, grouped by why (``[]``: none).

    These run (a refusal would stop a comparison run that switches the reading setting off);
    the keys other settings would ignore are refused instead where no shipped config keeps
    them: hazard keys of another source, ``memory.retrieval`` weights under ``spec``,
    ``social.k`` and ``social.p`` outside ``small_world``.

    Args:
        config: The validated config.
        curves_basis: The loaded curve set's ``contents_basis``, which ``auto`` follows
            (``None``: not known, and ``auto`` is taken to read ``renter_contents_ratio``).

    Returns:
        ``(keys, reason)`` pairs: the LLM settings under another policy, the generation
        settings of ``households`` with a household table, ``damage.renter_contents_ratio``
        where contents curves apply to contents value, and ``audit.gzip_level`` without
        ``audit.gzip``.
    """
    groups: list[tuple[list[str], str]] = []
    decision = config.decision
    if decision.policy != "llm":
        default = LLMConfig()
        keys = [
            f"decision.llm.{name}"
            for name in LLMConfig.model_fields
            if getattr(decision.llm, name) != getattr(default, name)
        ]
        if decision.llm_share != DecisionConfig.model_fields["llm_share"].default:
            keys.insert(0, "decision.llm_share")
        if keys:
            groups.append((keys, f"decision.policy is {decision.policy}, not llm"))
    households = config.households
    if households.table is not None:
        default = PopulationConfig()
        keys = []
        for name in _GENERATION_ONLY:
            given, usual = getattr(households, name), getattr(default, name)
            if isinstance(given, BaseModel):  # income.median: the key that was set
                keys += [
                    f"households.{name}.{part}"
                    for part in type(given).model_fields
                    if getattr(given, part) != getattr(usual, part)
                ]
            elif given != usual:
                keys.append(f"households.{name}")
        if keys:
            groups.append((keys, "households.table is set: the table gives the households"))
    damage = config.damage
    basis = damage.owner_contents_basis
    if (basis if basis != "auto" else curves_basis) == "contents" and (
        damage.renter_contents_ratio != DamageConfig.model_fields["renter_contents_ratio"].default
    ):
        why = (
            "damage.owner_contents_basis is contents"
            if basis == "contents"
            else f"the curve set {damage.curves} applies its contents curve to contents value"
        )
        groups.append((["damage.renter_contents_ratio"], why))
    audit = config.audit
    if not audit.gzip and audit.gzip_level != AuditConfig.model_fields["gzip_level"].default:
        groups.append((["audit.gzip_level"], "audit.gzip is false"))
    return groups


# What only generated households read (a table's seeded floods read prior_flood_importance and
# survey_year). Not count: its comment says a table ignores it, and a config adding a table to
# a generated base keeps the base's count.
_GENERATION_ONLY = (
    "owner_share",
    "income",
    "structure_value",
    "contents_ratio",
    "renter_contents",
    "cell_size",
    "ground",
    "bfe_ft",
    "first_floor_height",
    "ae_first_floor_bonus",
    "prior_flood_share",
)


def warn_ignored_keys(
    config: RunConfig,
    origin: str,
    origin_of: Callable[[tuple[str, ...]], str] | None = None,
    curves_basis: str | None = None,
) -> None:
    """Warn (:class:`IgnoredKeyWarning`) naming the keys :func:`ignored_keys` finds.

    ``"<origin>: <key> is ignored because <reason>"``: one warning per reason and origin,
    naming all its keys.

    Args:
        config: The validated config.
        origin: The config file's name.
        origin_of: Names what gave the value at a key (:func:`setting_origin`: a ``--set``
            override, or a ``base:`` file); ``origin`` for every key when not given.
        curves_basis: The loaded curve set's ``contents_basis`` (see :func:`ignored_keys`).
    """
    for keys, reason in ignored_keys(config, curves_basis):
        by_origin: dict[str, list[str]] = {}
        for key in keys:
            given_by = origin if origin_of is None else origin_of(tuple(key.split(".")))
            by_origin.setdefault(given_by, []).append(key)
        for given_by, named_keys in by_origin.items():
            named = spoken_list(named_keys)
            verb = "is" if len(named_keys) == 1 else "are"
            warnings.warn(
                f"{given_by}: {named} {verb} ignored because {reason}",
                IgnoredKeyWarning,
                stacklevel=2,
            )


# ------------------------------------------------------------------------------- file kinds
#: Top-level keys that make a YAML file an experiment rather than a run config.
EXPERIMENT_KEYS = frozenset({"set", "sweep", "replicates", "executor"})
#: Top-level keys every calibration file has (it may have experiment keys too).
CALIBRATION_KEYS = frozenset({"parameters", "targets"})
# Keys only a run config has: experiment and calibration files have a name and a seed too.
_RUN_KEYS = frozenset(RunConfig.model_fields) - {"name", "seed"}
_COMMANDS = {
    "run": "floodsim run",
    "experiment": "floodsim batch",
    "calibration": "floodsim calibrate",
    "targets": "floodsim check-behaviour --targets",
}
_NOUNS = {
    "run": "a run config",
    "experiment": "an experiment file",
    "calibration": "a calibration file",
    "targets": "a targets file",
}


FileKind = Literal["run", "experiment", "calibration", "targets"]


def file_kind(data: dict[str, Any]) -> FileKind:
    """What a YAML mapping is, by its top-level keys: a run config unless it says otherwise."""
    if data.keys() >= CALIBRATION_KEYS:
        return "calibration"
    # A targets file with a stray key is still one, for its validation to name that key: as a
    # run config it would be told that `targets` is unknown.
    if "targets" in data and not (EXPERIMENT_KEYS | _RUN_KEYS) & data.keys():
        return "targets"
    if EXPERIMENT_KEYS & data.keys():
        return "experiment"
    return "run"


def check_file_kind(data: dict[str, Any], expected: FileKind, origin: str) -> None:
    """Refuse a file meant for another command, saying which command it is for.

    Without this, validating a run config as an experiment reports a dozen unknown keys.

    Raises:
        ConfigError: Naming the file, what it is and the command that runs it.
    """
    other = _floodsim_output(data)
    if other is not None:
        raise ConfigError(f"{origin}: this is {other}")
    kind = file_kind(data)
    if kind == expected:
        return
    what = _NOUNS[kind]
    if kind == "run":
        own = [key for key in data if key in _RUN_KEYS]
        if not own:  # no telling: let the file's own validation name what is wrong
            return
        what += f" (it sets {own[0]})"
    msg = f"{origin}: this is {what}, not {_NOUNS[expected]}; run it with {_COMMANDS[kind]}"
    raise ConfigError(msg)


def _floodsim_output(data: dict[str, Any]) -> str | None:
    """What other floodsim file ``data`` is, and what to give instead (``None``: none of them).

    A registry, a run's manifest or a batch's record given where a config goes would
    otherwise be reported as a run config with unknown keys.
    """
    if {"version", "skills"} <= data.keys():
        return "a skill registry, not a config; a run config names it with registry:"
    if {"run_id", "config_hash"} <= data.keys():
        return "a run's manifest, not a config; the run's config is config.resolved.yaml beside it"
    if {"calibration", "parameters", "fingerprint"} <= data.keys():
        return (
            "a calibration's summary (best.yaml), not a config; give its parameters to a run "
            "config, as keys or with --set KEY=VALUE"
        )
    if {"experiment", "runs"} <= data.keys():
        return (
            "a batch's record (experiment.json), not a config; give the experiment file it was "
            "run from"
        )
    return None


def remove_outputs(folder: Path, names: Iterable[str]) -> None:
    """Remove the entries ``names`` of ``folder`` that exist (a folder with what it holds).

    Used where floodsim replaces its own outputs and must leave the rest of the folder alone.
    A link is removed, never followed.
    """
    for name in names:
        path = folder / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def create_output_folder(folder: Path) -> None:
    """Create an output folder and its parents (``--out``); one that cannot exist is bad input.

    Called once the config is valid, so a bad config leaves no folder behind.

    Raises:
        ConfigError: Naming the folder and why it cannot be created.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        msg = f"{folder}: cannot create the output folder: {_why_no_folder(folder, err)}"
        raise ConfigError(msg) from None


def _why_no_folder(folder: Path, err: OSError) -> str:
    """Why ``mkdir`` failed, where it says only "File exists": what stands in the way."""
    for part in (folder, *folder.parents):
        if part.is_symlink():
            try:
                part.stat()
            except OSError as broken:
                if broken.errno == errno.ELOOP:
                    return f"{part} is a link that leads round in a loop"
                return f"{part} is a link to {os.readlink(part)}, which does not exist"
        if os.path.lexists(part) and not part.is_dir():
            return f"{part} is a file, not a folder"
    return err.strerror or str(err)


# ---------------------------------------------------------------------------------- loading
def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping safely.

    Raises:
        ConfigError: If the file is missing, unreadable, not YAML, empty (nothing but blank
            lines and comments), or not a mapping.
    """
    try:
        text = read_text(path)
    except FileNotFoundError:
        msg = f"{path}: file not found"
        raise ConfigError(msg) from None
    except IsADirectoryError:
        msg = f"{path}: a folder, not a config file"
        if (path / "config.resolved.yaml").is_file():  # a run directory, given for its config
            msg = (
                f"{path}: a run directory, not a config file: run its config again with "
                f"floodsim run {path / 'config.resolved.yaml'}, or continue it with "
                f"floodsim run --resume {path}"
            )
        raise ConfigError(msg) from None
    except OSError as err:
        msg = f"{path}: cannot read: {err.strerror}"
        raise ConfigError(msg) from None
    except UnicodeDecodeError as err:
        msg = f"{path}: {describe_decode_error(err)}"
        raise ConfigError(msg) from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as err:
        msg = f"{path}: YAML syntax error: {describe_yaml_error(err)}"
        raise ConfigError(msg) from None
    if data is None and _is_blank(text):
        # Not "all defaults": an empty file is a save that went wrong or the wrong file, and
        # read as a run config it would fail on a skill registry next to it instead.
        msg = f"{path}: the file is empty (nothing but blank lines and comments)"
        raise ConfigError(msg)
    if not isinstance(data, dict):
        got = "null" if data is None else type(data).__name__
        if isinstance(data, str):
            # A CSV table or a prose file parses as one long YAML string: show its start.
            got = f"text ({data[:40]!r}{'...' if len(data) > 40 else ''})"
            if path.suffix.lower() in (".csv", ".tsv", ".txt"):
                got += f": a {path.suffix[1:].upper()} file, where a YAML config goes"
        msg = f"{path}: top level must be a mapping of keys (key: value lines), got {got}"
        raise ConfigError(msg)
    return data


def _is_blank(text: str) -> bool:
    """Whether YAML ``text`` holds no document: only blank lines, comments and markers."""
    return all(
        not line.strip() or line.lstrip().startswith("#") or line.strip() in ("---", "...")
        for line in text.splitlines()
    )


WHOLE_TABLES: frozenset[tuple[str, ...]] = frozenset({("hazard", "events"), ("hazard", "rasters")})
"""Year-keyed tables that a value replaces whole instead of merging into.

They are data, not sections: merged, ``hazard: {events: {}}`` over a base with a year-10 flood
would still flood in year 10, and ``{4: 9.5}`` over ``{2: 9.5, 4: 7.0}`` would keep year 2.
Coefficient mappings (``decision.pmt.asc``, ``insurance.zone_multiplier``) still merge, since
overriding one entry is what a config means there.
"""


def _deep_merge(
    base: dict[str, Any], override: dict[str, Any], at: tuple[str, ...] = ()
) -> dict[str, Any]:
    """``override`` over ``base``, section by section; ``at`` is where both sit in the config.

    A table in :data:`WHOLE_TABLES` is taken from ``override`` as given.
    """
    if at in WHOLE_TABLES:
        return dict(override)
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value, (*at, str(key)))
        else:
            merged[key] = value
    return merged


def resolve_base(path: Path, data: dict[str, Any], seen: tuple[Path, ...]) -> dict[str, Any]:
    """Merge a ``base:`` file under ``data`` (recursively; paths relative to each file)."""
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        msg = f"{path}: base: must be a path string, got {type(base).__name__}"
        raise ConfigError(msg)
    base_path = (path.parent / base).resolve()
    if not base_path.is_file():
        msg = f"{path}: base: {base_path}: file not found"
        raise ConfigError(msg)
    if base_path in seen:
        msg = f"{path}: base: circular inheritance through {base_path}"
        raise ConfigError(msg)
    parent = resolve_base(base_path, read_yaml(base_path), (*seen, base_path))
    rebase_paths(parent, base_path.parent)
    return _deep_merge(parent, data)


def rebase_paths(data: dict[str, Any], folder: Path) -> None:
    """Make the file paths in ``data`` absolute against ``folder``, in place.

    For a ``base:`` file, its own folder: its paths stay relative to *it*, not to the file
    that inherits them. The keys are ``registry``, ``households.table``, a ``damage.curves``
    file, ``decision.script``, ``hazard.rasters`` and the LLM's ``decision.llm.cache`` and
    ``prompt``.
    """

    def absolute(value: Any) -> Any:
        # An empty path stays empty, for the config to refuse: resolved, it names the folder.
        return str((folder / value).resolve()) if isinstance(value, str) and value else value

    if "registry" in data:
        data["registry"] = absolute(data["registry"])
    households = data.get("households")
    if isinstance(households, dict) and households.get("table"):
        households["table"] = absolute(households["table"])
    damage = data.get("damage")
    if isinstance(damage, dict) and isinstance(damage.get("curves"), str):
        curves = damage["curves"]
        if is_curve_file(curves):
            damage["curves"] = absolute(curves)
    decision = data.get("decision")
    if isinstance(decision, dict):
        if decision.get("script"):
            decision["script"] = absolute(decision["script"])
        llm = decision.get("llm")
        if isinstance(llm, dict):
            for key in ("cache", "prompt"):
                if isinstance(llm.get(key), str) and llm[key]:
                    # Not resolve(): it would follow a broken link to where it points, and the
                    # cache check would create that folder instead of naming the broken link.
                    llm[key] = os.path.abspath(folder / llm[key])
    hazard = data.get("hazard")
    if isinstance(hazard, dict) and isinstance(hazard.get("rasters"), dict):
        hazard["rasters"] = {year: absolute(p) for year, p in hazard["rasters"].items()}


def apply_overrides(
    data: dict[str, Any],
    overrides: list[str],
    origin: str,
    *,
    where: str = "--set ",
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Apply ``KEY=VALUE`` overrides with dotted keys; values are parsed as YAML.

    A mapping value (``memory={decay_rate: 0.9}``) is merged into the section it names; one
    for a table in :data:`WHOLE_TABLES` (``hazard.events={4: 9.5}``) replaces it whole, and a
    key into one (``hazard.events.4=9.5``) sets that year's entry, keeping the others.
    ``where`` prefixes the key in error messages: ``--set `` for the command line, ``set.`` for
    a file's ``set:`` mapping. A command-line override's error names only its flag, not
    ``origin``: the file is not at fault.

    Args:
        data: The config as plain data (not changed).
        overrides: ``KEY=VALUE`` strings.
        origin: The file named in errors (unless ``where`` is ``--set ``).
        where: How the overrides were given, as above.
        cwd: When given, relative file paths among the values (registry, households.table, a
            damage.curves file, decision.script, hazard.rasters, decision.llm.cache and
            prompt) are made absolute against it: a path typed on the command line is
            relative to where it was typed, not to the config file.

    Raises:
        ConfigError: For an override without ``=`` or an unparsable value.
    """
    prefix = "" if where == "--set " else f"{origin}: "
    result = _deep_merge({}, data)
    for override in overrides:
        key, sep, raw = override.partition("=")
        key = key.strip()
        if not sep or not key:
            msg = f"{prefix}{where}{override!r}: expected KEY=VALUE with a dotted KEY"
            raise ConfigError(msg)
        try:
            value = load_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError as err:
            # A key pasted where the variable's name goes is never echoed (as in validation).
            secret = key.rpartition(".")[2] in SECRET_KEY_NAMES
            shown = "(value not shown)" if secret else shown_value(raw)
            why = (
                f": {err.problem}"  # read, but not a value floodsim can hold (a huge integer)
                if isinstance(err, yaml.constructor.ConstructorError) and err.problem
                else " (a value is read as YAML: put text holding ': ', braces or brackets in "
                "quotes)"
            )
            msg = f"{prefix}{where}{key}: cannot parse value {shown}{why}"
            raise ConfigError(msg) from None
        parts = key.split(".")
        if cwd is not None:
            value = _absolute_at(parts, value, cwd)
        node = result
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {} if child is None else child
                if not isinstance(child, dict):
                    msg = f"{prefix}{where}{key}: {part} is not a section"
                    raise ConfigError(msg)
                node[part] = child = dict(child)
            else:
                node[part] = child = dict(child)
            node = child
        last: object = parts[-1]
        if tuple(parts[:-1]) in WHOLE_TABLES:
            # One year's entry (`hazard.events.5=12.0`): the year written in the file (5, an
            # integer) and the one a dotted key gives ("5", or "05" or "0x5" as the file's
            # YAML would read them) are one year, replaced in place.
            year = year_key(last)
            last = next((k for k in node if table_year(k) == year), year)
        current = node.get(last)
        if isinstance(value, dict) and isinstance(current, dict):
            # A mapping merges key by key, as a ``base:`` file's sections do: the keys it
            # leaves out keep the config's values, not the model's defaults (a year-keyed
            # table such as ``hazard.events`` is replaced whole, as there).
            value = _deep_merge(current, value, tuple(parts))
        node[last] = value
    return result


def year_key(key: object) -> object:
    """A dotted key's year (``hazard.events.010``) as a YAML file would read it: year 10.

    ``"010"``, ``"0xA"`` and ``"1e1"`` are 10, and a float ``10.0`` is too. Anything that is not
    a whole number stays as it is (stripped), for the field to refuse.
    """
    if isinstance(key, str):
        try:
            read = load_yaml(key)
        except yaml.YAMLError:
            return key.strip()
    else:
        read = key
    if type(read) is float and read.is_integer():
        return int(read)
    if type(read) is int:
        return read
    return key.strip() if isinstance(key, str) else key


def table_year(key: object) -> object:
    """A year table's own key as its field reads it: ``4``, ``4.0``, ``"04"`` are year 4.

    Unlike :func:`year_key`, which reads a dotted key's text as YAML would, a key the file
    quoted is read as the field reads text: ``'1e0'`` is no year, and the field refuses it.
    Anything that is not a year is returned as it is.
    """
    if isinstance(key, bool):
        return key
    try:
        return _YEAR_KEY.validate_python(key)
    except ValidationError:
        return key


def canonical_key(key: str) -> str:
    """A dotted key with a year of a year table written as a plain number.

    ``hazard.events.02`` and ``hazard.events.0x2`` are ``hazard.events.2``, the year
    :func:`apply_overrides` sets for any of them; other keys are returned as they are. An
    experiment's or calibration's keys are compared as text, so they are read this way first.
    """
    table, _, year = key.rpartition(".")
    if tuple(table.split(".")) in WHOLE_TABLES and type(read := year_key(year)) is int:
        return f"{table}.{read}"
    return key


def canonical_keys(keys: Mapping[str, Any]) -> dict[str, Any]:
    """``keys`` with every key :func:`canonical_key`, refusing two that are one key.

    Raises:
        ValueError: Naming both spellings (``hazard.events.02 and hazard.events.2 ...``).
    """
    seen: dict[str, str] = {}
    result: dict[str, Any] = {}
    for key, value in keys.items():
        canonical = canonical_key(key)
        if canonical in seen:
            msg = f"{seen[canonical]} and {key} are one key ({canonical}); give it once"
            raise ValueError(msg)
        seen[canonical] = key
        result[canonical] = value
    return result


def _absolute_at(parts: list[str], value: Any, cwd: Path) -> Any:
    """``value``, given for the dotted key ``parts``, with its relative file paths made absolute."""
    nested: dict[str, Any] = {}
    inner = nested
    for part in parts[:-1]:
        inner = inner.setdefault(part, {})
    inner[parts[-1]] = copy.deepcopy(value)
    rebase_paths(nested, cwd)  # knows which keys are paths
    for part in parts:
        nested = nested[part]
    return nested


def load_config(
    path: str | Path, overrides: list[str] | None = None, seed: int | None = None
) -> tuple[RunConfig, Path]:
    """Load, merge and validate a run config.

    Args:
        path: The YAML file.
        overrides: ``KEY=VALUE`` strings with dotted keys (``--set``).
        seed: Overrides ``seed`` (``--seed``).

    Returns:
        The validated config and the folder relative paths in it refer to.

    Raises:
        ConfigError: One line naming the file, the key and the problem.
    """
    if isinstance(overrides, str):  # iterated, it would be one override per character
        msg = f"overrides: a list of KEY=VALUE strings, not one string ({[overrides]!r})"
        raise TypeError(msg)
    path = Path(path)
    origin = str(path)
    data = read_yaml(path)
    check_file_kind(data, "run", origin)
    resolved = resolve_base(path.resolve(), data, (path.resolve(),))
    data = apply_overrides(resolved, overrides, origin, cwd=Path.cwd()) if overrides else resolved
    if seed is not None:
        data["seed"] = seed
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        # A check across keys (value_error) may fault a combination that no one file makes.
        own_value = first["type"] not in ("value_error", "assertion_error", "missing")
        culprit = _flag_setting(first["loc"], first["type"], overrides or [], seed, own_value)
        if culprit is None and not own_value and overrides:
            culprit = _flag_failing_check(first, resolved, overrides, seed, origin)
        if culprit is None:
            culprit = _file_setting(path, first["loc"]) if own_value else origin
        raise ConfigError(describe_validation_error(err, culprit)) from None

    def template_origin(loc: tuple[str, ...]) -> str:
        return _flag_setting(loc, "value_error", overrides or [], seed, True) or _file_setting(
            path, loc
        )

    check_event_templates(config, origin, origin_of=template_origin)
    warn_code_defaults(config, data, origin)
    return config, path.resolve().parent


#: Keys ``configs/default.yaml`` sets away from the code's defaults: the values fitted by
#: ``configs/calibration/baseline.yaml`` (README, "Calibration") and the memory sizes of the
#: default world. The code keeps the hand-tuned values the PMT docstring derives, and the
#: CognitiveMemory defaults of the memory spec, for configs built in Python; a YAML config whose
#: ``base:`` chain does not reach default.yaml gets those, which is warned of
#: (:func:`warn_code_defaults`). ``tests/test_config.py`` checks this list against the file.
DEFAULT_WORLD_KEYS = (
    "decision.pmt.threat_gain",
    "decision.pmt.beta_tp",
    "decision.pmt.renewal_inertia",
    "decision.pmt.asc.buy_insurance",
    "decision.pmt.insurance_zone_asc.X",
    "memory.decay_rate",
    "memory.working_capacity",
    "memory.retrieval.top_k",
)


def warn_code_defaults(config: RunConfig, data: dict[str, Any], origin: str) -> None:
    """Warn (:class:`CodeDefaultsWarning`) when a config leaves keys of the default world unset.

    Without ``base: configs/default.yaml`` (directly or through its bases) a config gets the
    code's uncalibrated values of :data:`DEFAULT_WORLD_KEYS`: insurance take-up outside the
    floodplain about ten times the calibrated one, with no other sign. Keys the run never
    reads (the PMT coefficients of scripted decisions, or of LLM decisions for every household)
    are not named.

    Args:
        config: The validated config.
        data: The config as plain data, its bases merged in (what set each key).
        origin: The config file (or the experiment file whose runs it makes), for the message.
    """
    decision = config.decision
    reads_pmt = decision.policy == "pmt" or (decision.policy == "llm" and decision.llm_share < 1)
    unset = [
        key
        for key in DEFAULT_WORLD_KEYS
        if (reads_pmt or not key.startswith("decision.pmt.")) and not _has_key(data, key.split("."))
    ]
    if not unset:
        return
    warnings.warn(
        f"{origin}: {', '.join(unset)} not set (by it or a base: file): the run takes the "
        "code's uncalibrated default for each, not the value configs/default.yaml sets; start "
        "the config from base: <path to>/configs/default.yaml to get those",
        CodeDefaultsWarning,
        stacklevel=2,
    )


def _plain(value: Any) -> Any:
    """``value`` with every mapping in it a dict (and every tuple a list), as YAML gives data."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return value


def _has_key(data: Any, keys: Sequence[int | str]) -> bool:
    """Whether the nested mapping ``data`` holds the path ``keys``."""
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return False
        data = data[key]
    return True


def setting_origin(
    origin: str, overrides: list[str] | None, seed: int | None = None
) -> Callable[[tuple[str, ...]], str]:
    """What to name in an error about the value at a key: what gave the value.

    For the checks of the files a config names (:func:`simulation.runner.build_model`): a
    missing ``--set decision.script=x.csv`` is the command line's fault, not the file's, and
    a registry missing beside a ``base:`` file is that file's fault, not its child's.

    Args:
        origin: The config file, named when neither an override nor a base file gave the value.
        overrides: The ``--set`` overrides, as given to :func:`load_config`.
        seed: The ``--seed`` value, if any.

    Returns:
        From a key path (``("decision", "script")``), the override, else the file of the
        ``base:`` chain that set it, else ``origin``.
    """
    # Building a model names several keys' origins: each file of the chain is read once.
    read = functools.cache(read_yaml)

    def origin_of(loc: tuple[str, ...]) -> str:
        flag = _flag_setting(loc, "value_error", overrides or [], seed, True)
        return flag or _file_setting(Path(origin), loc, read)

    return origin_of


def _flag_setting(
    loc: tuple[int | str, ...],
    error_type: str,
    overrides: list[str],
    seed: int | None,
    own_value: bool,
) -> str | None:
    """The ``--set`` override (or ``--seed``) that gave the faulted value at ``loc``, if one did.

    Named instead of the file, so that the user fixes the command line, not a file that is
    right. A later override wins over an earlier one; one whose mapping value leaves ``loc``
    out merged it from the config, which is then named. A check across keys (``own_value``
    false) names an override only when it set the faulted key itself, not its whole section.
    """
    loc = tuple(part for part in loc if part != "[key]")  # a mapping's bad key: named anyway
    if seed is not None and loc == ("seed",):
        return f"--seed {seed}"
    index = _setting_override(loc, error_type, overrides, own_value)
    return None if index is None else _shown_override(overrides[index])


# Error types of a key no section has (a pydantic model's, a dataclass's).
_UNKNOWN_KEY = ("extra_forbidden", "unexpected_keyword_argument")


def _setting_override(
    loc: tuple[int | str, ...], error_type: str, overrides: list[str], own_value: bool
) -> int | None:
    """The index of the override that gave the value at ``loc`` (see :func:`_flag_setting`)."""
    loc = tuple(part for part in loc if part != "[key]")
    # A year is compared as the text its key reads as (`--set hazard.events.03=x` sets year 3).
    said = _years_read(loc, table_year)
    for index in reversed(range(len(overrides))):
        key, _, raw = overrides[index].partition("=")
        parts = _years_read(key.strip().split("."), year_key)
        if said[: len(parts)] == parts:
            value: Any = load_yaml(raw) if raw.strip() else ""  # parsed once already
            node = _value_at(value, loc[len(parts) :])
            if node is not _ABSENT and (own_value or not isinstance(node, dict)):
                return index
        elif said and parts[: len(said)] == said and error_type in _UNKNOWN_KEY:
            return index  # it made up the unknown section
    return None


def _years_read(path: Sequence[Any], read: Callable[[object], object]) -> tuple[str, ...]:
    """``path`` as text, the part after a year table read as a year by ``read``."""
    return tuple(
        str(read(part) if tuple(path[:at]) in WHOLE_TABLES else part)
        for at, part in enumerate(path)
    )


def _flag_failing_check(
    error: Any, resolved: dict[str, Any], overrides: list[str], seed: int | None, origin: str
) -> str | None:
    """The ``--set`` override that made a check across keys fail, if one did.

    Only when the config passes the check without the overrides: then the one that set a key
    the check's message names (:func:`_named_keys`) and fails it on its own, such as ``--set
    insurer.max_rate=1.5`` below the default ``min_rate`` of 2.0; when none fails it on its
    own (two that fail only together), the one of the key named first. A file whose
    ``min_rate`` lies above the starting premium is named beside ``--set
    insurer.max_rate=11``, which the message names as well. Only an error's path pays for the
    configs validated again here.
    """
    loc = error["loc"]
    if not _passes_check(loc, resolved, [], seed, origin):
        return None
    suspects: list[int] = []
    for named in _named_keys(error):
        index = _setting_override(named, error["type"], overrides, True)
        if index is not None and index not in suspects:
            suspects.append(index)
    # An override inside the section the check is about (--set hazard.events.3=9.0 against
    # the check of hazard.events) is one too, checked on its own like the others.
    within = tuple(part for part in loc if part != "[key]")
    for index, override in enumerate(overrides):
        parts = tuple(override.partition("=")[0].strip().split("."))
        if within and parts[: len(within)] == within and index not in suspects:
            suspects.append(index)
    for index in suspects:
        if not _passes_check(loc, resolved, [overrides[index]], seed, origin):
            return _shown_override(overrides[index])
    return _shown_override(overrides[suspects[0]]) if suspects else None


def _passes_check(
    loc: tuple[int | str, ...],
    resolved: dict[str, Any],
    overrides: list[str],
    seed: int | None,
    origin: str,
) -> bool:
    """Whether the config with only ``overrides`` passes the check at ``loc``."""
    data = apply_overrides(resolved, overrides, origin, cwd=Path.cwd())
    if seed is not None:
        data["seed"] = seed
    try:
        RunConfig.model_validate(data)
    except ValidationError as err:
        return all(again["loc"] != loc for again in err.errors())
    return True


_ABSENT = object()
#: The dotted key a check across keys starts its message with (``w_recency: only read by ...``).
_NAMED_KEY = re.compile(r"(?:Value error, )?([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*): ")
#: A dotted name anywhere in such a message (``min_rate``, ``insurance.rate_per_1000``), but
#: not the exponent of a number (``1e+09``).
_MENTIONED_KEY = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def _named_keys(error: Any) -> Iterator[tuple[int | str, ...]]:
    """The full paths of the keys a check across keys faults, the one at fault most likely first.

    First the key its message starts with, relative to the error's location, which it may
    repeat (``events: ...`` at ``hazard`` and ``hazard.events: ...`` at the top both name
    ``hazard.events``); then the key the check validates (its location); then every other name
    in the message, relative to the location and, when dotted, from the top
    (``insurance.rate_per_1000`` in a check of ``insurer``) and beside it (a field's check
    names its siblings: ``distribution`` in ``hazard.mean``'s). Words that name no key
    (``must``, ``got``) give paths that no override sets.
    """
    loc = tuple(part for part in error["loc"] if part != "[key]")
    message = error["msg"]
    match = _NAMED_KEY.match(message)
    if match is not None:
        yield _below(loc, tuple(match.group(1).split(".")))
    if loc:
        yield loc
    for name in _MENTIONED_KEY.findall(message, match.end() if match else 0):
        parts = tuple(name.split("."))
        yield _below(loc, parts)
        if len(loc) > 1:  # a field's check names its siblings (hazard.mean's "distribution")
            yield loc[:-1] + parts
        if len(parts) > 1:
            yield parts


def _below(loc: tuple[int | str, ...], parts: tuple[str, ...]) -> tuple[int | str, ...]:
    """The path of key ``parts`` named at ``loc``, which may repeat the end of ``loc``."""
    for start in range(len(loc) + 1):
        if loc[start:] == parts[: len(loc) - start]:
            return loc[:start] + parts
    return loc + parts


def _value_at(value: Any, loc: tuple[int | str, ...]) -> Any:
    """What ``value`` holds at ``loc`` (``_ABSENT`` when it leaves that key out).

    A part that names a union's member rather than a key or an index (``audit.sample.float``)
    is passed over. A mapping's key is also found by its text: pydantic locates a bad key by
    ``str(key)`` (``'4.5'`` for the YAML key ``4.5``).
    """
    node = value
    for part in loc:
        if isinstance(node, dict):
            key = part if part in node else next((k for k in node if str(k) == str(part)), _ABSENT)
            if key is _ABSENT:
                return _ABSENT
            node = node[key]
        elif isinstance(node, list) and isinstance(part, int):
            if part >= len(node):
                return _ABSENT
            node = node[part]
    return node


def _shown_override(override: str) -> str:
    """``--set KEY=VALUE`` as typed, without a value that may hold a secret."""

    def secret_inside(node: Any) -> bool:
        return isinstance(node, dict) and any(
            key in SECRET_KEY_NAMES or secret_inside(item) for key, item in node.items()
        )

    key, _, raw = override.partition("=")
    parts = tuple(key.strip().split("."))
    if (
        parts[-1] in SECRET_KEY_NAMES
        or url_holds_credentials(raw.strip())
        or secret_inside(load_yaml(raw) if raw.strip() else "")
    ):
        return f"--set {'.'.join(parts)}=(value not shown)"
    return f"--set {override}"


def _file_setting(
    path: Path,
    loc: tuple[int | str, ...],
    read: Callable[[Path], dict[str, Any]] = read_yaml,
) -> str:
    """The file whose value at ``loc`` the merged config holds, to name it in an error.

    The file wins over its ``base:``, and so on down the chain; a key that none of them sets
    (a missing one, a cross-key check) names ``path``. ``--set`` overrides are looked up first
    (:func:`_flag_setting`). ``read`` reads each file of the chain (a cached reader serves many
    lookups).
    """
    current, seen = path.resolve(), set()
    while current not in seen:
        seen.add(current)
        try:
            data = read(current)
        except ConfigError:
            break
        if _has_key(data, loc):
            return str(path) if current == path.resolve() else str(current)
        base = data.get("base")
        if not isinstance(base, str):
            break
        current = (current.parent / base).resolve()
    return str(path)


def check_event_templates(
    config: RunConfig,
    origin: str,
    *,
    origin_of: Callable[[tuple[str, ...]], str] | None = None,
) -> None:
    """Check that every event template parses and names only the placeholders it is given.

    Args:
        config: The validated config.
        origin: The config file, named in the error.
        origin_of: Names instead what set a template (from its key, such as
            ``("events", "flood_major", "template")``): its file, or a ``--set`` override.

    Raises:
        ConfigError: Naming ``origin``, the template's key and the bad placeholder.
    """

    def where(name: str) -> str:
        # Only for an error: finding the file that set a template reads the config's files.
        return origin if origin_of is None else origin_of(("events", name, "template"))

    for name, allowed in EVENT_FIELDS.items():
        template = getattr(config.events, name).template
        try:
            used = template_fields(template)
        except TemplateError as err:
            msg = f"{where(name)}: events.{name}.template: {err}"
            raise ConfigError(msg) from None
        unknown = sorted(used - allowed)
        if unknown:
            msg = (
                f"{where(name)}: events.{name}.template: unknown placeholder {unknown[0]!r} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
            raise ConfigError(msg)
        # A spec its value cannot take ("{damage:d}") would otherwise stop the run at the
        # first such event, years in, as the registry's templates are checked at load.
        try:
            sample = render(template, {field: _EVENT_SAMPLES[field] for field in used})
        except TemplateError as err:
            raise ConfigError(f"{where(name)}: events.{name}.template: {err}") from None
        if not shows_text(sample):  # "{action:.0}": placeholders only, each cut to nothing
            msg = (
                f"{where(name)}: events.{name}.template: renders as blank text ({sample!r}): "
                "the memory would hold no text"
            )
            raise ConfigError(msg)

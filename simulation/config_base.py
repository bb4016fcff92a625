"""The base of every config model: what all of floodsim's YAML files refuse alike.

Run configs (and the sections defined next to the code that uses them), experiment,
calibration and targets files are pydantic models built on :class:`ConfigModel`. It lives in a
module of its own because those sections are imported by :mod:`simulation.config`, which builds
on them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

__all__ = ["ConfigModel"]

# Field types for which a YAML boolean is a typo rather than a value.
_NUMBERS = frozenset({int, float, int | None, float | None})


class ConfigModel(BaseModel):
    """A config model: unknown keys, NaN, infinity and booleans given as numbers are errors.

    Values are immutable once validated. NaN and infinity (YAML ``.nan``, ``.inf``) mean nothing
    as a rate, cost, limit, count or coefficient; a missing limit is ``null`` where the key
    allows it. YAML reads ``true`` as a boolean, which pydantic would otherwise take as the
    number 1 (``years: true`` would run one year).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _booleans_are_not_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and cls.model_fields[info.field_name].annotation in _NUMBERS:
            msg = "expected a number, not a boolean"
            raise ValueError(msg)
        return value

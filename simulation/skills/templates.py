"""Safe formatting of memory templates such as ``"Year {year}: premium ${premium:,.0f}"``.

Templates come from configuration files, so they are treated as untrusted: only plain named
placeholders with an optional format spec are accepted. ``str.format`` would resolve
``{year.__class__}`` or ``{values[0]}`` by attribute and index access on the values; here such
placeholders are rejected before anything is formatted, and :func:`render` never resolves a
field name itself: it looks the plain name up in the given mapping and passes the value and the
literal spec to :func:`format`.
"""

from __future__ import annotations

import re
import string
import unicodedata
from functools import lru_cache
from typing import TYPE_CHECKING

from simulation.errors import InputError, shown_value

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

__all__ = [
    "MAX_SPEC_NUMBER",
    "TemplateError",
    "render",
    "render_many",
    "shows_text",
    "template_fields",
]

_FORMATTER = string.Formatter()
# A memory is a sentence: a width or precision above this only pads it ("{year:>999999999}"
# made a gigabyte of text a household, and overflowed the array engine's table of texts).
MAX_SPEC_NUMBER = 200
_NUMBERS = re.compile(r"\d+")


class TemplateError(InputError):
    """A template uses a forbidden placeholder, is malformed or lacks a value when rendered."""


# Unicode calls these letters or symbols, yet they show nothing: the Hangul fillers and the
# blank Braille pattern.
_BLANK_LOOKING = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def shows_text(text: str) -> bool:
    """Whether ``text`` shows anything: a letter, digit, punctuation mark or symbol.

    ``str.strip`` keeps what renders as nothing in an audit line or a prompt: a zero-width
    space (U+200B), a byte-order mark, a combining mark or variation selector on its own, or
    a Hangul filler. A memory or tag of such characters only is blank.
    """
    return any(
        unicodedata.category(char)[0] in "LNPS" and char not in _BLANK_LOOKING for char in text
    )


@lru_cache(maxsize=1024)
def _pieces(template: str) -> tuple[tuple[str, str | None, str], ...]:
    """The ``(literal, name, spec)`` pieces of a template, every placeholder checked.

    Cached: a run renders the same few templates hundreds of thousands of times (failures are
    not cached, so a bad template raises every time).

    Raises:
        TemplateError: For malformed braces or a placeholder that is not a plain name.
    """
    return tuple(_parse(template))


def _parse(template: str) -> Iterator[tuple[str, str | None, str]]:
    try:
        parsed = list(_FORMATTER.parse(template))
    except ValueError as exc:
        msg = f"malformed template {shown_value(template)}: {exc}"
        raise TemplateError(msg) from None
    for literal, name, spec, conversion in parsed:
        if name is None:
            yield literal, None, ""
            continue
        shown = f"{{{name}{'!' + conversion if conversion else ''}{':' + spec if spec else ''}}}"
        if not name or name.isdigit():
            msg = f"positional placeholder {shown!r} is not allowed; use a name"
            raise TemplateError(msg)
        if not name.isidentifier():
            # Covers attribute access ("a.b"), indexing ("a[0]") and anything else exotic.
            msg = f"placeholder {shown!r} is not a plain name (no attribute or index access)"
            raise TemplateError(msg)
        if conversion is not None:
            msg = f"placeholder {shown!r} uses a conversion (!{conversion}), which is not allowed"
            raise TemplateError(msg)
        if "{" in spec or "}" in spec:
            msg = f"placeholder {shown!r} has a nested field in its format spec"
            raise TemplateError(msg)
        if any(int(number) > MAX_SPEC_NUMBER for number in _NUMBERS.findall(spec)):
            msg = (
                f"placeholder {shown!r}: a width or precision above {MAX_SPEC_NUMBER} is not "
                "allowed (a memory is a short text)"
            )
            raise TemplateError(msg)
        yield literal, name, spec


def template_fields(template: str) -> set[str]:
    """Return the placeholder names a template uses.

    Args:
        template: A ``str.format``-style template restricted to plain named placeholders with an
            optional format spec, e.g. ``"{premium:,.0f}"`` or ``"{subsidy_share:.0%}"``.

    Returns:
        The set of placeholder names.

    Raises:
        TemplateError: For malformed braces, a positional or empty placeholder (``{}``,
            ``{0}``), attribute or index access (``{a.b}``, ``{a[0]}``), a conversion
            (``{a!r}``), a nested field in a format spec (``{a:{w}}``) or a width or precision
            above :data:`MAX_SPEC_NUMBER` (``{a:>1000}``); the message names the placeholder.
    """
    return {name for _, name, _ in _pieces(template) if name is not None}


def render(template: str, values: Mapping[str, object]) -> str:
    """Format ``template`` with ``values``, using plain names only.

    Args:
        template: The template (checked as in :func:`template_fields`).
        values: Value for each placeholder name; extra entries are ignored.

    Returns:
        The formatted text.

    Raises:
        TemplateError: If the template is not allowed, a placeholder has no value, or a value
            does not accept its format spec (e.g. ``{premium:,.0f}`` given a string).
    """
    pieces = _pieces(template)  # checks the template (cached), so format_map is safe
    try:
        # Only plain names remain, so str.format_map does exactly what the loop below does
        # (one mapping lookup and one format() per placeholder), in C: a run renders a few
        # templates for every household every year.
        return template.format_map(values)
    except (KeyError, ValueError, TypeError):
        return _render_explained(pieces, values)


def render_many(
    template: str, values: Mapping[str, object], columns: Mapping[str, Sequence[object]]
) -> list[str]:
    """:func:`render` once for each row of ``columns``, with ``values`` for the other names.

    The same texts as ``[render(template, {**values, **row}) for row in rows]``, faster: the
    placeholders ``values`` fill are formatted once, and each row formats only its columns.

    Args:
        template: The template (checked as in :func:`template_fields`).
        values: Value for each placeholder name that is not a column; extra entries are ignored.
        columns: Values for some placeholder names, a sequence per name, all of one length;
            where a name is both, the column's value is used.

    Returns:
        One text per row of ``columns``.

    Raises:
        TemplateError: As :func:`render`, for the first row that cannot be rendered.
    """
    names = list(columns)
    parts: list[str] = []
    for literal, name, spec in _pieces(template):  # checked: plain names, no braces in specs
        parts.append(literal.replace("{", "{{").replace("}", "}}"))
        if name is None:
            continue
        if name in columns:
            parts.append(f"{{{names.index(name)}:{spec}}}")
        else:
            fixed = _render_explained((("", name, spec),), values)
            parts.append(fixed.replace("{", "{{").replace("}", "}}"))
    form = "".join(parts).format
    rows = list(zip(*columns.values(), strict=True))
    try:
        return [form(*row) for row in rows]
    except (ValueError, TypeError):
        # A value its spec does not take: render's error names the placeholder and the value.
        return [render(template, {**values, **dict(zip(names, row, strict=True))}) for row in rows]


def _render_explained(
    pieces: tuple[tuple[str, str | None, str], ...], values: Mapping[str, object]
) -> str:
    """Render piece by piece, raising a :class:`TemplateError` that names the placeholder."""
    parts: list[str] = []
    for literal, name, spec in pieces:
        parts.append(literal)
        if name is None:
            continue
        if name not in values:
            msg = f"no value for placeholder {name!r}"
            raise TemplateError(msg)
        value = values[name]
        try:
            parts.append(format(value, spec))
        except (ValueError, TypeError) as exc:
            # Python's text quotes the spec as written: a newline in it would split the line.
            reason = str(exc).replace("\n", "\\n")
            msg = (
                f"placeholder {name!r}: format spec {spec!r} does not apply to "
                f"{type(value).__name__} value {value!r} ({reason})"
            )
            raise TemplateError(msg) from None
    return "".join(parts)

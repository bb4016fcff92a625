"""The JSONL audit trail: writing it, reading it back, rebuilding memories from it.

:class:`AuditWriter` streams ``household_traces``, ``memory_updates``, ``consolidation`` and
``tool_invocations`` (JSON Schemas in ``simulation/audit/schemas``); readers load any stream into
pandas, and the replay rebuilds which items a household's stores hold at the end of any year.
What else an exact rebuild needs (access counts from ``tool_invocations``, the unlogged
rehearsal year, where a retrieval falls in the year, retrieval ties) is in
``docs/audit_streams.md``.
"""

from __future__ import annotations

from importlib.resources import files

import orjson

from simulation.audit.writer import (
    DYNAMIC_FIELDS,
    LLM_STREAM,
    SCHEMA_VERSION,
    STREAMS,
    AuditWriter,
)

__all__ = [
    "DYNAMIC_FIELDS",
    "LLM_STREAM",
    "SCHEMA_VERSION",
    "STREAMS",
    "AuditWriter",
    "load_schema",
]


def load_schema(stream: str) -> dict:
    """The JSON Schema of ``stream`` (one of :data:`STREAMS`), shipped with the package."""
    if stream not in (*STREAMS, LLM_STREAM):
        msg = f"unknown stream {stream!r}; expected one of {(*STREAMS, LLM_STREAM)}"
        raise ValueError(msg)
    return orjson.loads(
        files("simulation.audit").joinpath("schemas", f"{stream}.schema.json").read_bytes()
    )

"""Skills: what a household may do, validated against a registry loaded from YAML.

:class:`SkillRegistry` (loaded with :func:`load_registry`) checks proposals against eligibility,
preconditions and affordability constraints, executes the effects of valid ones and renders the
memory each leaves; :mod:`simulation.skills.templates` formats those memories safely.
"""

from __future__ import annotations

from simulation.skills.registry import (
    ANY_AGENT,
    CONSTRAINTS,
    CONTEXT_FIELDS,
    SKILL_CONSTRAINTS,
    TOOL_CONSTRAINTS,
    MemoryTemplate,
    MemoryTool,
    Precondition,
    RegistryError,
    Skill,
    SkillRegistry,
    Validation,
    load_registry,
)
from simulation.skills.templates import (
    TemplateError,
    render,
    render_many,
    shows_text,
    template_fields,
)

__all__ = [
    "ANY_AGENT",
    "CONSTRAINTS",
    "CONTEXT_FIELDS",
    "SKILL_CONSTRAINTS",
    "TOOL_CONSTRAINTS",
    "MemoryTemplate",
    "MemoryTool",
    "Precondition",
    "RegistryError",
    "Skill",
    "SkillRegistry",
    "TemplateError",
    "Validation",
    "load_registry",
    "render",
    "render_many",
    "shows_text",
    "template_fields",
]

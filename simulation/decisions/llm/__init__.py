"""The ``llm`` decision policy: OpenAI-compatible chat endpoints, governed by the registry.

:class:`LLMPolicy` builds prompts, runs a year's requests concurrently and validates every reply;
:mod:`.client` speaks the chat-completions protocol with retries and backoff, :mod:`.cache`
stores replies content-addressed for exact replay, :mod:`.parsing` reads replies tolerantly and
:mod:`.testing` provides a loopback OpenAI-compatible server for tests and benchmarks.
"""

from __future__ import annotations

from simulation.decisions.llm.cache import CacheMiss, CachingChatClient, ResponseCache
from simulation.decisions.llm.client import ChatClient, ChatError, ChatResult, ChatSettings
from simulation.decisions.llm.parsing import DecisionReply, ReplyFormatError, parse_reply
from simulation.decisions.llm.policy import (
    LEVEL_VALUES,
    PROMPT_FIELDS,
    CallRecord,
    EndpointUnreachable,
    LLMConfigError,
    LLMOutcome,
    LLMPolicy,
    LLMRequest,
)

__all__ = [
    "LEVEL_VALUES",
    "PROMPT_FIELDS",
    "CacheMiss",
    "CachingChatClient",
    "CallRecord",
    "ChatClient",
    "ChatError",
    "ChatResult",
    "ChatSettings",
    "DecisionReply",
    "EndpointUnreachable",
    "LLMConfigError",
    "LLMOutcome",
    "LLMPolicy",
    "LLMRequest",
    "ReplyFormatError",
    "ResponseCache",
    "parse_reply",
]

"""The ``llm`` decision policy: a language model decides, the skill registry governs.

For every household that uses it, the model builds a prompt from the household's state, the
memories it retrieved and the skills it may choose (with this year's costs). All of a year's
requests run concurrently (bounded by ``max_concurrency``) on one asyncio event loop; the model
then applies the results in its deterministic household order.

Governance: every reply is parsed tolerantly and validated by the registry (eligibility,
preconditions, affordability). Validation errors are fed back to the model for up to
``retries`` more attempts; after that, or when the endpoint fails for good, the household takes
the registry's default skill and the failure is recorded. A year in which no request reached the
endpoint at all (nothing listening at ``base_url``: refused, unresolved host, no connection in
time) stops the run instead (:class:`EndpointUnreachable`): every household would fall back,
that year and every year after. Every request and reply goes through a
content-addressed SQLite cache, so ``mode: replay`` reproduces a recorded run without the
endpoint; a reply missing from the cache stops a replay (it would silently diverge otherwise).
"""

from __future__ import annotations

import asyncio
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulation.agents.state import SFHA_ZONES, HouseholdState
from simulation.decisions.base import Construct, Option, Proposal
from simulation.decisions.llm.cache import CacheMiss, CachingChatClient, ResponseCache
from simulation.decisions.llm.client import ChatClient, ChatError, ChatSettings, _safe_url
from simulation.decisions.llm.parsing import ReplyFormatError, parse_reply
from simulation.input_files import read_text
from simulation.skills.templates import TemplateError, render, template_fields
from simulation.yaml_errors import describe_decode_error

if TYPE_CHECKING:
    from collections.abc import Sequence

    from simulation.config import LLMConfig
    from simulation.memory import ScoredMemory
    from simulation.skills import SkillRegistry

__all__ = [
    "LEVEL_VALUES",
    "PROMPT_FIELDS",
    "CallRecord",
    "EndpointUnreachable",
    "LLMConfigError",
    "LLMOutcome",
    "LLMPolicy",
    "LLMRequest",
]

#: Appraisal value recorded for each level the model states (the middle of its fifth).
LEVEL_VALUES = {"VL": 0.1, "L": 0.3, "M": 0.5, "H": 0.7, "VH": 0.9}
#: Placeholders a prompt template may use.
PROMPT_FIELDS = frozenset(
    {
        "agent_id",
        "year",
        "tenure",
        "tenure_phrase",
        "income",
        "flood_zone",
        "zone_phrase",
        "insurance_phrase",
        "elevated_phrase",
        "cumulative_damage",
        "claims_paid",
        "claims_denied",
        "subsidy_share",
        "premium_rate",
        "memories",
        "skills",
    }
)
_SYSTEM = (
    "You simulate one household in a flood-risk study. Stay in character, use only the facts "
    "given, and answer with a single JSON object."
)


class LLMConfigError(ValueError):
    """Unusable LLM settings: a prompt file or placeholder, a missing replay cache."""


class EndpointUnreachable(ConnectionError):  # noqa: N818 - says what happened, like CacheMiss
    """No request of a year got a connection to the endpoint, so nothing could be decided.

    Single failed requests fall back to the default skill (a few timeouts must not end a long
    run). When every request of a year failed without reaching the endpoint, nothing is
    listening at ``base_url``, and a run that went on would be a valid-looking run in which no
    household decided anything. The message names ``decision.llm.base_url``, the URL (without
    credentials) and why. Requests answered from the cache, and servers that answered with an
    error or dropped the connection, do not count as unreachable.
    """


@dataclass(slots=True)
class LLMRequest:
    """What one household's decision needs: its state, memories, options and costs."""

    agent_id: str
    year: int
    state: HouseholdState
    memories: Sequence[ScoredMemory]
    options: Sequence[Option]
    costs: dict[str, float]
    context: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One chat request as ``llm_calls.jsonl`` records it."""

    agent_id: str
    attempt: int
    request_hash: str
    status: str
    latency_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    cached: bool
    transport_attempts: int


@dataclass(slots=True)
class LLMOutcome:
    """The governed result of one household's LLM decision."""

    proposal: Proposal
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    retries: int = 0
    fallback: bool = False
    calls: list[CallRecord] = field(default_factory=list)
    #: Why the endpoint could not be reached, when the household's first request failed
    #: without a connection to it (see :attr:`ChatError.unreachable`); else ``None``.
    unreachable: str | None = None
    #: The skill the model's latest reply naming one proposed, accepted or not (normalised);
    #: ``None`` when no reply named a skill. After a fallback ``proposal`` is the default
    #: skill's, and this is what the trace names as the proposed skill.
    proposed: str | None = None


class LLMPolicy:
    """Decides for many households at once through an OpenAI-compatible endpoint.

    Args:
        config: The ``decision.llm`` section.
        base_dir: Folder the config's relative paths refer to.
        run_seed: The run's seed (the sampling seed when ``config.seed`` is null).
        registry: The skill registry that validates proposals.

    Raises:
        LLMConfigError: For a missing prompt file or an unknown placeholder in it.
    """

    def __init__(self, config: LLMConfig, base_dir: Path, run_seed: int, registry: SkillRegistry):
        self.config = config
        self.registry = registry
        self.template = _load_prompt(config, base_dir)
        self.settings = ChatSettings(
            config.model,
            temperature=config.temperature,
            seed=run_seed if config.seed is None else config.seed,
            max_tokens=config.max_tokens,
        )
        self._cache_path = config.cache_path(base_dir)
        if config.mode == "replay" and not self._cache_path.exists():
            msg = (
                f"decision.llm.cache: {self._cache_path} not found; record the run first "
                "(decision.llm.mode: record) or point `cache` at a recorded cache"
            )
            raise LLMConfigError(msg)
        if config.mode == "replay" or (config.mode == "record" and self._cache_path.exists()):
            # A file that is not a (recorded) cache would otherwise stop the run at its first
            # decision, after the run directory was written. Checked read-only: validating a
            # config must not create or change the file.
            try:
                ResponseCache(
                    self._cache_path, read_only=True, require_replies=config.mode == "replay"
                ).close()
            except (ValueError, OSError) as err:
                raise LLMConfigError(f"decision.llm.cache: {err}") from None
        elif config.mode == "record":
            # The cache is created at the first year's decisions, after the run directory was
            # written: a path where it cannot be created is refused now, creating nothing.
            problem = _uncreatable(self._cache_path)
            if problem is not None:
                raise LLMConfigError(f"decision.llm.cache: {self._cache_path}: {problem}")
        # The event loop lives in its own thread, so deciding works the same from a script and
        # from inside a running loop (a Jupyter cell), where asyncio.run would refuse.
        self._loop_thread: ThreadPoolExecutor | None = None
        self._runner: asyncio.Runner | None = None
        self._deciding: asyncio.Task[list[LLMOutcome]] | None = None  # the year's requests
        self._client: CachingChatClient | ChatClient | None = None
        self._cache: ResponseCache | None = None

    # ------------------------------------------------------------------ prompts
    def messages(self, request: LLMRequest) -> list[dict[str, str]]:
        """The chat messages of ``request`` (system instructions and the household prompt)."""
        return [
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": render(self.template, _prompt_values(request))},
        ]

    # ---------------------------------------------------------------- deciding
    def decide_all(self, requests: Sequence[LLMRequest]) -> list[LLMOutcome]:
        """Decide every request concurrently; outcomes come back in the requests' order.

        Raises:
            CacheMiss: In replay mode, for a request the cache does not hold.
            EndpointUnreachable: When no request got a connection to the endpoint (live and
                record modes; a request answered from the cache is a reply).
        """
        if not requests:
            if self.config.mode == "record":
                # A recording whose households asked nothing still leaves its (empty) cache,
                # so that replaying the run reproduces it instead of refusing a missing file.
                self._open_cache()
            return []
        if self._loop_thread is None:
            self._loop_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llm-loop")
        outcomes = self._loop_thread.submit(self._run_in_loop, list(requests)).result()
        reasons = [outcome.unreachable for outcome in outcomes if outcome.unreachable]
        if len(reasons) == len(outcomes):
            count = len(requests)
            which = "the request" if count == 1 else f"any of the {count} requests"
            msg = (
                f"decision.llm.base_url: no reply from {_safe_url(self.config.base_url)} for "
                f"{which} of year {requests[0].year} ({', '.join(dict.fromkeys(reasons))}); "
                "is the server running?"
            )
            raise EndpointUnreachable(msg)
        return outcomes

    def _run_in_loop(self, requests: list[LLMRequest]) -> list[LLMOutcome]:
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self._decide_all(requests))

    async def _decide_all(self, requests: list[LLMRequest]) -> list[LLMOutcome]:
        self._deciding = asyncio.current_task()
        client = self._ensure_client()
        limit = asyncio.Semaphore(self.config.max_concurrency)

        async def bounded(request: LLMRequest) -> LLMOutcome:
            async with limit:
                return await self._decide_one(client, request)

        try:
            return list(await asyncio.gather(*(bounded(r) for r in requests)))
        finally:
            self._deciding = None
            await client.aclose()  # a fresh connection pool next year, on the same loop

    def _ensure_client(self) -> CachingChatClient | ChatClient:
        if self._client is None:
            cfg = self.config
            replay = cfg.mode == "replay"
            http = None
            if not replay:
                http = ChatClient(
                    cfg.base_url,
                    cfg.model,
                    api_key=os.environ.get(cfg.api_key_env) or None,
                    timeout_s=cfg.timeout_s,
                    temperature=self.settings.temperature,
                    seed=self.settings.seed,
                    max_tokens=cfg.max_tokens,
                    retries=cfg.retries,
                    max_concurrency=cfg.max_concurrency,
                )
            if cfg.mode == "live":
                self._client = http  # nothing is stored, so no cache file is created
            else:
                self._client = CachingChatClient(
                    http, self._open_cache(), cfg.mode, settings=self.settings
                )
        return self._client

    def _open_cache(self) -> ResponseCache:
        """The run's response cache, opened (and in record mode created) on first use."""
        if self._cache is None:
            read_only = self.config.mode == "replay"
            self._cache = ResponseCache(self._cache_path, read_only=read_only)
        return self._cache

    async def _decide_one(
        self, client: CachingChatClient | ChatClient, request: LLMRequest
    ) -> LLMOutcome:
        messages = self.messages(request)
        allowed = [o.skill_id for o in request.options]
        # Known skills pass the parser and reach the registry, whose reason is more useful
        # feedback ("not eligible for renters") than "unknown skill".
        known = list(self.registry.skill_ids)
        outcome = LLMOutcome(Proposal(self.registry.default_skill))
        for attempt in range(self.config.retries + 1):
            try:
                result = await client.complete(messages)
            except CacheMiss:
                raise
            except ChatError as err:
                if attempt == 0:  # a later attempt follows a reply: the endpoint was reached
                    outcome.unreachable = err.unreachable
                outcome.calls.append(
                    _failed_call(request.agent_id, attempt, self.settings.hash(messages), err)
                )
                outcome.errors.append(f"llm call failed ({err.status}): {err.message}")
                break
            outcome.calls.append(
                CallRecord(
                    request.agent_id,
                    attempt,
                    result.request_hash,
                    result.status,
                    result.latency_s,
                    result.prompt_tokens,
                    result.completion_tokens,
                    result.cached,
                    result.attempts,
                )
            )
            problems = self._check(result.content, known, request, outcome)
            if not problems:
                outcome.retries = attempt
                return outcome
            outcome.errors = problems
            if attempt < self.config.retries:
                messages = [
                    *messages,
                    {"role": "assistant", "content": result.content},
                    {
                        "role": "user",
                        "content": "Your answer was not accepted: "
                        + "; ".join(problems)
                        + f". Choose one of: {', '.join(allowed)}. Reply with one JSON object.",
                    },
                ]
        outcome.retries = len(outcome.calls) - 1  # the last attempt made (>= 0)
        outcome.fallback = True
        outcome.proposal = Proposal(
            self.registry.default_skill, justification="fallback after failed LLM decision"
        )
        outcome.warnings.append(f"used default skill {self.registry.default_skill!r}")
        return outcome

    def _check(
        self, content: str, allowed: list[str], request: LLMRequest, outcome: LLMOutcome
    ) -> list[str]:
        """Parse and validate a reply; note the skill it names, store the proposal if valid.

        Returns:
            Why the reply was not accepted; empty when it was.
        """
        try:
            reply = parse_reply(content, allowed)
        except ReplyFormatError as err:
            if err.skill is None:
                return [str(err)]
            # An unknown skill: still what the model proposed. The parser's message lists the
            # registry's skills; the household's own options follow in the retry's feedback.
            outcome.proposed = err.skill
            return [f"unknown skill {err.skill!r}"]
        outcome.proposed = reply.skill
        validation = self.registry.check(
            reply.skill, request.state, request.costs.get(reply.skill, 0.0)
        )
        if not validation.valid:
            return list(validation.errors)
        outcome.warnings.extend(reply.warnings)
        outcome.errors = []
        # An appraisal the reply does not state (readably) is left out, not taken as medium:
        # it would otherwise enter the traces and the year's mean_tp as if the model had said
        # so (the reply's warnings name it).
        constructs = {
            name: Construct(level, LEVEL_VALUES[level], explanation or "")
            for name, level, explanation in (
                ("TP", reply.tp_level, reply.tp_explanation),
                ("CP", reply.cp_level, reply.cp_explanation),
            )
            if level is not None
        }
        outcome.proposal = Proposal(
            reply.skill,
            parameters=dict(reply.parameters),
            constructs=constructs,
            justification=reply.justification or "",
        )
        return []

    def close(self) -> None:
        """Close the event loop and the cache.

        Requests still in flight (the run was interrupted while a year's households waited
        for replies) are cancelled rather than waited for.
        """
        if self._runner is not None:
            runner, self._runner = self._runner, None
            deciding = self._deciding
            if deciding is not None:
                runner.get_loop().call_soon_threadsafe(deciding.cancel)
            if self._loop_thread is not None:
                self._loop_thread.submit(runner.close).result()
        if self._loop_thread is not None:
            self._loop_thread.shutdown()
            self._loop_thread = None
        if self._cache is not None:  # after the loop: no request may still be using it
            self._cache.close()
            self._cache = None
        self._client = None


def _uncreatable(path: Path) -> str | None:
    """Why a new file cannot be created at ``path`` (and its missing folders), or None.

    Nothing is created: the nearest ancestor that exists must be a folder this process may
    write into. Permissions are what :func:`os.access` reports, so a read-only file system or a
    quota can still refuse the write later.
    """
    ancestor = path.parent
    while not os.path.lexists(ancestor):  # lexists: a broken link is in the way, not missing
        ancestor = ancestor.parent
    if ancestor.is_symlink() and not ancestor.exists():
        return f"cannot be created: {ancestor} is a broken link"
    if not ancestor.is_dir():
        return f"cannot be created: {ancestor} is a file, not a folder"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot be created: no permission to write in {ancestor}"
    return None


def _failed_call(agent_id: str, attempt: int, request_hash: str, err: ChatError) -> CallRecord:
    return CallRecord(
        agent_id, attempt, request_hash, err.status, err.latency_s, None, None, False, err.attempts
    )


def _prompt_values(request: LLMRequest) -> dict[str, Any]:
    """The value of every placeholder in :data:`PROMPT_FIELDS` for ``request``."""
    state = request.state
    owner = state.tenure == "owner"
    memories = "\n".join(f"- {m.item.content}" for m in request.memories)
    skills = "\n".join(
        f"- {o.skill_id}: {o.description} (cost this year: ${o.cost:,.0f})" for o in request.options
    )
    return {
        "agent_id": state.agent_id,
        "year": request.year,
        "tenure": state.tenure,
        "tenure_phrase": "own your home" if owner else "rent your home",
        "income": state.income,
        "flood_zone": state.flood_zone,
        "zone_phrase": "the mapped 100-year floodplain"
        if state.flood_zone in SFHA_ZONES
        else "outside the mapped 100-year floodplain",
        "insurance_phrase": "you hold a policy this year"
        if state.insured
        else "you have no policy",
        "elevated_phrase": "elevated" if state.elevated else "not elevated",
        "cumulative_damage": state.cumulative_damage,
        "claims_paid": state.claims_paid,
        "claims_denied": state.claims_denied,
        "subsidy_share": request.context.get("subsidy_share", 0.0),
        "premium_rate": request.context.get("premium_rate", 0.0),
        "memories": memories or "- (no relevant memories)",
        "skills": skills,
    }


def _load_prompt(config: LLMConfig, base_dir: Path) -> str:
    if config.prompt is None:
        origin = "simulation/decisions/llm/household_prompt.txt"
        text = files("simulation.decisions.llm").joinpath("household_prompt.txt").read_text()
    else:
        path = Path(base_dir) / config.prompt
        origin = str(path)
        try:
            text = read_text(path)
        except FileNotFoundError:
            msg = f"decision.llm.prompt: {path}: prompt file not found"
            raise LLMConfigError(msg) from None
        except OSError as err:
            msg = f"decision.llm.prompt: {path}: cannot read: {err.strerror or err}"
            raise LLMConfigError(msg) from None
        except UnicodeDecodeError as err:
            msg = f"decision.llm.prompt: {path}: {describe_decode_error(err)}"
            raise LLMConfigError(msg) from None
    if not text.strip():  # every household-year would ask the model an empty question
        msg = f"decision.llm.prompt: {origin}: empty: the prompt would ask nothing"
        raise LLMConfigError(msg)
    try:
        used = template_fields(text)
    except TemplateError as err:
        raise LLMConfigError(f"decision.llm.prompt: {origin}: {err}") from None
    if "skills" not in used:
        # The options change by household and year (tenure, what it already has, what it can
        # afford): a prompt that does not show them leaves the model guessing ids to choose.
        # Imported here: the config module is this one's reader, not a dependency of it.
        from simulation.config import ConfigWarning  # noqa: PLC0415

        msg = (
            f"decision.llm.prompt: {origin}: has no {{skills}} placeholder, so the model is "
            "not shown the skills the household may choose this year"
        )
        warnings.warn(msg, ConfigWarning, stacklevel=3)
    unknown = sorted(used - PROMPT_FIELDS)
    if unknown:
        msg = (
            f"decision.llm.prompt: {origin}: unknown placeholder {unknown[0]!r} "
            f"(allowed: {', '.join(sorted(PROMPT_FIELDS))})"
        )
        raise LLMConfigError(msg)
    # A format spec that does not fit its value ({flood_zone:.2f}) would otherwise stop the
    # run at its first decision.
    try:
        render(text, _prompt_values(_SAMPLE_REQUEST))
    except TemplateError as err:
        raise LLMConfigError(f"decision.llm.prompt: {origin}: {err}") from None
    return text


#: A household a prompt is rendered for at load; its values have the types of every run's.
_SAMPLE_REQUEST = LLMRequest(
    "H00001",
    1,
    HouseholdState("H00001", "owner", 60_000.0, 250_000.0, 100_000.0, "AE", 10.0, 1.0),
    (),
    (Option("do_nothing", 0.0, "Wait this year"),),
    {"do_nothing": 0.0},
    {"subsidy_share": 0.5, "premium_rate": 4.0},
)

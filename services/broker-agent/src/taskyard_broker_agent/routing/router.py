"""The LLM router: one forced ``route_task`` tool call, with the rules router behind it for every failure.

Routing must never be the reason a task stalls: an LLM that errors, times out, answers without the tool call,
answers invalid JSON or a specialist outside the catalog costs one fallback to the rules router (counted in
``taskyard_routing_fallbacks_total{reason}``), never a retry loop on the intake queue.

Around that call (docs/routing.md):

- the **directive guard** takes routing directives out of the request first ("send this to X", "ignore
  previous instructions"); when the LLM still picks a specialist a directive asked for, and the rules router
  (on the same cleaned request) does not, the rules decide: the request cannot choose its own route;
- the **decision cache** answers identical normalized requests without another LLM call;
- every decision records its latency, LLM calls, tokens, whether it was cached and what the guard found.
"""

from __future__ import annotations

import asyncio
import logging
import time

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskyard_broker_agent.routing.cache import DecisionCache
from taskyard_broker_agent.routing.guard import DirectiveGuard, Inspection
from taskyard_broker_agent.routing.parts import merge_parts
from taskyard_broker_agent.routing.prompt import ROUTE_TOOL_NAME, RoutingPrompt
from taskyard_broker_agent.routing.rules import RulesRouter
from taskyard_common import llm, metrics
from taskyard_common.catalog import Catalog
from taskyard_common.messages import MAX_ROUTED_PARTS, RoutedPart, RoutingDecision, RoutingMethod, TaskInput
from taskyard_common.settings import LlmSettings

log = logging.getLogger(__name__)

# Bounded label values of taskyard_routing_fallbacks_total (metrics.ROUTING_FALLBACK_REASONS).
LLM_ERROR = "llm_error"
INVALID_ANSWER = "invalid_answer"
NO_LLM = "no_llm"
GUARD = "guard"

_REASON_MAX = 2000  # RoutingDecision.reason's bound
_NO_REASON = "(the model gave no reason)"


class InvalidAnswer(ValueError):
    """The LLM answered, but not a usable routing decision."""


class PartAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    specialist: str
    job: str


class RouteAnswer(BaseModel):
    """The ``route_task`` arguments as the model sent them; catalog membership is checked separately."""

    model_config = ConfigDict(extra="ignore")

    specialist: str
    reason: str
    confidence: float = Field(ge=0.0, le=1.0)
    # Only with multi_route (the tool offers it then); a model may send it empty.
    parts: list[PartAnswer] = Field(default_factory=list)


def _parts(answer: RouteAnswer, specialists: tuple[str, ...]) -> tuple[RoutedPart, ...]:
    if len(answer.parts) > MAX_ROUTED_PARTS:
        raise InvalidAnswer(
            f"the model split the request into {len(answer.parts)} parts (at most {MAX_ROUTED_PARTS})"
        )
    for part in answer.parts:
        if part.specialist not in specialists:
            raise InvalidAnswer(f"a part names {part.specialist[:64]!r}, which is not in the catalog")
    return merge_parts([(p.specialist, p.job) for p in answer.parts])


def parse_answer(
    response: ChatCompletion, specialists: tuple[str, ...], min_confidence: float, *, parts: bool = True
) -> RoutingDecision:
    """The decision in a chat completion, or ``InvalidAnswer`` saying what is wrong with it. ``parts``: the
    tool offered them (``multi_route``); otherwise any the model sends anyway are ignored."""
    # The SDK builds responses without validating them: a server may leave out what the types promise.
    choices = response.choices or []
    calls = (choices[0].message.tool_calls or []) if choices else []
    functions = [c.function for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]
    function = next((f for f in functions if f.name == ROUTE_TOOL_NAME), None)
    if function is None:
        raise InvalidAnswer(f"no {ROUTE_TOOL_NAME} tool call in the answer")
    try:
        answer = RouteAnswer.model_validate_json(function.arguments or "")
    except ValidationError as exc:
        # Error types and locations only: the arguments may echo the request.
        summary = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['type']}" for e in exc.errors())
        raise InvalidAnswer(f"{ROUTE_TOOL_NAME} arguments are invalid ({summary})") from None
    if answer.specialist not in specialists:
        raise InvalidAnswer(f"the model chose {answer.specialist[:64]!r}, which is not in the catalog")
    if answer.confidence < min_confidence:
        raise InvalidAnswer(f"confidence {answer.confidence:.2f} is below the minimum {min_confidence:.2f}")
    split = _parts(answer, specialists) if parts else ()
    reason = " ".join(answer.reason.split()) or _NO_REASON
    return RoutingDecision(
        method=RoutingMethod.LLM,
        specialist=answer.specialist,
        reason=reason[:_REASON_MAX],
        confidence=answer.confidence,
        parts=split,
    )


def _describe(exc: Exception) -> str:
    """A log- and storage-safe cause: status codes and error types, never a response body or the URL."""
    mapped = llm.classify(exc)
    if mapped is not exc:
        return str(mapped)
    if isinstance(exc, TimeoutError):
        return "LLM did not answer in time"
    return f"LLM call failed: {type(exc).__name__}"


class Router:
    """Routes with the LLM when one is given, with the rules router otherwise and whenever the LLM fails or
    is overruled by the directive guard."""

    def __init__(
        self,
        prompt: RoutingPrompt,
        rules: RulesRouter,
        *,
        client: openai.AsyncOpenAI | None,
        model: str = "",
        timeout_seconds: float = 20.0,
        min_confidence: float = 0.0,
        guard: DirectiveGuard | None = None,
        cache: DecisionCache | None = None,
    ) -> None:
        self._prompt = prompt
        self._rules = rules
        self._client = client
        self._model = model
        self._timeout = timeout_seconds
        self._min_confidence = min_confidence
        self._guard = guard if guard is not None else DirectiveGuard(prompt.specialists)
        # ("cache or ...": an empty cache is falsy, having a length.)
        self._cache = cache if cache is not None else DecisionCache(0, 0)

    @classmethod
    def create(
        cls,
        catalog: Catalog,
        llm_settings: LlmSettings | None,
        *,
        min_confidence: float = 0.0,
        max_request_chars: int = 8000,
        cache_size: int = 10_000,
        cache_ttl_seconds: float = 3600.0,
    ) -> Router:
        """``llm_settings=None`` (or an unconfigured endpoint) routes with the rules only."""
        prompt = RoutingPrompt.from_catalog(catalog, max_request_chars=max_request_chars)
        rules = RulesRouter(catalog)
        guard = DirectiveGuard(catalog.names)
        if llm_settings is None or not llm_settings.enabled:
            return cls(prompt, rules, client=None, guard=guard)
        return cls(
            prompt,
            rules,
            client=llm.make_client(llm_settings, timeout=llm_settings.routing_timeout_seconds),
            model=llm_settings.model,
            timeout_seconds=llm_settings.routing_timeout_seconds,
            min_confidence=min_confidence,
            guard=guard,
            cache=DecisionCache(cache_size, cache_ttl_seconds),
        )

    @property
    def uses_llm(self) -> bool:
        return self._client is not None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def route(self, task_input: TaskInput, *, multi: bool = False) -> RoutingDecision:
        """The decision for ``task_input``. ``multi``: it may name several specialists (``parts``), when
        the catalog allows it (``multi_route``) and the request holds distinct jobs; otherwise a decision
        never has parts."""
        started = time.perf_counter()
        decision = await self._route(task_input)
        update: dict[str, object] = {"latency_ms": round((time.perf_counter() - started) * 1000, 3)}
        if decision.parts and not multi:
            # Its ``specialist`` is the main job's: the single route (the cache keeps the parts for the
            # requests that may have them).
            update["parts"] = ()
        return decision.model_copy(update=update)

    async def _route(self, task_input: TaskInput) -> RoutingDecision:
        inspection = self._guard.inspect(task_input)
        # From here on only the request without its directives is read, by the LLM and the rules alike.
        request = inspection.stripped
        if inspection.fired:
            log.info("routing directive in the request (%s): routing the rest of it", inspection.label)
        if self._client is None:
            return self._guarded(self._fallback(request, NO_LLM, None), inspection)
        if inspection.empty:
            # Nothing but "send this to X": there is nothing left for the LLM to read.
            return self._guarded(self._fallback(request, GUARD, "the request held only routing directives"),
                                 inspection)  # fmt: skip
        cached = self._cache.get(request)
        metrics.ROUTING_CACHE.labels("miss" if cached is None else "hit").inc()
        if cached is not None:
            update = {"cached": True, "llm_calls": 0, "tokens": 0, "guard": inspection.label or None}
            return self._guarded(cached.model_copy(update=update), inspection, count=False)
        try:
            # The client's timeout bounds each phase of the HTTP exchange; this bounds the whole call.
            async with asyncio.timeout(self._timeout):
                with metrics.track_llm_request(self._model):
                    response = await self._client.chat.completions.create(
                        model=self._model,
                        messages=self._prompt.messages(request),
                        tools=[self._prompt.tool],
                        tool_choice=self._prompt.tool_choice,
                        temperature=0,
                    )
        except Exception as exc:
            # Whatever went wrong, the rules can still route: an unexpected error keeps its traceback.
            if not isinstance(exc, openai.OpenAIError | TimeoutError):
                log.warning("unexpected error from the LLM client", exc_info=True)
            return self._guarded(self._fallback(request, LLM_ERROR, _describe(exc), calls=1), inspection)
        tokens = _count_tokens(response)
        try:
            decision = parse_answer(
                response, self._prompt.specialists, self._min_confidence, parts=self._prompt.offers_parts
            )
        except InvalidAnswer as exc:
            return self._guarded(
                self._fallback(request, INVALID_ANSWER, str(exc), calls=1, tokens=tokens), inspection
            )
        decision = decision.model_copy(update={"llm_calls": 1, "tokens": tokens})
        if inspection.fired and _named(decision) & inspection.targets:
            decision = self._second_opinion(request, decision)
        self._cache.put(request, decision)
        return self._guarded(decision, inspection)

    def _second_opinion(self, request: TaskInput, answer: RoutingDecision) -> RoutingDecision:
        """The LLM chose what a directive asked for (as the specialist or for a part): it stands only if the
        rules agree on the cleaned request (the same specialist, and every part's specialist among theirs).

        Agreement with the directive is no evidence (the model may have read what the guard missed); the
        rules router cannot be talked to, so its decision breaks the tie.
        """
        rules = self._rules.route(request)
        if rules.specialist == answer.specialist and _named(answer) <= _named(rules) | {answer.specialist}:
            return answer
        metrics.ROUTING_GUARD.labels("overruled").inc()
        metrics.ROUTING_FALLBACKS.labels(GUARD).inc()
        log.warning("the LLM chose the specialist a routing directive asked for: the rules decide")
        note = f"{rules.reason} (rules fallback, guard: the LLM chose the specialist a directive in the request named)"
        return rules.model_copy(
            update={
                "reason": note[:_REASON_MAX],
                "fallback": GUARD,
                "llm_calls": answer.llm_calls,
                "tokens": answer.tokens,
            }
        )

    @staticmethod
    def _guarded(decision: RoutingDecision, inspection: Inspection, *, count: bool = True) -> RoutingDecision:
        if not inspection.fired:
            return decision
        if count and decision.fallback != GUARD:
            metrics.ROUTING_GUARD.labels("stripped").inc()
        return decision.model_copy(update={"guard": inspection.label})

    def _fallback(
        self, task_input: TaskInput, reason: str, cause: str | None, *, calls: int = 0, tokens: int = 0
    ) -> RoutingDecision:
        metrics.ROUTING_FALLBACKS.labels(reason).inc()
        decision = self._rules.route(task_input).model_copy(
            update={"fallback": reason, "llm_calls": calls, "tokens": tokens}
        )
        if cause is None:
            return decision
        log.warning("LLM routing fell back to the rules router (%s): %s", reason, cause)
        note = f"{decision.reason} (rules fallback, {reason}: {cause})"
        return decision.model_copy(update={"reason": note[:_REASON_MAX]})


def _named(decision: RoutingDecision) -> set[str]:
    """Every specialist a decision sends work to: its own and its parts'."""
    return {decision.specialist, *(p.specialist for p in decision.parts)}


def _count_tokens(response: ChatCompletion) -> int:
    """The call's total tokens, counted in ``taskyard_routing_llm_tokens_total`` too (0 if not reported)."""
    usage = response.usage
    if usage is None:
        return 0
    # Servers that report usage partly leave the other fields out (None, despite the types).
    prompt = usage.prompt_tokens or 0
    completion = usage.completion_tokens or 0
    metrics.ROUTING_TOKENS.labels("prompt").inc(prompt)
    metrics.ROUTING_TOKENS.labels("completion").inc(completion)
    return usage.total_tokens or prompt + completion

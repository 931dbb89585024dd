"""The LLM router: one forced ``route_task`` tool call, with the rules router behind it for every failure.

Routing must never be the reason a task stalls: an LLM that errors, times out, answers without the tool call,
answers invalid JSON or a specialist outside the catalog costs one fallback to the rules router (counted in
``taskyard_routing_fallbacks_total{reason}``), never a retry loop on the intake queue.

Around that call (docs/routing.md):

- the **directive guard** takes routing directives out of the request first ("send this to X", "ignore
  previous instructions"); when the LLM still picks a specialist a directive asked for, and the rules router
  (on the same cleaned request) does not, the rules decide: the request cannot choose its own route;
- the **evidence floor** lets the LLM's choice stand only when the request, or its English reading, shows
  evidence for it, and not when the request shows far more for the rules' choice and the LLM's reason does
  not back its own; otherwise the rules decide (checks.py);
- the **decision cache** answers identical normalized requests without another LLM call;
- every decision records its latency, LLM calls, tokens, whether it was cached and what the guard found.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from taskyard_broker_agent.routing.answers import (
    InvalidAnswer,
    count_tokens,
    describe_failure,
    parse_answer,
)
from taskyard_broker_agent.routing.cache import DecisionCache, cache_key
from taskyard_broker_agent.routing.checks import EvidenceCheck, named, second_opinion
from taskyard_broker_agent.routing.evidence import EVIDENCE_FLOOR
from taskyard_broker_agent.routing.guard import DirectiveGuard, Inspection
from taskyard_broker_agent.routing.prompt import RoutingPrompt
from taskyard_broker_agent.routing.rules import RulesRouter
from taskyard_broker_agent.routing.text import longer_than
from taskyard_common import llm, metrics
from taskyard_common.catalog import Catalog
from taskyard_common.llm_limits import LlmLimits, RateLimitWait, Reservation
from taskyard_common.messages import RoutingDecision, RoutingMethod, TaskInput
from taskyard_common.model_specs import ModelSpec, price
from taskyard_common.settings import LlmSettings

log = logging.getLogger(__name__)

# Bounded label values of taskyard_routing_fallbacks_total (metrics.ROUTING_FALLBACK_REASONS).
LLM_ERROR = "llm_error"
INVALID_ANSWER = "invalid_answer"
NO_LLM = "no_llm"
GUARD = "guard"
RATE_LIMITED = "rate_limited"

_REASON_MAX = 2000  # RoutingDecision.reason's bound
# Requests up to this many characters are inspected on the event loop: a thread hop would cost more.
INLINE_CHARS = 8192


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
        evidence_floor: float = EVIDENCE_FLOOR,
        guard: DirectiveGuard | None = None,
        cache: DecisionCache | None = None,
        model_spec: ModelSpec | None = None,
        limits: LlmLimits | None = None,
    ) -> None:
        self._prompt = prompt
        self._rules = rules
        self._client = client
        self._model = model
        # The catalog's entry of the model, for its prices (None: not described there, costs nothing).
        self._model_spec = model_spec
        # The model's fleet-wide limits (None: it has none): a longer wait than one in place routes by rules.
        self._limits = limits if limits is not None and limits.limits(model) else None
        self._timeout = timeout_seconds
        self._min_confidence = min_confidence
        # The rules score the LLM's specialist needs in the request to stand (evidence.py; 0: no check).
        self._evidence_floor = evidence_floor
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
        evidence_floor: float = EVIDENCE_FLOOR,
        max_request_chars: int = 8000,
        cache_size: int = 10_000,
        cache_ttl_seconds: float = 3600.0,
        limits: LlmLimits | None = None,
    ) -> Router:
        """``llm_settings=None`` (or an unconfigured endpoint) routes with the rules only."""
        prompt = RoutingPrompt.from_catalog(catalog, max_request_chars=max_request_chars)
        rules = RulesRouter(catalog)
        guard = DirectiveGuard(catalog.names)
        if llm_settings is None or not llm_settings.enabled:
            return cls(prompt, rules, client=None, guard=guard)
        # The router's model is a catalog entry's when one has its name (that entry's endpoint).
        entry = catalog.model(llm_settings.model)
        endpoint = llm.settings_for(llm_settings, entry)
        return cls(
            prompt,
            rules,
            client=llm.make_client(endpoint, timeout=llm_settings.routing_timeout_seconds),
            model=llm_settings.model,
            timeout_seconds=llm_settings.routing_timeout_seconds,
            min_confidence=min_confidence,
            evidence_floor=evidence_floor,
            guard=guard,
            cache=DecisionCache(cache_size, cache_ttl_seconds),
            model_spec=entry,
            limits=limits,
        )

    def use_catalog(self, catalog: Catalog) -> None:
        """Route with ``catalog`` from now on: a new prompt, rules and guard, and an empty cache. A routing
        call in flight finishes with what it started with (and caches into the old cache, now dropped)."""
        limit = self._prompt.max_request_chars
        self._prompt = RoutingPrompt.from_catalog(catalog, max_request_chars=limit)
        self._rules = RulesRouter(catalog)
        self._guard = DirectiveGuard(catalog.names)
        self._cache = self._cache.emptied()

    @property
    def uses_llm(self) -> bool:
        return self._client is not None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def route(
        self, task_input: TaskInput, tenant: str | None = None, *, multi: bool = False
    ) -> RoutingDecision:
        """The decision for ``task_input`` of ``tenant`` (the decision cache is per tenant). ``multi``: it
        may name several specialists (``parts``), when the catalog allows it (``multi_route``) and the
        request holds distinct jobs; otherwise a decision never has parts."""
        started = time.perf_counter()
        decision = await self._route(task_input, tenant)
        update: dict[str, object] = {"latency_ms": round((time.perf_counter() - started) * 1000, 3)}
        if decision.parts and not multi:
            # Its ``specialist`` is the main job's: the single route (the cache keeps the parts for the
            # requests that may have them).
            update["parts"] = ()
        return decision.model_copy(update=update)

    def _prepare(self, task_input: TaskInput, tenant: str | None) -> tuple[Inspection, bytes | None]:
        """The guard's inspection and the cache key: the CPU-bound part, linear in the request's size."""
        inspection = self._guard.inspect(task_input)
        wanted = self._client is not None and self._cache.enabled and not inspection.empty
        return inspection, cache_key(inspection.stripped, tenant) if wanted else None

    async def _route(self, task_input: TaskInput, tenant: str | None) -> RoutingDecision:
        if longer_than(task_input, INLINE_CHARS):
            # A large request (up to 256 KiB) takes the guard 100-280 ms of CPU: in a thread, so the event
            # loop (other deliveries, heartbeats, the reaper) keeps turning meanwhile.
            inspection, key = await asyncio.to_thread(self._prepare, task_input, tenant)
        else:
            inspection, key = self._prepare(task_input, tenant)
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
        # This call's prompt and cache, even if the catalog changes while the LLM answers.
        prompt, cache = self._prompt, self._cache
        cached = cache.get(key) if key is not None else None
        metrics.ROUTING_CACHE.labels("miss" if cached is None else "hit").inc()
        if cached is not None:
            update = {
                "cached": True,
                "llm_calls": 0,
                "tokens": 0,
                "cost": 0.0,
                "model": None,
                "guard": inspection.label or None,
            }
            return self._guarded(cached.model_copy(update=update), inspection, count=False)
        messages = prompt.messages(request)
        try:
            response = await self._call(messages, tools=[prompt.tool], tool_choice=prompt.tool_choice)
        except RateLimitWait as exc:
            return self._guarded(self._fallback(request, RATE_LIMITED, str(exc)), inspection)
        except Exception as exc:
            # Whatever went wrong, the rules can still route: an unexpected error keeps its traceback.
            if not isinstance(exc, openai.OpenAIError | TimeoutError):
                log.warning("unexpected error from the LLM client", exc_info=True)
            return self._guarded(
                self._fallback(request, LLM_ERROR, describe_failure(exc), calls=1), inspection
            )
        spent = self._spent(response)
        try:
            decision = parse_answer(
                response, prompt.specialists, self._min_confidence, parts=prompt.offers_parts
            )
        except InvalidAnswer as exc:
            return self._guarded(
                self._fallback(request, INVALID_ANSWER, str(exc), calls=1, **spent), inspection
            )
        decision = decision.model_copy(update={"llm_calls": 1, **spent})
        if inspection.fired and named(decision) & inspection.targets:
            decision = second_opinion(self._rules, request, decision, fallback=GUARD)
        if decision.method is RoutingMethod.LLM:
            decision = await self._with_evidence(request, decision)
        if key is not None:
            cache.put(key, decision)
        return self._guarded(decision, inspection)

    async def _call(self, messages: list[ChatCompletionMessageParam], **kwargs: Any) -> ChatCompletion:
        """One call at temperature 0, within the model's fleet-wide limits and the routing timeout (the
        client's timeout bounds each phase of the HTTP exchange; this bounds the whole call)."""
        if self._client is None:
            raise RuntimeError("the router has no LLM client")
        async with asyncio.timeout(self._timeout), self._limited(messages) as held:
            with metrics.track_llm_request(self._model):
                response: ChatCompletion = await self._client.chat.completions.create(
                    model=self._model, messages=messages, temperature=0, **kwargs
                )
            if self._limits is not None and held is not None:
                self._limits.settle(held, response.usage.total_tokens if response.usage else 0)
        return response

    @contextlib.asynccontextmanager
    async def _limited(self, messages: Any) -> AsyncIterator[Reservation | None]:
        """The routing call's share of its model's fleet-wide limits (``RateLimitWait`` past a short wait)."""
        if self._limits is None:
            yield None
            return
        async with self._limits.call(self._model, {"messages": messages, "max_tokens": 64}) as held:
            yield held

    async def _with_evidence(self, request: TaskInput, answer: RoutingDecision) -> RoutingDecision:
        """The LLM's answer if the request (or its English reading) shows evidence for its specialist
        (``checks.EvidenceCheck``), else the rules' decision."""
        if self._evidence_floor <= 0:
            return answer
        check = EvidenceCheck(self._rules, self._prompt, self._guard, self._evidence_floor)
        checked = await check.check(request, answer, self._call, self._spent)
        if isinstance(checked, RoutingDecision):
            return checked
        spent = checked.answer
        return self._fallback(
            request,
            checked.fallback,
            checked.cause,
            calls=spent.llm_calls,
            tokens=spent.tokens,
            model=spent.model,
            cost=spent.cost,
            decided=checked.decision,
        )

    @staticmethod
    def _guarded(decision: RoutingDecision, inspection: Inspection, *, count: bool = True) -> RoutingDecision:
        if not inspection.fired:
            return decision
        if count and decision.fallback != GUARD:
            metrics.ROUTING_GUARD.labels("stripped").inc()
        return decision.model_copy(update={"guard": inspection.label})

    def _spent(self, response: ChatCompletion) -> dict[str, Any]:
        """The call's tokens, model and cost (USD), counted in the metrics too."""
        prompt, completion, tokens = count_tokens(response)
        cost = price(self._model_spec, prompt, completion)
        metrics.LLM_COST.labels(self._model, metrics.ROUTER).inc(cost)
        return {"tokens": tokens, "model": self._model, "cost": cost}

    def _fallback(
        self,
        task_input: TaskInput,
        reason: str,
        cause: str | None,
        *,
        calls: int = 0,
        tokens: int = 0,
        model: str | None = None,
        cost: float = 0.0,
        decided: RoutingDecision | None = None,
    ) -> RoutingDecision:
        """The rules' decision on ``task_input`` (or ``decided``, one they made already), labelled with
        ``reason`` and what the LLM calls before it cost."""
        metrics.ROUTING_FALLBACKS.labels(reason).inc()
        decision = (decided or self._rules.route(task_input)).model_copy(
            update={"fallback": reason, "llm_calls": calls, "tokens": tokens, "model": model, "cost": cost}
        )
        if cause is None:
            return decision
        log.warning("LLM routing fell back to the rules router (%s): %s", reason, cause)
        note = f"{decision.reason} (rules fallback, {reason}: {cause})"
        return decision.model_copy(update={"reason": note[:_REASON_MAX]})

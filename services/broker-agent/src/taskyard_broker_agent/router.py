"""The LLM router: one forced ``route_task`` tool call, with the rules router behind it for every failure.

Routing must never be the reason a task stalls: an LLM that errors, times out, answers without the tool call,
answers invalid JSON or a specialist outside the catalog costs one fallback to the rules router (counted in
``taskyard_routing_fallbacks_total{reason}``), never a retry loop on the intake queue.
"""

from __future__ import annotations

import asyncio
import logging

import openai
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskyard_broker_agent.catalog import ROUTE_TOOL_NAME, RoutingPrompt
from taskyard_broker_agent.rules import RulesRouter
from taskyard_common import llm, metrics
from taskyard_common.catalog import Catalog
from taskyard_common.messages import RoutingDecision, RoutingMethod, TaskInput
from taskyard_common.settings import LlmSettings

log = logging.getLogger(__name__)

# Bounded label values of taskyard_routing_fallbacks_total (metrics.ROUTING_FALLBACK_REASONS).
LLM_ERROR = "llm_error"
INVALID_ANSWER = "invalid_answer"
NO_LLM = "no_llm"

_REASON_MAX = 2000  # RoutingDecision.reason's bound
_NO_REASON = "(the model gave no reason)"


class InvalidAnswer(ValueError):
    """The LLM answered, but not a usable routing decision."""


class RouteAnswer(BaseModel):
    """The ``route_task`` arguments as the model sent them; catalog membership is checked separately."""

    model_config = ConfigDict(extra="ignore")

    specialist: str
    reason: str
    confidence: float = Field(ge=0.0, le=1.0)


def parse_answer(response: object, specialists: tuple[str, ...], min_confidence: float) -> RoutingDecision:
    """The decision in a chat completion, or ``InvalidAnswer`` saying what is wrong with it."""
    choices = getattr(response, "choices", None) or []
    calls = (choices[0].message.tool_calls or []) if choices else []
    # Custom (non-function) tool calls have no ``function``.
    functions = [c.function for c in calls if getattr(c, "function", None) is not None]
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
    reason = " ".join(answer.reason.split()) or _NO_REASON
    return RoutingDecision(
        method=RoutingMethod.LLM,
        specialist=answer.specialist,
        reason=reason[:_REASON_MAX],
        confidence=answer.confidence,
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
    """Routes with the LLM when one is given, with the rules router otherwise and whenever the LLM fails."""

    def __init__(
        self,
        prompt: RoutingPrompt,
        rules: RulesRouter,
        *,
        client: openai.AsyncOpenAI | None,
        model: str = "",
        timeout_seconds: float = 20.0,
        min_confidence: float = 0.0,
    ) -> None:
        self._prompt = prompt
        self._rules = rules
        self._client = client
        self._model = model
        self._timeout = timeout_seconds
        self._min_confidence = min_confidence

    @classmethod
    def create(
        cls,
        catalog: Catalog,
        llm_settings: LlmSettings | None,
        *,
        min_confidence: float = 0.0,
        max_request_chars: int = 8000,
    ) -> Router:
        """``llm_settings=None`` (or an unconfigured endpoint) routes with the rules only."""
        prompt = RoutingPrompt.from_catalog(catalog, max_request_chars=max_request_chars)
        rules = RulesRouter(catalog)
        if llm_settings is None or not llm_settings.enabled:
            return cls(prompt, rules, client=None)
        return cls(
            prompt,
            rules,
            client=llm.make_client(llm_settings, timeout=llm_settings.routing_timeout_seconds),
            model=llm_settings.model,
            timeout_seconds=llm_settings.routing_timeout_seconds,
            min_confidence=min_confidence,
        )

    @property
    def uses_llm(self) -> bool:
        return self._client is not None

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def route(self, task_input: TaskInput) -> RoutingDecision:
        if self._client is None:
            return self._fallback(task_input, NO_LLM, None)
        try:
            # The client's timeout bounds each phase of the HTTP exchange; this bounds the whole call.
            async with asyncio.timeout(self._timeout):
                with metrics.track_llm_request(self._model):
                    response = await self._client.chat.completions.create(
                        model=self._model,
                        messages=self._prompt.messages(task_input),  # type: ignore[arg-type]
                        tools=[self._prompt.tool],  # type: ignore[list-item]
                        tool_choice=self._prompt.tool_choice,  # type: ignore[arg-type]
                        temperature=0,
                    )
        except Exception as exc:
            # Whatever went wrong, the rules can still route: an unexpected error keeps its traceback.
            if not isinstance(exc, openai.OpenAIError | TimeoutError):
                log.warning("unexpected error from the LLM client", exc_info=True)
            return self._fallback(task_input, LLM_ERROR, _describe(exc))
        try:
            return parse_answer(response, self._prompt.specialists, self._min_confidence)
        except InvalidAnswer as exc:
            return self._fallback(task_input, INVALID_ANSWER, str(exc))

    def _fallback(self, task_input: TaskInput, reason: str, cause: str | None) -> RoutingDecision:
        metrics.ROUTING_FALLBACKS.labels(reason).inc()
        decision = self._rules.route(task_input)
        if cause is None:
            return decision
        log.warning("LLM routing fell back to the rules router (%s): %s", reason, cause)
        note = f"{decision.reason} (rules fallback, {reason}: {cause})"
        return decision.model_copy(update={"reason": note[:_REASON_MAX]})

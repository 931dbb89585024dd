"""The chat completions of one specialist: its model first, then the model's ``fallbacks`` (the catalog's
``models``) when it keeps failing.

A call is tried ``llm_retries`` more times on a 5xx, a timeout or a connection error (with backoff); past
that, or when the model is rate limited for longer than ``FAILOVER_WAIT_SECONDS`` (a provider's 429 asking
for more, or the fleet-wide limit needing more), it goes to the next model of the chain, counted in
``taskyard_llm_failovers_total{model,reason}``. The model that answered is returned with the answer, so the
step records it (and is priced by it). With no model left, the last error stands: a 429 defers the task
uncharged, an unavailable model fails the attempt (a charged retry).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from taskyard_common import metrics
from taskyard_common.catalog import SpecialistSpec
from taskyard_common.llm import ClientPool
from taskyard_common.llm_limits import LlmLimits, RateLimitWait
from taskyard_common.model_specs import ModelSpec
from taskyard_common.retry import backoff_seconds
from taskyard_worker.llm_calls import (
    STEP_BACKOFF_BASE_SECONDS,
    STEP_BACKOFF_MAX_SECONDS,
    FleetRateLimited,
    LlmRateLimited,
    LlmUnavailable,
    map_error,
)
from taskyard_worker.streaming import StreamBroken, stream_completion
from taskyard_worker.tokens import TokenStream

_COMPLETIONS_PATH = "/chat/completions"
# Asks the SDK for the raw answer (headers and all) of one call: its documented ``with_raw_response``.
_RAW = {"X-Stainless-Raw-Response": "true"}
# A model rate limited for longer than this gives way to its fallback (when it has one).
FAILOVER_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class ModelRoute:
    """One model of the chain: its name, the clients of its endpoint, its catalog entry (None: none)."""

    name: str
    clients: ClientPool
    spec: ModelSpec | None = None


@dataclass(frozen=True)
class Answer:
    response: ChatCompletion
    model: str  # the model that answered
    spec: ModelSpec | None


def _failover_reason(exc: Exception) -> str | None:
    """Why ``exc`` sends the call to the next model (None: it does not)."""
    if isinstance(exc, LlmUnavailable):
        return exc.reason
    if isinstance(exc, LlmRateLimited) and (
        exc.retry_after is None or exc.retry_after > FAILOVER_WAIT_SECONDS
    ):
        return "fleet_limited" if isinstance(exc, FleetRateLimited) else "rate_limited"
    return None


class LlmCaller:
    """The chat completions of one specialist, on the process's pooled clients, down its model chain."""

    def __init__(
        self, spec: SpecialistSpec, routes: list[ModelRoute], limits: LlmLimits | None = None
    ) -> None:
        if not routes:
            raise ValueError("an LLM caller needs at least one model")
        self._spec = spec
        self._routes = routes
        self._limits = limits

    @property
    def models(self) -> list[str]:
        return [r.name for r in self._routes]

    async def complete(self, body: dict[str, Any], tokens: TokenStream | None = None) -> Answer:
        """One completion; streamed when the specialist says ``stream``, its text to ``tokens`` (all of it
        sent before this returns)."""
        if tokens is None or not self._spec.stream:
            return await self._down_the_chain(body, None)
        try:
            answer = await self._down_the_chain(body, tokens)
        except Exception:
            tokens.restart()  # the step's text so far is void: the next attempt tries the step again
            await tokens.finish()
            raise
        await tokens.finish()
        return answer

    async def _down_the_chain(self, body: dict[str, Any], tokens: TokenStream | None) -> Answer:
        last = len(self._routes) - 1
        for index, route in enumerate(self._routes):
            try:
                response = await self._tries(route, {**body, "model": route.name}, tokens)
                return Answer(response, route.name, route.spec)
            except (LlmUnavailable, LlmRateLimited) as exc:
                reason = _failover_reason(exc)
                if index == last or reason is None:
                    raise
                metrics.LLM_FAILOVERS.labels(route.name, reason).inc()
                if tokens is not None:
                    tokens.restart()  # the failed model's text, if any, is void
        raise AssertionError("unreachable: the last model's error is raised")

    async def _tries(
        self, route: ModelRoute, body: dict[str, Any], tokens: TokenStream | None
    ) -> ChatCompletion:
        retried = 0
        while True:
            try:
                return await self._once(route, body, tokens)
            except LlmUnavailable as exc:
                if retried >= self._spec.llm_retries:
                    raise
                retried += 1
                metrics.LLM_STEP_RETRIES.labels(self._spec.name, exc.reason).inc()
                if tokens is not None:
                    tokens.restart()  # a client may have seen some of the failed try's text
                await asyncio.sleep(
                    backoff_seconds(retried, STEP_BACKOFF_BASE_SECONDS, STEP_BACKOFF_MAX_SECONDS)
                )

    async def _once(
        self, route: ModelRoute, body: dict[str, Any], tokens: TokenStream | None
    ) -> ChatCompletion:
        limits = self._limits if self._limits is not None and self._limits.limits(route.name) else None
        if limits is None:
            return await self._send(route, body, tokens)
        try:
            async with limits.call(route.name, body) as held:
                used: int | None = None
                try:
                    response = await self._send(route, body, tokens, limits)
                    used = response.usage.total_tokens if response.usage is not None else 0
                    return response
                finally:
                    limits.settle(held, used)
        except RateLimitWait as exc:
            metrics.LLM_REQUESTS.labels(route.name, "fleet_limited").inc()
            raise FleetRateLimited(str(exc), exc.wait_seconds) from None

    async def _send(
        self,
        route: ModelRoute,
        body: dict[str, Any],
        tokens: TokenStream | None,
        limits: LlmLimits | None = None,
    ) -> ChatCompletion:
        try:
            with metrics.track_llm_request(route.name), route.clients.client() as client:
                if self._spec.stream:
                    return await stream_completion(client, _COMPLETIONS_PATH, body, tokens)
                # The SDK's generic ``post`` (its documented way to call any endpoint) rather than
                # ``chat.completions.create``: the body is already in wire form (plain dicts, our own tool
                # schemas), and ``create`` would walk every parameter against its type hints to transform
                # it. Errors, auth and parsing stay the SDK's.
                if limits is None or not limits.wants_headers(route.name):
                    return await client.post(_COMPLETIONS_PATH, body=body, cast_to=ChatCompletion)
                # Now and then, the raw answer too, for the provider's x-ratelimit-remaining-* headers.
                raw: Any = await client.post(
                    _COMPLETIONS_PATH, body=body, cast_to=ChatCompletion, options={"headers": _RAW}
                )
                await limits.observe(route.name, raw.headers)
                response: ChatCompletion = raw.parse()
                return response
        except StreamBroken as exc:
            raise LlmUnavailable(str(exc), exc.reason) from exc
        except openai.OpenAIError as exc:
            raise map_error(exc) from exc

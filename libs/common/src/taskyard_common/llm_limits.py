"""Fleet-wide LLM rate limits: the catalog's ``rpm`` and ``tpm`` as token buckets in PostgreSQL, shared by
every worker and broker agent (the ``rate_limits`` table of the submission limit, under the keys
``llm:<model>:requests`` and ``llm:<model>:tokens``, which no tenant name can take).

Before a chat completion a caller reserves one request and the call's estimated tokens (the prompt's
characters / 4 plus its ``max_tokens``, else ``COMPLETION_ESTIMATE``); afterwards it settles with the tokens
the provider reported. The hot path stays cheap because a process reserves in batches (about
``BATCH_SECONDS`` of the limit at once) and hands them out locally; settling only adjusts the local
reserve. A wait of up to ``max_wait`` seconds is waited in place; a longer one raises ``RateLimitWait`` (the
worker defers the task uncharged, the router falls back to its rules). Each bucket holds at most
``BURST_SECONDS`` of its limit. A provider's ``x-ratelimit-remaining-*`` headers shrink the shared bucket
to what the provider says is left (read at most about once a second per model and process).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from taskyard_common.model_specs import ModelSpec
from taskyard_common.store.rate_limits import RateLimitStore

KEY_PREFIX = "llm:"
BURST_SECONDS = 1.0
BATCH_SECONDS = 0.1
COMPLETION_ESTIMATE = 256
SHRINK_EVERY_SECONDS = 1.0
# Above this, a wait is not waited in place.
MAX_WAIT_SECONDS = 2.0


class RateLimitWait(Exception):
    """The model's fleet-wide limit needs a wait longer than the caller may wait in place."""

    def __init__(self, model: str, kind: str, wait_seconds: float) -> None:
        super().__init__(f"the fleet-wide {kind} limit of model {model} needs a {wait_seconds:.1f} s wait")
        self.model = model
        self.kind = kind
        self.wait_seconds = wait_seconds


def bucket_key(model: str, kind: str) -> str:
    return f"{KEY_PREFIX}{model}:{kind}"


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """The prompt's characters / 4 (a common rule of thumb) plus the completion's ``max_tokens``."""
    chars = 0
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        chars += len(content) if isinstance(content, str) else len(str(content or ""))
    completion = body.get("max_completion_tokens") or body.get("max_tokens") or COMPLETION_ESTIMATE
    return chars // 4 + int(completion)


@dataclass
class Bucket:
    """One limit of one model, and what this process holds of it."""

    key: str
    kind: str  # requests | tokens
    per_minute: int
    local: float = 0.0  # reserved from the shared bucket, not used yet (negative: used more than reserved)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # When this process last read the provider's headers for this bucket (monotonic seconds).
    observed_at: float = -SHRINK_EVERY_SECONDS

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0

    @property
    def burst(self) -> int:
        return max(1, math.floor(self.per_second * BURST_SECONDS))

    @property
    def batch(self) -> int:
        return max(1, min(self.burst, math.floor(self.per_second * BATCH_SECONDS)))


@dataclass
class Reservation:
    model: str
    tokens: int  # reserved for the call's tokens (0: no token limit)


class LlmLimits:
    """The fleet-wide limits of the models that have ``rpm`` or ``tpm``, and each process's
    ``max_concurrent`` (others pass freely)."""

    def __init__(
        self,
        store: RateLimitStore,
        models: Mapping[str, ModelSpec],
        *,
        max_wait: float = MAX_WAIT_SECONDS,
    ) -> None:
        self._store = store
        self._max_wait = max_wait
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self._in_flight: dict[str, asyncio.Semaphore] = {}
        for spec in models.values():
            if spec.rpm is not None:
                self._buckets[spec.name, "requests"] = Bucket(
                    bucket_key(spec.name, "requests"), "requests", spec.rpm
                )
            if spec.tpm is not None:
                self._buckets[spec.name, "tokens"] = Bucket(
                    bucket_key(spec.name, "tokens"), "tokens", spec.tpm
                )
            if spec.max_concurrent is not None:
                self._in_flight[spec.name] = asyncio.Semaphore(spec.max_concurrent)

    def limits(self, model: str) -> bool:
        """Whether calls of ``model`` go through ``call`` (it has an rpm, a tpm or a max_concurrent)."""
        return (
            (model, "requests") in self._buckets
            or (model, "tokens") in self._buckets
            or model in self._in_flight
        )

    @contextlib.asynccontextmanager
    async def call(self, model: str, body: Mapping[str, Any]) -> AsyncIterator[Reservation]:
        """Hold ``model``'s share for one call (its concurrency slot, a request and its estimated tokens);
        raises ``RateLimitWait`` when that needs a longer wait than ``max_wait``."""
        slot = self._in_flight.get(model)
        if slot is None:
            yield await self.reserve(model, body)
            return
        async with slot:
            yield await self.reserve(model, body)

    async def reserve(self, model: str, body: Mapping[str, Any]) -> Reservation:
        requests = self._buckets.get((model, "requests"))
        tokens = self._buckets.get((model, "tokens"))
        if requests is not None:
            await self._take(model, requests, 1)
        estimate = 0
        if tokens is not None:
            estimate = min(estimate_tokens(body), tokens.burst)
            try:
                await self._take(model, tokens, estimate)
            except RateLimitWait:
                if requests is not None:
                    requests.local += 1  # not sent: the request stays this process's to use
                raise
        return Reservation(model, estimate)

    def settle(self, reservation: Reservation, used_tokens: int | None) -> None:
        """The call is over: ``used_tokens`` as reported (None: it failed, its reserved tokens come back)."""
        tokens = self._buckets.get((reservation.model, "tokens"))
        if tokens is None or not reservation.tokens:
            return
        tokens.local += reservation.tokens - (used_tokens or 0)

    def wants_headers(self, model: str) -> bool:
        """Whether the next answer's headers are to be read: at most about once a second per model (reading
        them costs the caller the raw answer's handling)."""
        now = time.monotonic()
        return any(
            now - bucket.observed_at >= SHRINK_EVERY_SECONDS
            for kind in ("requests", "tokens")
            if (bucket := self._buckets.get((model, kind))) is not None
        )

    async def observe(self, model: str, headers: Mapping[str, str]) -> None:
        """Shrink the shared buckets to what the provider says is left (``x-ratelimit-remaining-*``)."""
        now = time.monotonic()
        for kind in ("requests", "tokens"):
            bucket = self._buckets.get((model, kind))
            if bucket is None or now - bucket.observed_at < SHRINK_EVERY_SECONDS:
                continue
            bucket.observed_at = now
            value = headers.get(f"x-ratelimit-remaining-{kind}")
            try:
                remaining = float(value) if value is not None else None
            except ValueError:
                remaining = None
            if remaining is not None and remaining < bucket.burst:
                await self._store.shrink(bucket.key, max(0.0, remaining))

    async def _take(self, model: str, bucket: Bucket, need: int) -> None:
        while True:
            if bucket.local >= need:
                bucket.local -= need
                return
            async with bucket.lock:
                if bucket.local >= need:
                    continue  # another call refilled it meanwhile
                want = min(bucket.burst, max(bucket.batch, math.ceil(need - bucket.local)))
                granted = await self._store.take_up_to(
                    bucket.key, want, per_second=bucket.per_second, burst=bucket.burst
                )
                bucket.local += granted.granted
                if bucket.local >= need:
                    continue
                # Short: the shared bucket refills at per_second; the next whole token (or the rest of
                # this call's tokens) is that far away.
                wait = max(need - bucket.local - granted.tokens, 1 - granted.tokens, 0.0) / bucket.per_second
                if wait > self._max_wait:
                    raise RateLimitWait(model, bucket.kind, wait)
                await asyncio.sleep(max(wait, 0.01))

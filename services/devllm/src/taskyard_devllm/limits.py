"""Requests per minute the server accepts per model, like a provider: above the rate it answers 429 with
``retry-after`` and ``x-ratelimit-*`` headers, and it counts what it answered (for the rate-limit figures).

The limit is a token bucket of ``rpm / 60`` requests per second holding ``BURST_SECONDS`` of them (at least
one): a client that keeps to the rate is never refused; the burst absorbs the jitter of the network.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

BURST_SECONDS = 2.0


class Limit(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rpm: int = Field(ge=1)


@dataclass
class Bucket:
    rpm: int
    tokens: float = -1.0  # < 0: full
    at: float = field(default_factory=time.monotonic)

    @property
    def per_second(self) -> float:
        return self.rpm / 60.0

    @property
    def burst(self) -> float:
        return max(1.0, self.per_second * BURST_SECONDS)

    def take(self, now: float) -> float | None:
        """None: taken; else the seconds until a request would be accepted."""
        if self.tokens < 0:
            self.tokens = self.burst
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_second)
        self.at = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return (1 - self.tokens) / self.per_second


@dataclass
class Counts:
    answered: int = 0
    rate_limited: int = 0
    first_at: float | None = None
    last_at: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "answered": self.answered,
            "rate_limited": self.rate_limited,
            "first_at": self.first_at,
            "last_at": self.last_at,
        }


class Limits:
    """Per model; ``default_rpm`` applies to every model without a limit of its own (None: unlimited)."""

    def __init__(self, default_rpm: int | None = None) -> None:
        self._default = default_rpm
        self._buckets: dict[str, Bucket] = {}
        self.counts: dict[str, Counts] = {}

    def set(self, model: str, rpm: int) -> None:
        self._buckets[model] = Bucket(rpm)

    def check(self, model: str) -> dict[str, str] | None:
        """None: the request may be answered (and is counted); else the 429's headers."""
        now = time.monotonic()
        counts = self.counts.setdefault(model, Counts())
        bucket = self._buckets.get(model)
        if bucket is None and self._default is not None:
            bucket = self._buckets[model] = Bucket(self._default)
        wait = bucket.take(now) if bucket is not None else None
        if wait is not None:
            counts.rate_limited += 1
            return {
                "retry-after-ms": str(math.ceil(wait * 1000)),
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-limit-requests": str(bucket.rpm) if bucket else "",
            }
        counts.answered += 1
        counts.first_at = now if counts.first_at is None else counts.first_at
        counts.last_at = now
        return None

    def headers(self, model: str) -> dict[str, str]:
        """What an accepted answer tells of the limit (nothing without one)."""
        bucket = self._buckets.get(model)
        if bucket is None:
            return {}
        return {
            "x-ratelimit-limit-requests": str(bucket.rpm),
            "x-ratelimit-remaining-requests": str(math.floor(max(0.0, bucket.tokens))),
        }

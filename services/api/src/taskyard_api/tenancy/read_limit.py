"""A per-tenant rate limit of reads (every ``GET`` under ``/v1``), kept in this API process.

Submissions draw on a bucket in PostgreSQL shared by every replica; doing the same for reads would add a
write to every read. Reads are limited per process instead: each replica grants a tenant
``TASKYARD_API_READ_RATE_LIMIT_PER_SECOND`` reads per second with bursts of
``TASKYARD_API_READ_RATE_LIMIT_BURST`` (so N replicas grant up to N times that).
It bounds how fast one tenant can make a replica build pages, with their memory and database time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# Tenants reading at once are few; this bounds memory against a client cycling through many tenants' keys.
MAX_TENANTS = 10_000


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass(frozen=True)
class ReadTaken:
    allowed: bool
    tokens: float  # left after this read (fractional: the bucket refills continuously)


class ReadLimiter:
    def __init__(self, *, per_second: float, burst: int, max_tenants: int = MAX_TENANTS) -> None:
        self.per_second = per_second
        self.burst = burst
        self._max = max_tenants
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self.per_second > 0 and self.burst > 0

    def take(self, tenant: str, *, now: float | None = None) -> ReadTaken:
        now = time.monotonic() if now is None else now
        bucket = self._buckets.get(tenant)
        if bucket is None:
            if len(self._buckets) >= self._max:
                self._evict(now)
            bucket = self._buckets[tenant] = _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.at) * self.per_second)
        bucket.at = now
        if bucket.tokens < 1:
            return ReadTaken(False, bucket.tokens)
        bucket.tokens -= 1
        return ReadTaken(True, bucket.tokens)

    def _evict(self, now: float) -> None:
        """Forget the buckets that refilled (a fresh one is the same), then the oldest half if needed."""
        self._buckets = {
            t: b for t, b in self._buckets.items() if b.tokens + (now - b.at) * self.per_second < self.burst
        }
        if len(self._buckets) >= self._max:
            self._buckets = dict(list(self._buckets.items())[len(self._buckets) // 2 :])

"""A short-lived in-process cache of API-key look-ups: the delay a revocation may take, traded for speed.

Without it every request costs a database round trip before it does anything else. With it, a key seen in
the last ``TASKYARD_API_AUTH_CACHE_SECONDS`` is taken as still valid: a revoked key keeps working on an API
process for at most that long (5 s by default). ``0`` turns the cache off, and then a revocation applies
from the very next request. Entries are kept under the SHA-256 of the whole presented key, so a wrong
secret never matches a cached entry.

Refused keys are remembered too, for the same time (a negative cache): a client that keeps sending an
unknown or revoked key costs one database query per TTL, not one per request. The price: a key created
after it was first tried (and refused) works on a process only once that entry expired.
"""

from __future__ import annotations

import hashlib
import time

from taskyard_common.store.keys import ApiKey, KeyStore

# Keys in use at once are few; this bounds memory against a client cycling through many valid keys.
MAX_ENTRIES = 10_000


class CachedKeys:
    def __init__(self, keys: KeyStore, *, ttl_seconds: float, max_entries: int = MAX_ENTRIES) -> None:
        self._keys = keys
        self._ttl = ttl_seconds
        self._max = max_entries
        self._entries: dict[bytes, tuple[float, ApiKey]] = {}
        # Refused keys: digest → until when the refusal stands.
        self._refused: dict[bytes, float] = {}

    async def authenticate(self, key: str) -> ApiKey | None:
        """``KeyStore.authenticate``, answered from the cache while an earlier answer is fresh."""
        if self._ttl <= 0:
            return await self._keys.authenticate(key)
        digest = hashlib.sha256(key.encode()).digest()
        now = time.monotonic()
        entry = self._entries.get(digest)
        if entry is not None and entry[0] > now:
            return entry[1]
        refused_until = self._refused.get(digest)
        if refused_until is not None and refused_until > now:
            return None
        found = await self._keys.authenticate(key)
        if found is None:
            self._entries.pop(digest, None)
            if len(self._refused) >= self._max:
                self._refused = _fresh(self._refused, now, self._max)
            self._refused[digest] = now + self._ttl
            return None
        self._refused.pop(digest, None)
        if len(self._entries) >= self._max:
            self._evict(now)
        self._entries[digest] = (now + self._ttl, found)
        return found

    def _evict(self, now: float) -> None:
        """Drop the expired entries, and the oldest half if that was not enough."""
        self._entries = {d: e for d, e in self._entries.items() if e[0] > now}
        if len(self._entries) >= self._max:
            keep = list(self._entries.items())[len(self._entries) // 2 :]
            self._entries = dict(keep)


def _fresh(refused: dict[bytes, float], now: float, limit: int) -> dict[bytes, float]:
    """The refusals still standing, and only the newer half of them if that is still ``limit`` or more."""
    kept = {d: until for d, until in refused.items() if until > now}
    if len(kept) >= limit:
        kept = dict(list(kept.items())[len(kept) // 2 :])
    return kept

"""A short-lived in-process cache of API-key look-ups: the delay a revocation may take, traded for speed.

Without it every request costs a database round trip before it does anything else. With it, a key seen in
the last ``TASKYARD_API_AUTH_CACHE_SECONDS`` is taken as still valid: a revoked key keeps working on an API
process for at most that long (5 s by default). ``0`` turns the cache off, and then a revocation applies
from the very next request. Only valid keys are cached, under the SHA-256 of the whole presented key, so a
wrong secret never matches a cached entry; a refused key is looked up every time.
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

    async def authenticate(self, key: str) -> ApiKey | None:
        """``KeyStore.authenticate``, answered from the cache while an earlier answer is fresh."""
        if self._ttl <= 0:
            return await self._keys.authenticate(key)
        digest = hashlib.sha256(key.encode()).digest()
        now = time.monotonic()
        entry = self._entries.get(digest)
        if entry is not None and entry[0] > now:
            return entry[1]
        found = await self._keys.authenticate(key)
        if found is None:
            self._entries.pop(digest, None)
            return None
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

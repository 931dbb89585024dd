"""The key cache in front of the key store: valid and refused keys both answered from memory for a while."""

from __future__ import annotations

from typing import Any, cast

from taskyard_api.tenancy.key_cache import CachedKeys
from taskyard_common.store.keys import ApiKey, KeyStore


class CountingKeys:
    """Stands in for the key store: which keys exist, and how often it was asked."""

    def __init__(self, known: dict[str, Any]) -> None:
        self.known = known
        self.asked = 0

    async def authenticate(self, key: str) -> ApiKey | None:
        self.asked += 1
        return cast(ApiKey | None, self.known.get(key))


async def test_an_unknown_key_costs_one_lookup_per_ttl(monkeypatch):
    keys = CountingKeys({})
    cache = CachedKeys(cast(KeyStore, keys), ttl_seconds=5)
    clock = [1000.0]
    monkeypatch.setattr("taskyard_api.tenancy.key_cache.time.monotonic", lambda: clock[0])
    for _ in range(50):
        assert await cache.authenticate("tyk_unknown_secret") is None
    assert keys.asked == 1
    clock[0] += 5.1
    assert await cache.authenticate("tyk_unknown_secret") is None
    assert keys.asked == 2
    # Once the key exists (made after it was refused), it works after the refusal expired.
    keys.known["tyk_unknown_secret"] = object()
    assert await cache.authenticate("tyk_unknown_secret") is None
    clock[0] += 5.1
    assert await cache.authenticate("tyk_unknown_secret") is not None


async def test_refusals_are_bounded():
    keys = CountingKeys({})
    cache = CachedKeys(cast(KeyStore, keys), ttl_seconds=60, max_entries=10)
    for n in range(100):
        await cache.authenticate(f"tyk_{n}_secret")
    assert len(cache._refused) <= 10

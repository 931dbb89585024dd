"""The store's tenants, idempotency keys, API keys and rate-limit buckets against real PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid

from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from taskyard_common.store.rate_limits import RateLimitStore


def task(tenant: str = "default") -> NewTask:
    return NewTask(id=uuid.uuid4(), input="x", metadata={}, tenant=tenant)


async def test_lists_filter_by_tenant_and_none_means_all(store: PostgresTaskStore):
    a, b = await store.create(task("a")), await store.create(task("b"))
    assert a.tenant == "a" and (await store.get(b.id)).tenant == "b"  # type: ignore[union-attr]
    listed = {
        tenant: [
            t.id for t in await store.list(status=None, specialist=None, limit=10, after=None, tenant=tenant)
        ]
        for tenant in ("a", "b", None)
    }
    assert listed == {"a": [a.id], "b": [b.id], None: [b.id, a.id]}
    assert await store.list_dead_letters(specialist=None, reason=None, limit=10, after=None, tenant="a") == []


async def test_concurrent_claims_of_one_key_create_one_task(store: PostgresTaskStore):
    results = await asyncio.gather(
        *(
            store.create_idempotent(task("a"), key="k", request_hash="h", retention_seconds=60)
            for _ in range(20)
        )
    )
    created = [r for r in results if r.created]
    assert len(created) == 1
    assert {r.record.id for r in results if r.record is not None} == {created[0].record.id}  # type: ignore[union-attr]
    # Keys are per tenant.
    other = await store.create_idempotent(task("b"), key="k", request_hash="h", retention_seconds=60)
    assert other.created
    # Discarding the task releases its key.
    assert await store.discard_unpublished(created[0].record.id)  # type: ignore[union-attr]
    again = await store.create_idempotent(task("a"), key="k", request_hash="h2", retention_seconds=60)
    assert again.created


async def test_a_bucket_hands_out_exactly_its_tokens_to_concurrent_takers(store: PostgresTaskStore):
    limits = RateLimitStore(store.pool)
    taken = await asyncio.gather(*(limits.take("t", per_second=0.001, burst=5) for _ in range(20)))
    assert sum(t.allowed for t in taken) == 5
    assert all(t.tokens < 1 for t in taken if not t.allowed)


async def test_many_tokens_are_taken_all_at_once_or_not_at_all(store: PostgresTaskStore):
    limits = RateLimitStore(store.pool)
    # A new tenant's bucket starts full: 7 of 10 taken, then 4 are refused whole and 3 still fit.
    first = await limits.take("g", per_second=0.001, burst=10, count=7)
    assert first.allowed and 2.9 < first.tokens <= 3.01
    refused = await limits.take("g", per_second=0.001, burst=10, count=4)
    assert not refused.allowed and refused.tokens < 4
    assert (await limits.take("g", per_second=0.001, burst=10, count=3)).allowed
    assert not (await limits.take("g", per_second=0.001, burst=10)).allowed
    # Concurrent takers of 3 from a bucket of 10: three fit, never a fourth.
    taken = await asyncio.gather(*(limits.take("h", per_second=0.001, burst=10, count=3) for _ in range(8)))
    assert sum(t.allowed for t in taken) == 3


async def test_keys_authenticate_until_revoked(store: PostgresTaskStore):
    keys = KeyStore(store.pool)
    record, key = await keys.create(tenant="acme", role=Role.READER, name="n")
    found = await keys.authenticate(key)
    assert found is not None and found.id == record.id and found.role is Role.READER
    assert await keys.authenticate(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert [k.id for k in await keys.list("acme")] == [record.id] and await keys.list("other") == []
    assert await keys.revoke(record.id) and not await keys.revoke(record.id)
    assert await keys.authenticate(key) is None

"""Batched rate-limit takes: a request cancelled while it waits leaves no count behind."""

from __future__ import annotations

import asyncio
from typing import cast

from taskyard_api.submission.token_batches import BatchedBuckets, _Tenant
from taskyard_common.store.rate_limits import RateLimitStore, TokensGranted


class Bucket:
    """Stands in for the shared bucket: counts what it was asked for."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    async def take_up_to(self, tenant: str, count: int, *, per_second: float, burst: int) -> TokensGranted:
        self.asked.append(count)
        return TokensGranted(count, 50.0)


async def test_a_cancelled_waiter_is_no_longer_counted():
    bucket = Bucket()
    buckets = BatchedBuckets(cast(RateLimitStore, bucket))
    state = buckets._tenants["acme"] = _Tenant()
    async with state.lock:  # as if a take were in flight: the requests now wait for it
        holder = asyncio.create_task(buckets.take("acme", per_second=10, burst=100))
        waiter = asyncio.create_task(buckets.take("acme", per_second=10, burst=100))
        await asyncio.sleep(0)
        assert state.waiting == 2
        waiter.cancel()  # the client left
        await asyncio.gather(waiter, return_exceptions=True)
    assert (await holder).allowed
    # Still counted, the cancelled waiter would make that take ask for 2 tokens, one of them kept for nobody
    # (and the tenant's entry would stay forever).
    assert bucket.asked == [1]
    assert "acme" not in buckets._tenants

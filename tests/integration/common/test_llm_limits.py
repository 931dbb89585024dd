"""The shared buckets of the fleet-wide LLM limits, on the real database."""

from __future__ import annotations

from taskyard_common.llm_limits import LlmLimits, bucket_key
from taskyard_common.model_specs import ModelSpec
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.rate_limits import RateLimitStore


async def test_two_processes_share_one_bucket_and_a_provider_header_shrinks_it(store: PostgresTaskStore):
    models = {"m": ModelSpec(name="m", rpm=600)}  # 10 a second, a burst of 10, batches of 1
    one, two = (LlmLimits(RateLimitStore(store.pool), models) for _ in range(2))
    for limits in (one, two, one):
        await limits.reserve("m", {"messages": []})
    # One row for every process (its raw tokens: without the refill since it last changed).
    assert set(await RateLimitStore(store.pool).buckets("llm:")) == {bucket_key("m", "requests")}
    # The provider says 0 requests are left: the shared bucket is emptied for everyone.
    assert one.wants_headers("m") and not one.wants_headers("unlimited")
    await one.observe("m", {"x-ratelimit-remaining-requests": "0"})
    assert not one.wants_headers("m"), "read again in a second, not on every answer"
    tokens, _ = (await RateLimitStore(store.pool).buckets("llm:"))[bucket_key("m", "requests")]
    assert tokens == 0
    # Not more than once a second per process (and never up).
    await one.observe("m", {"x-ratelimit-remaining-requests": "5"})
    tokens, _ = (await RateLimitStore(store.pool).buckets("llm:"))[bucket_key("m", "requests")]
    assert tokens == 0

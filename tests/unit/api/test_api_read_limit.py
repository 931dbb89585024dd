"""The per-process read limit: a token bucket per tenant (pure, with an explicit clock)."""

from __future__ import annotations

from taskyard_api.tenancy.read_limit import ReadLimiter


def test_a_burst_then_refusals_then_a_refill():
    limiter = ReadLimiter(per_second=2, burst=3)
    assert [limiter.take("acme", now=0).allowed for _ in range(4)] == [True, True, True, False]
    assert limiter.take("globex", now=0).allowed  # every tenant has its own bucket
    assert not limiter.take("acme", now=0.4).allowed
    assert limiter.take("acme", now=0.6).allowed  # half a second: one token back
    assert not limiter.take("acme", now=0.6).allowed


def test_the_buckets_are_bounded_and_refilled_ones_go_first():
    limiter = ReadLimiter(per_second=1, burst=2, max_tenants=3)
    limiter.take("spent", now=0)
    limiter.take("spent", now=0)
    limiter.take("a", now=0)
    limiter.take("b", now=0)
    # At 1.5 s "a" and "b" refilled (a fresh bucket is the same), "spent" did not: it is the one kept.
    limiter.take("c", now=1.5)
    assert set(limiter._buckets) == {"spent", "c"}
    for tenant in "defghij":
        limiter.take(tenant, now=1.5)
    assert len(limiter._buckets) <= 3


def test_disabled_with_a_zero():
    assert not ReadLimiter(per_second=0, burst=5).enabled
    assert not ReadLimiter(per_second=5, burst=0).enabled

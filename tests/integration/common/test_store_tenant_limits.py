"""Tenant limits in the store: the operator's CRUD, the cap the start transition enforces under concurrent
starters, the refusals noted in the attempt history, and the fair share's snapshot."""

import asyncio
import uuid

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import DeferralReason, NewTask, PostgresTaskStore, StartOutcome
from taskyard_common.store.tenant_limits import TenantLimitStore, TenantWaiting

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1.0)


async def queued(store, tenant, count=1):
    tasks = [NewTask(id=uuid.uuid4(), tenant=tenant, input="x", metadata={}) for _ in range(count)]
    await store.create_many(tasks)
    for task in tasks:
        assert await store.route(task.id, DECISION) is not None
    return [task.id for task in tasks]


async def running_of(store, tenant):
    return await store.pool.fetchval(
        "SELECT count(*) FROM tasks WHERE tenant = $1 AND status = 'running'", tenant
    )


async def test_limits_are_set_read_listed_and_dropped(store):
    limits = TenantLimitStore(store.pool)
    unset = await limits.get("acme")
    assert (unset.max_running, unset.running, unset.updated_at) == (
        None,
        0,
        None,
    ) and await limits.list() == []
    set_ = await limits.put("acme", max_running=3)
    assert (set_.tenant, set_.max_running, set_.running) == ("acme", 3, 0)
    [task] = await queued(store, "acme")
    assert (await store.start(task, owner="w", lease_seconds=30, attempt=1)).outcome is StartOutcome.STARTED
    changed = await limits.put("acme", max_running=5)
    assert (changed.max_running, changed.running) == (5, 1) and changed.updated_at >= set_.updated_at
    await limits.put("globex", max_running=None)
    assert [(t.tenant, t.max_running) for t in await limits.list()] == [("acme", 5), ("globex", None)]
    with pytest.raises(ValueError):
        await limits.put("acme", max_running=0)
    assert await limits.delete("acme") and not await limits.delete("acme")
    assert (await limits.get("acme")).max_running is None


async def test_the_cap_holds_under_concurrent_starters(store, db_settings):
    """Three worker processes' worth of pools start a capped tenant's tasks at once, one by one and in
    batches, round after round: the tenant never runs more than its cap, and every refusal is deferred with
    its reason noted; an uncapped tenant's tasks start all the same."""
    cap = 4
    await TenantLimitStore(store.pool).put("noisy", max_running=cap)
    tasks = await queued(store, "noisy", 40)
    others = await queued(store, "quiet", 6)
    starters = [await PostgresTaskStore.open(db_settings) for _ in range(3)]
    try:
        for round_ in range(3):
            waiting = [t for t in tasks if (await store.get(t)).status is TaskStatus.QUEUED]
            singles = [
                # Half of them as a worker that knows the tenant is capped (no one-statement attempt).
                starters[i % 3].start(t, owner=f"w{i % 3}", lease_seconds=30, attempt=1, capped=i % 2 == 0)
                for i, t in enumerate(waiting)
            ]
            batch = starters[0].start_many(
                {t: 1 for t in waiting[:10] + others[:2] if round_ == 0}, owner="w0", lease_seconds=30
            )
            results = await asyncio.gather(*singles, batch)
            outcomes = [r.outcome for r in results[:-1]]
            assert await running_of(store, "noisy") == cap, f"round {round_}"
            assert outcomes.count(StartOutcome.STARTED) == cap - (round_ > 0) * (cap - 1)
            deferred = [r for r in results[:-1] if r.outcome is StartOutcome.DEFERRED]
            assert deferred and all(r.reason is DeferralReason.TENANT_MAX_RUNNING for r in deferred)
            assert set(results[-1]) <= set(others), "a batch never starts a capped tenant's task"
            # One of the tenant's tasks ends: room for exactly one more in the next round.
            [done] = [t for t in tasks if (await store.get(t)).status is TaskStatus.RUNNING][:1]
            record = await store.get(done)
            assert await store.complete(done, {"answer": "ok"}, Usage(), record.lease_owner)
    finally:
        for starter in starters:
            await starter.close()
    assert await running_of(store, "quiet") == 2


async def test_a_refusal_is_noted_once_per_run_and_charges_nothing(store):
    await TenantLimitStore(store.pool).put("acme", max_running=1)
    first, second = await queued(store, "acme", 2)
    assert (await store.start(first, owner="w", lease_seconds=30, attempt=1)).outcome is StartOutcome.STARTED
    for expected in (1, 2, 3):
        result = await store.start(second, owner="w", lease_seconds=30, attempt=1)
        assert (result.outcome, result.reason, result.deferrals) == (
            StartOutcome.DEFERRED,
            DeferralReason.TENANT_MAX_RUNNING,
            expected,
        )
    fair = await store.defer_start(second, DeferralReason.FAIR_SHARE, 1)
    assert fair is not None and fair.deferrals == 1
    record = await store.get(second)
    assert record.status is TaskStatus.QUEUED and record.attempts == 0 and record.lease_owner is None
    assert [(e["event"], e["reason"], e["count"], e["attempt"]) for e in record.attempt_log] == [
        ("start_deferred", "tenant_max_running", 3, 1),
        ("start_deferred", "fair_share", 1, 1),
    ]
    events = [e.type for e in await store.events(second)]
    assert events == ["accepted", "routed", "start_deferred", "start_deferred"]
    # Room again: it starts, attempt 1 (the refusals charged nothing).
    assert await store.complete(first, {"answer": "ok"}, Usage(), "w")
    started = await store.start(second, owner="w", lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED and started.record.attempts == 1
    # Only a startable task is deferred; a cancelled one is not, and start says what it is.
    [cancelled] = await queued(store, "acme")
    await store.cancel(cancelled)
    assert await store.defer_start(cancelled, DeferralReason.FAIR_SHARE, 1) is None


async def test_the_load_snapshot_counts_waiting_work_and_room_under_caps(store):
    await TenantLimitStore(store.pool).put("capped", max_running=3)
    capped = await queued(store, "capped", 5)
    await queued(store, "free", 2)
    for task in capped[:2]:
        assert (
            await store.start(task, owner="w", lease_seconds=30, attempt=1)
        ).outcome is StartOutcome.STARTED
    assert await store.tenant_load("general") == {
        "capped": TenantWaiting(waiting=3, cap_room=1),
        "free": TenantWaiting(waiting=2, cap_room=None),
    }
    assert await store.tenant_load("researcher") == {}

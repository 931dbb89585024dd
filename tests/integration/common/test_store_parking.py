"""Parked tasks in the store (``store/parking.py``): routing parks past a full lane, a refused start parks,
the feeder's statement releases by priority then submission order within the lane's room and the tenant's
cap, a start takes a parked task and clears it, and the reaper's ``stale_queued`` never sees one."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, RoutingDecision, RoutingMethod
from taskyard_common.store import DeferralReason, NewTask, PostgresTaskStore, StartOutcome
from taskyard_common.store.tenant_limits import TenantLimitStore

pytestmark = pytest.mark.integration

SPECIALIST = "general"
DECISION = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist=SPECIALIST, reason="r", confidence=1.0)


async def routed(store, tenant, count=1, *, depth, priority=Priority.NORMAL):
    """Create and route ``count`` tasks of ``tenant`` with lanes of ``depth``: [(id, parked)]."""
    tasks = [
        NewTask(id=uuid.uuid4(), tenant=tenant, input="x", metadata={}, priority=priority)
        for _ in range(count)
    ]
    await store.create_many(tasks)
    out = []
    for task in tasks:
        route = await store.route(task.id, DECISION, lane_depth=depth)
        assert route is not None
        out.append((task.id, route.parked))
    return out


async def test_routing_parks_past_the_lane_and_keeps_order(store):
    first = await routed(store, "acme", 5, depth=3)
    assert [parked for _, parked in first] == [False, False, False, True, True]
    # Another tenant has a lane of its own; without lanes nothing is parked.
    assert [parked for _, parked in await routed(store, "globex", 2, depth=3)] == [False, False]
    assert [parked for _, parked in await routed(store, "initech", 4, depth=None)] == [False] * 4
    # Once one is parked, a later task of the tenant is parked too even with room in the lane: it must not
    # overtake the parked ones.
    started = await store.start(first[0][0], owner="w", lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED
    [(_, parked)] = await routed(store, "acme", depth=3)
    assert parked and await store.parked_count(SPECIALIST, "acme") == 3
    record = await store.get(first[3][0])
    assert record.status is TaskStatus.QUEUED and record.parked_at is not None
    events = await store.events(first[3][0])
    assert [e.data.get("parked") for e in events if e.type == "routed"] == [True]


async def test_a_capped_tenant_is_parked_past_its_room(store):
    await TenantLimitStore(store.pool).put("acme", max_running=2)
    tasks = await routed(store, "acme", 4, depth=10)
    assert [parked for _, parked in tasks] == [False, False, True, True]


async def test_the_feeder_releases_high_first_then_in_order_within_the_room(store):
    normal = await routed(store, "acme", 4, depth=2)
    low = await routed(store, "acme", 1, depth=2, priority=Priority.LOW)
    high = await routed(store, "acme", 1, depth=2, priority=Priority.HIGH)
    assert [p for _, p in normal + low + high] == [False, False, True, True, True, True]
    # The lane is full: nothing to release.
    assert await store.release_parked({SPECIALIST: 2}, limit=100) == []
    # One of the lane's tasks starts: one place, for the parked high.
    await store.start(normal[0][0], owner="w", lease_seconds=30, attempt=1)
    [released] = await store.release_parked({SPECIALIST: 2}, limit=100)
    assert released.id == high[0][0] and released.parked_at is None and released.published_at is None
    # The lane grows: the parked normals in submission order, then the low.
    assert [r.id for r in await store.release_parked({SPECIALIST: 4}, limit=100)] == [
        normal[2][0],
        normal[3][0],
    ]
    assert [r.id for r in await store.release_parked({SPECIALIST: 5}, limit=100)] == [low[0][0]]
    assert await store.parked_count(SPECIALIST, "acme") == 0
    # A specialist the feeder was not told about keeps its parked tasks.
    await routed(store, "acme", 3, depth=1)
    assert await store.release_parked({"other": 10}, limit=100) == []


async def test_the_feeder_releases_no_more_than_the_cap_has_room_for(store):
    await TenantLimitStore(store.pool).put("acme", max_running=2)
    tasks = await routed(store, "acme", 5, depth=10)
    for task_id, _ in tasks[:2]:
        assert (
            await store.start(task_id, owner="w", lease_seconds=30, attempt=1)
        ).outcome is StartOutcome.STARTED
    assert await store.release_parked({SPECIALIST: 10}, limit=100) == []
    await store.complete(tasks[0][0], {"text": "ok"}, _usage(), "w")
    [released] = await store.release_parked({SPECIALIST: 10}, limit=100)
    assert released.id == tasks[2][0]
    assert await store.release_parked({SPECIALIST: 10}, limit=100) == []


async def test_a_refused_start_parks_a_queued_task_and_a_start_clears_it(store):
    [(task_id, _)] = await routed(store, "acme", depth=10)
    refused = await store.defer_start(task_id, DeferralReason.FAIR_SHARE, 1)
    assert refused is not None and refused.parked and refused.deferrals == 1
    assert (await store.get(task_id)).parked_at is not None
    # A stray message of the parked task starts it like any queued one, and it is parked no more.
    started = await store.start(task_id, owner="w", lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED and started.record.parked_at is None
    assert await store.release_parked({SPECIALIST: 10}, limit=100) == []


async def test_a_capped_start_refused_at_the_cap_parks(store):
    await TenantLimitStore(store.pool).put("acme", max_running=1)
    tasks = await routed(store, "acme", 2, depth=None)
    assert (
        await store.start(tasks[0][0], owner="w", lease_seconds=30, attempt=1)
    ).outcome is StartOutcome.STARTED
    refused = await store.start(tasks[1][0], owner="w", lease_seconds=30, attempt=1, capped=True)
    assert refused.outcome is StartOutcome.DEFERRED and refused.parked
    assert refused.reason is DeferralReason.TENANT_MAX_RUNNING


async def test_stale_queued_never_returns_a_parked_task(store):
    """The reaper re-announces queued tasks whose publish is not confirmed: never a parked one (it has no
    message on purpose), but a released one whose publish was lost, yes."""
    tasks = await routed(store, "acme", 2, depth=1)
    parked_id = tasks[1][0]
    await store.pool.execute("UPDATE tasks SET published_at = NULL")
    later = datetime.now(UTC) + timedelta(hours=1)
    stale = {t.id for t in await store.stale_queued(older_than=later, limit=100)}
    assert parked_id not in stale and tasks[0][0] in stale
    await store.start(tasks[0][0], owner="w", lease_seconds=30, attempt=1)
    [released] = await store.release_parked({SPECIALIST: 1}, limit=100)
    # Released, then the feeder died before its publish: the reaper's look-up finds it.
    assert released.id == parked_id
    assert parked_id in {t.id for t in await store.stale_queued(older_than=later, limit=100)}


async def test_cancelling_a_parked_task_takes_it_out_of_the_lane(store):
    tasks = await routed(store, "acme", 2, depth=1)
    assert await store.cancel(tasks[1][0]) is not None
    assert await store.parked_count(SPECIALIST, "acme") == 0
    await store.start(tasks[0][0], owner="w", lease_seconds=30, attempt=1)
    assert await store.release_parked({SPECIALIST: 1}, limit=100) == []


async def test_two_feeders_never_release_a_lane_twice_over(store, db_settings):
    tasks = await routed(store, "acme", 30, depth=5)
    assert sum(p for _, p in tasks) == 25
    for task_id, _ in tasks[:5]:
        await store.start(task_id, owner="w", lease_seconds=30, attempt=1)
    others = [await PostgresTaskStore.open(db_settings) for _ in range(3)]
    try:
        rounds = await asyncio.gather(*(s.release_parked({SPECIALIST: 5}, limit=100) for s in others))
    finally:
        for other in others:
            await other.close()
    released = [r.id for batch in rounds for r in batch]
    assert len(released) == len(set(released)) and len(released) <= 5


def _usage():
    from taskyard_common.messages import Usage

    return Usage()

"""Tenant lanes in the broker agent (``lanes.py``): routing parks a tenant's tasks past its lane, the feeder
publishes them as the lane drains (in order), a redelivered intake message of a parked task publishes
nothing, and nothing is lost when the agent dies between parking and releasing, or between a release's
commit and its publish."""

from __future__ import annotations

import pytest

from taskyard_broker_agent.settings import LaneSettings
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, WorkMessage
from taskyard_common.store import DEFAULT_TENANT
from tests.support.polling import eventually

pytestmark = pytest.mark.integration

SPECIALIST = "summarizer"
# Lanes of two messages whatever the catalog's concurrency.
# One intake message at a time: concurrent routings each see the lane as it was (see ``parking.py``).
LANES = LaneSettings(factor=0.001, min_depth=2, feeder_interval_seconds=0.1)


async def parked(store) -> int:
    return await store.parked_count(SPECIALIST, DEFAULT_TENANT)


async def test_past_its_lane_a_tenants_tasks_are_parked_then_fed_in_order(run_agent, bus, new_task, store):
    messages = [await new_task(f"item {i}", requested=SPECIALIST) for i in range(5)]
    queue = bus.topology.specialist_queue(SPECIALIST)
    async with run_agent(lanes=LANES, prefetch=1):
        for message in messages:
            await bus.send(message)

        async def three_parked() -> bool:
            return await parked(store) == 3

        await eventually(three_parked, timeout=15, what="three tasks to be parked")
        assert await bus.depth(queue) == 2
        for expected in messages[:5]:
            # A worker takes the head of the queue and starts it: the lane has room for the next one.
            incoming = await bus.take(queue)
            work = WorkMessage.model_validate_json(incoming.body)
            assert work.task_id == expected.task_id
            started = await store.start(work.task_id, owner="w", lease_seconds=30, attempt=1)
            assert started.record is not None and started.record.parked_at is None
            await incoming.ack()
        assert await parked(store) == 0
    assert await bus.depth(queue) == 0


async def test_a_redelivered_intake_message_of_a_parked_task_publishes_nothing(
    run_agent, bus, new_task, store
):
    first, second, third = [await new_task(f"item {i}", requested=SPECIALIST) for i in range(3)]
    decision = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist=SPECIALIST, reason="r", confidence=1)
    for message in (first, second, third):
        await store.route(message.task_id, decision, lane_depth=2)
    assert (await store.get(third.task_id)).parked_at is not None
    # The lane stays full (the first two are never taken): the feeder has nothing to release.
    async with run_agent(lanes=LANES, prefetch=1):
        await bus.send(third)

        async def handled() -> bool:
            return await bus.depth(bus.topology.intake_queue) == 0

        await eventually(handled, timeout=15, what="the intake message to be handled")
    assert await bus.depth(bus.topology.specialist_queue(SPECIALIST)) == 0
    assert (await store.get(third.task_id)).parked_at is not None


async def test_nothing_is_lost_when_the_agent_dies_between_parking_and_releasing(
    run_agent, bus, new_task, store
):
    """An agent parks three tasks and goes away; another agent's feeder releases them as their lane drains.
    A release committed by a feeder that died before publishing is published by the reaper instead."""
    messages = [await new_task(f"item {i}", requested=SPECIALIST) for i in range(5)]
    queue = bus.topology.specialist_queue(SPECIALIST)
    async with run_agent(lanes=LANES.model_copy(update={"feeder_interval_seconds": 3600}), prefetch=1):
        for message in messages:
            await bus.send(message)

        async def three_parked() -> bool:
            return await parked(store) == 3

        await eventually(three_parked, timeout=15, what="three tasks to be parked")
    for _ in range(2):  # the lane drains while no agent runs
        incoming = await bus.take(queue)
        await store.start(
            WorkMessage.model_validate_json(incoming.body).task_id, owner="w", lease_seconds=30, attempt=1
        )
        await incoming.ack()
    # A feeder released two in a commit of its own and died before publishing them.
    lost = await store.release_parked({SPECIALIST: 2}, limit=100)
    assert [r.id for r in lost] == [m.task_id for m in messages[2:4]]
    async with run_agent(lanes=LANES, republish_after_seconds=1, reaper_interval_seconds=0.5):
        seen = set()

        async def all_announced() -> bool:
            incoming = await (await bus.queue(queue)).get(fail=False)
            if incoming is not None:
                work = WorkMessage.model_validate_json(incoming.body)
                seen.add(work.task_id)
                await store.start(work.task_id, owner="w", lease_seconds=30, attempt=1)
                await incoming.ack()
            return seen == {m.task_id for m in messages[2:]}

        await eventually(all_announced, timeout=30, what="the released and the parked tasks to be published")
    for message in messages:
        assert (await store.get(message.task_id)).status is TaskStatus.RUNNING

"""The fleet count (``fleet.py``): the workers consuming a specialist's queues, for its lane depth."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

import pytest
from aio_pika.abc import AbstractIncomingMessage

from taskyard_broker_agent.fleet import FleetCounter
from taskyard_broker_agent.lanes import Lanes
from taskyard_broker_agent.settings import LaneSettings
from taskyard_common.catalog import Catalog
from taskyard_common.messages import Priority
from taskyard_common.topology import declare
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def consume(stack: AsyncExitStack, bus, queue: str) -> None:
    """A consumer on ``queue`` (a channel of its own, as each worker has), cancelled when ``stack`` closes."""
    channel = await bus.connection.channel()
    stack.push_async_callback(channel.close)
    declared = await channel.declare_queue(queue, passive=True)
    await declared.consume(ignore)


async def ignore(message: AbstractIncomingMessage) -> None:
    """Holds what it gets unacked (a prefetch's worth) until its channel closes."""


def counted(counter: FleetCounter, name: str, expected: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await counter.count())[name] == expected

    return check


async def test_a_lane_deepens_with_the_workers_counted_on_the_specialists_queues(
    bus, catalog: Catalog, make_context, amqp_settings
):
    name = catalog.names[0]
    assert (
        await FleetCounter(
            make_context(bus.publisher),
            bus.connection,
            Lanes(make_context(bus.publisher), LaneSettings()),
            60,
        ).count()
        == {}
    )  # no queues yet: nothing counted
    await declare(bus.channel, bus.topology, catalog.names, amqp_settings)
    slots = catalog.get(name).concurrency
    context = make_context(bus.publisher)
    lanes = Lanes(context, LaneSettings(min_depth=1))
    counter = FleetCounter(context, bus.connection, lanes, interval_seconds=60)
    try:
        assert (await counter.count())[name] == 0
        assert lanes.depth(name) == slots  # none consume yet: counted as one
        async with AsyncExitStack() as stack:
            for _ in range(3):
                await consume(stack, bus, bus.topology.specialist_queue(name))
            # A worker consumes every level queue: the most consumers on one of them is the fleet.
            await consume(stack, bus, bus.topology.specialist_queue(name, Priority.HIGH))
            await eventually(counted(counter, name, 3), what="3 workers counted")
            assert lanes.depth(name) == 3 * slots
        # The queue learns of a closed channel's consumers a moment after the close returns.
        await eventually(counted(counter, name, 0), what="no worker counted")
    finally:
        await counter.stop()


async def test_the_running_agent_counts_workers_that_start_after_it(run_agent, bus, catalog: Catalog):
    """The count the agent makes at its start comes before its workers consume; the next one, seconds
    later, sees them (the queue gauges' 15 s round used to be the only count)."""
    name = catalog.names[0]
    slots = catalog.get(name).concurrency
    async with run_agent(lanes=LaneSettings(min_depth=1, fleet_seconds=0.2)) as agent:
        lanes = agent.lanes
        assert lanes is not None

        def depth_is(expected: int) -> Callable[[], Awaitable[bool]]:
            async def check() -> bool:
                return lanes.depth(name) == expected

            return check

        await eventually(depth_is(slots), timeout=10, what="the first count")
        async with AsyncExitStack() as stack:
            for _ in range(2):
                await consume(stack, bus, bus.topology.specialist_queue(name))
            await eventually(depth_is(2 * slots), timeout=10, what="two workers counted")

"""Weighted selection of the deliveries waiting for one shared concurrency limit (taskyard_common.slots)."""

import asyncio
from collections import Counter

import pytest

from taskyard_common.messages import Priority
from taskyard_common.slots import DEFAULT_WEIGHTS, WeightedSlots, turn_cycle

H, N, L = Priority.HIGH, Priority.NORMAL, Priority.LOW


def test_a_cycle_holds_each_level_as_often_as_its_weight_spread_out():
    cycle = turn_cycle(DEFAULT_WEIGHTS)
    assert Counter(cycle) == {H: 6, N: 3, L: 1}
    assert cycle[0] is H  # the highest level opens the cycle
    # Spread, not bunched: high never takes more than two turns in a row at 6:3:1.
    assert "HHH" not in "".join(level.value[0].upper() for level in cycle * 2)


def test_weights_that_would_starve_a_level_are_refused():
    with pytest.raises(ValueError):
        WeightedSlots(2, {H: 1, N: 1, L: 0})
    with pytest.raises(ValueError):
        WeightedSlots(0)


async def _grant_order(slots: WeightedSlots, waiting: dict[Priority, int], grants: int) -> list[Priority]:
    """Queue ``waiting`` deliveries per level behind full slots, then release ``grants`` times; the order
    in which levels got the slots."""
    order: list[Priority] = []

    async def one(level: Priority) -> None:
        await slots.acquire(level)
        order.append(level)

    tasks = [asyncio.create_task(one(level)) for level, count in waiting.items() for _ in range(count)]
    await asyncio.sleep(0)
    for _ in range(grants):
        slots.release()
        for _ in range(5):  # the granted waiter's ``acquire`` returns a few turns of the loop later
            await asyncio.sleep(0)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return order


async def test_without_contention_any_level_runs_at_once():
    slots = WeightedSlots(2)
    assert await slots.acquire(L, timeout=0.01)
    assert await slots.acquire(L, timeout=0.01)
    assert slots.free == 0


async def test_low_keeps_its_share_under_a_flood_of_high():
    slots = WeightedSlots(1)
    await slots.acquire(L)
    order = await _grant_order(slots, {H: 200, L: 200}, grants=100)
    # Normal is idle: its turns go to high, the highest level waiting. Low keeps its one turn in ten.
    assert Counter(order) == {H: 90, L: 10}
    assert slots.granted == {H: 90, N: 0, L: 10}


async def test_all_three_levels_share_by_their_weights():
    slots = WeightedSlots(1)
    await slots.acquire(N)
    order = await _grant_order(slots, {H: 100, N: 100, L: 100}, grants=50)
    assert Counter(order) == {H: 30, N: 15, L: 5}


async def test_a_level_alone_takes_every_slot_and_order_within_a_level_is_kept():
    slots = WeightedSlots(1)
    await slots.acquire(H)
    seen: list[int] = []

    async def one(index: int) -> None:
        await slots.acquire(L)
        seen.append(index)
        slots.release()

    tasks = [asyncio.create_task(one(i)) for i in range(5)]
    await asyncio.sleep(0)
    slots.release()
    await asyncio.gather(*tasks)
    assert seen == [0, 1, 2, 3, 4]
    assert slots.free == 1


async def test_a_wait_that_times_out_or_is_cancelled_gives_up_its_place_only():
    slots = WeightedSlots(1)
    await slots.acquire(N)
    assert not await slots.acquire(H, timeout=0.01)
    assert slots.waiting(H) == 0
    cancelled = asyncio.create_task(slots.acquire(H))
    waiting_low = asyncio.create_task(slots.acquire(L))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    slots.release()
    assert await waiting_low  # the slot went to the one still waiting
    slots.release()
    assert slots.free == 1

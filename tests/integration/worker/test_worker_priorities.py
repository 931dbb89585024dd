"""Priorities on one specialist (RabbitMQ 3.x: a queue per level): a worker's one concurrency limit is shared
by weighted selection (6:3:1), so high goes first and low keeps its share. Small counts and a concurrency of
1 here; ``make bench`` (bench/scenarios/priority.py) measures the full-size figures in time."""

from __future__ import annotations

import math
from uuid import UUID

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority
from taskyard_worker.app import running_worker
from tests.integration.worker.helpers import Harness
from tests.support.polling import eventually

pytestmark = pytest.mark.integration

# Each task is one LLM call this long: long enough that the backlog is still there when the highs come.
CALL = {"delay_seconds": 0.02, "content": "ok"}


async def _start_order(harness: Harness) -> list[tuple[UUID, Priority]]:
    rows = await harness.store.pool.fetch(
        "SELECT id, priority FROM tasks WHERE started_at IS NOT NULL ORDER BY started_at, id"
    )
    return [(row["id"], Priority(row["priority"])) for row in rows]


async def _all_completed(harness: Harness, count: int) -> None:
    async def done() -> bool:
        return await harness.count(TaskStatus.COMPLETED) >= count

    await eventually(done, timeout=60, what=f"{count} tasks completed")


async def test_highs_submitted_behind_a_backlog_of_lows_start_before_the_remaining_lows(
    harness: Harness, write_catalog, make_settings
) -> None:
    lows, highs = 60, 10
    await harness.script([CALL], repeat_last=True)
    settings = make_settings(catalog=write_catalog(concurrency=1))
    for _ in range(lows):
        await harness.submit("low", priority=Priority.LOW)
    async with running_worker(settings, "general"):

        async def some_started() -> bool:
            return len(await _start_order(harness)) >= 5

        await eventually(some_started, what="the worker into the backlog of lows")
        started_before = len(await _start_order(harness))
        high_ids = {(await harness.submit("high", priority=Priority.HIGH)).task_id for _ in range(highs)}
        await _all_completed(harness, lows + highs)
    order = await _start_order(harness)
    assert len(order) == lows + highs
    last_high = max(i for i, (task_id, _) in enumerate(order) if task_id in high_ids)
    lows_meanwhile = sum(1 for _, p in order[started_before : last_high + 1] if p is Priority.LOW)
    remaining = lows - started_before
    # While about 50 lows were still waiting, the 10 highs went first: only low's guaranteed share (one
    # slot in ten) and the few lows already holding a slot or at the head of the wait started meanwhile.
    assert lows_meanwhile <= math.ceil(highs / 9) + 3, (lows_meanwhile, order)
    assert remaining - lows_meanwhile >= 40


async def test_under_a_continuous_backlog_of_highs_lows_keep_their_weighted_share(
    harness: Harness, write_catalog, make_settings
) -> None:
    await harness.script([CALL], repeat_last=True)
    settings = make_settings(catalog=write_catalog(concurrency=1))
    for _ in range(10):
        await harness.submit("low", priority=Priority.LOW)
    for _ in range(40):
        await harness.submit("high", priority=Priority.HIGH)
    async with running_worker(settings, "general"):
        await _all_completed(harness, 50)
    order = await _start_order(harness)
    # Over the first 30 starts highs were always waiting: low still got its one slot in ten (the first
    # start, before any contention, may add one), neither starved nor served in arrival order.
    lows_first_30 = sum(1 for _, p in order[:30] if p is Priority.LOW)
    assert 2 <= lows_first_30 <= 4, [p.value for _, p in order]

"""The published marker's rounds: confirms marked together within the flush interval, the database spared
after a failed flush, and what is left flushed at close."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from uuid import UUID, uuid4

import pytest

from taskyard_api.submission.published import RETRY_SECONDS, PublishedMarker
from taskyard_common.errors import StoreUnavailable


class FakeStore:
    def __init__(self) -> None:
        self.batches: list[list[UUID]] = []
        self.away = False

    async def mark_published_many(self, task_ids: Sequence[UUID]) -> int:
        if self.away:
            raise StoreUnavailable("database away")
        self.batches.append(list(task_ids))
        return len(task_ids)


async def until(condition, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.005)):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not met in time")


async def test_confirms_are_marked_together_within_the_flush_interval():
    store = FakeStore()
    marker = PublishedMarker(store, flush_interval=0.02)
    marker.start()
    ids = [uuid4() for _ in range(3)]
    for task_id in ids:
        marker.mark(task_id)
    await until(lambda: marker.pending == 0)
    assert store.batches == [ids]
    await marker.close()
    assert store.batches == [ids], "nothing left to flush at close"


async def test_a_failed_flush_pauses_the_rounds_and_close_flushes_what_is_left(
    caplog: pytest.LogCaptureFixture,
):
    caplog.set_level(logging.WARNING)
    store = FakeStore()
    store.away = True
    marker = PublishedMarker(store, flush_interval=0.001)
    marker.start()
    task_id = uuid4()
    marker.mark(task_id)
    await until(lambda: any("round failed" in r.getMessage() for r in caplog.records))
    # Many flush intervals, well within the pause: no second try, so no second warning.
    await asyncio.sleep(RETRY_SECONDS / 5)
    assert len([r for r in caplog.records if "round failed" in r.getMessage()]) == 1
    assert marker.pending == 1
    store.away = False
    await marker.close()
    assert marker.pending == 0 and store.batches == [[task_id]]

"""The start batcher: one statement per burst of deliveries, the single path for the rest, errors to all."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from taskyard_common.errors import StoreUnavailable
from taskyard_common.store import StartOutcome, StartResult
from taskyard_worker.start_batch import MAX_BATCH, StartBatcher


class FakeStore:
    def __init__(self, *, startable: set[uuid.UUID] | None = None, fail: bool = False) -> None:
        self.startable = startable
        self.fail = fail
        self.batches: list[dict[uuid.UUID, int]] = []
        self.singles: list[uuid.UUID] = []

    async def start_many(self, attempts: dict[uuid.UUID, int], *, owner: str, lease_seconds: float) -> Any:
        self.batches.append(dict(attempts))
        await asyncio.sleep(0)
        if self.fail:
            raise StoreUnavailable("database unavailable: OSError")
        return {t: f"record {t}" for t in attempts if self.startable is None or t in self.startable}

    async def start(
        self, task_id: uuid.UUID, *, owner: str, lease_seconds: float, attempt: int, capped: bool = False
    ) -> StartResult:
        self.singles.append(task_id)
        return StartResult(StartOutcome.FINISHED)


async def test_a_burst_starts_in_one_statement_and_the_rest_take_the_single_path() -> None:
    ids = [uuid.uuid4() for _ in range(5)]
    store = FakeStore(startable=set(ids[:3]))
    batcher = StartBatcher(store, owner="w", lease_seconds=30)  # type: ignore[arg-type]
    results = await asyncio.gather(*(batcher.start(t, attempt=2) for t in ids))
    assert store.batches == [dict.fromkeys(ids, 2)]
    assert [r.outcome for r in results] == [StartOutcome.STARTED] * 3 + [StartOutcome.FINISHED] * 2
    assert results[0].record == f"record {ids[0]}"
    assert store.singles == ids[3:]


async def test_a_full_batch_goes_at_once_and_every_start_is_answered() -> None:
    ids = [uuid.uuid4() for _ in range(MAX_BATCH + 50)]
    store = FakeStore()
    batcher = StartBatcher(store, owner="w", lease_seconds=30)  # type: ignore[arg-type]
    results = await asyncio.gather(*(batcher.start(t, attempt=1) for t in ids))
    assert all(r.outcome is StartOutcome.STARTED for r in results)
    assert sorted(len(b) for b in store.batches) == [50, MAX_BATCH]


async def test_a_store_failure_reaches_every_start_of_the_batch() -> None:
    store = FakeStore(fail=True)
    batcher = StartBatcher(store, owner="w", lease_seconds=30)  # type: ignore[arg-type]
    results = await asyncio.gather(
        *(batcher.start(uuid.uuid4(), attempt=1) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, StoreUnavailable) for r in results)
    # The next burst is a new batch.
    store.fail = False
    assert (await batcher.start(uuid.uuid4(), attempt=1)).outcome is StartOutcome.STARTED
    assert len(store.batches) == 2

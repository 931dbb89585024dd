"""Submissions stored together (inserts.py) and marked published behind their 202 (published.py)."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from taskyard_api.submission.inserts import TaskInserter
from taskyard_api.submission.published import PublishedMarker
from taskyard_common.messages import RoutingDecision, RoutingMethod
from taskyard_common.store import NewTask, PostgresTaskStore, Step, TaskRecord
from taskyard_common.store.rate_limits import RateLimitStore
from tests.integration.api.conftest import MakeSettings, created, serve
from tests.support.polling import eventually


async def test_mark_published_many_marks_only_unpublished_rows(store: PostgresTaskStore):
    first, second, third = [await created(store) for _ in range(3)]
    await store.mark_published(first.id)
    before = (await store.get(first.id)).published_at
    assert await store.mark_published_many([first.id, second.id, uuid.uuid4()]) == 1
    assert (await store.get(first.id)).published_at == before  # never moved
    assert (await store.get(second.id)).published_at is not None
    assert (await store.get(third.id)).published_at is None


async def test_marking_never_deadlocks_with_a_workers_checkpoints(store: PostgresTaskStore):
    # A batch marked published while its tasks already run: the worker's checkpoint batches lock the same
    # rows in id order, and so must the marker (in scan order the two deadlocked).
    decision = RoutingDecision(
        method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1.0
    )
    tasks = [await created(store) for _ in range(8)]
    for task in tasks:
        assert await store.route(task.id, decision)
        assert (await store.start(task.id, owner="w", lease_seconds=30, attempt=1)).record is not None
    ids = [t.id for t in tasks]

    def step(task_id: uuid.UUID, n: int) -> Step:
        return Step(task_id=task_id, step=n, message={"role": "assistant", "content": f"answer {n}"})

    checkpoints = [store.record_steps([step(i, n) for i in ids], owner="w") for n in range(1, 16)]
    marks = [store.mark_published_many(ids[::-1] if n % 2 else ids) for n in range(15)]
    outcomes = await asyncio.gather(*checkpoints, *marks)
    assert all(held == set(ids) for held in outcomes[: len(checkpoints)])
    assert sum(outcomes[len(checkpoints) :]) == len(ids)  # each task marked once
    assert [len(await store.steps(i)) for i in ids] == [15] * len(ids)


async def test_the_marker_batches_and_flushes_what_is_left_when_closed(store: PostgresTaskStore):
    tasks = [await created(store) for _ in range(5)]
    # A flush interval far beyond the test: only close() can mark them.
    marker = PublishedMarker(store, flush_interval=3600)
    marker.start()
    for task in tasks:
        marker.mark(task.id)
    assert marker.pending == 5
    await marker.close()
    assert marker.pending == 0
    records = [await store.get(t.id) for t in tasks]
    assert all(r is not None and r.published_at is not None for r in records)


async def test_submissions_are_marked_soon_after_their_202(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    async with serve(make_settings(published_flush_seconds=0.02)) as client:
        responses = [await client.post("/v1/tasks", json={"input": f"task {n}"}) for n in range(10)]
        assert all(r.status_code == 202 for r in responses)
        ids = [uuid.UUID(r.json()["id"]) for r in responses]

        async def all_marked() -> bool:
            records = [await store.get(i) for i in ids]
            return all(r is not None and r.published_at is not None for r in records)

        await eventually(all_marked, timeout=5, what="every submission to be marked published")


async def test_what_shutdown_leaves_queued_is_marked_before_the_store_closes(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    # No flush while serving: the lifespan's shutdown must flush.
    async with serve(make_settings(published_flush_seconds=5)) as client:
        response = await client.post("/v1/tasks", json={"input": "last one"})
        assert response.status_code == 202
        task_id = uuid.UUID(response.json()["id"])
    assert (await store.get(task_id)).published_at is not None


async def test_take_up_to_grants_what_the_bucket_holds(store: PostgresTaskStore):
    limits = RateLimitStore(store.pool)
    # The first take creates the bucket (one token of ten), then batches take what is left.
    first = await limits.take_up_to("acme", 4, per_second=0.01, burst=10)
    assert first.granted == 1 and first.tokens == pytest.approx(9, abs=0.01)
    batch = await limits.take_up_to("acme", 4, per_second=0.01, burst=10)
    assert batch.granted == 4 and batch.tokens == pytest.approx(5, abs=0.01)
    rest = await limits.take_up_to("acme", 100, per_second=0.01, burst=10)
    assert rest.granted == 5 and rest.tokens < 1
    empty = await limits.take_up_to("acme", 3, per_second=0.01, burst=10)
    assert empty.granted == 0 and empty.tokens < 1
    # The one-token take agrees with the batches: nothing left.
    assert not (await limits.take("acme", per_second=0.01, burst=10)).allowed


async def test_concurrent_submissions_are_stored_together_each_as_sent(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    async with serve(make_settings()) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    "/v1/tasks", json={"input": {"n": n}, "metadata": {"n": str(n)}, "timeout_seconds": n + 1}
                )
                for n in range(30)
            )
        )
    for n, response in enumerate(responses):
        assert response.status_code == 202, response.text
        record = await store.get(uuid.UUID(response.json()["id"]))
        assert record is not None and record.input == {"n": n} and record.metadata == {"n": str(n)}
        assert record.timeout_seconds == n + 1 and record.tenant == "default"


async def test_a_batch_with_a_bad_row_fails_only_that_row(store: PostgresTaskStore):
    inserter = TaskInserter(store, parallel=1)
    first, second = (
        NewTask(id=uuid.uuid4(), input="a", metadata={}),
        NewTask(id=uuid.uuid4(), input="b", metadata={}),
    )
    clash = NewTask(id=first.id, input="same id", metadata={})
    results = await asyncio.gather(
        inserter.create(first), inserter.create(clash), inserter.create(second), return_exceptions=True
    )
    await inserter.close()
    assert isinstance(results[0], TaskRecord) and results[0].input == "a"
    assert isinstance(results[1], asyncpg.UniqueViolationError)
    assert isinstance(results[2], TaskRecord) and results[2].input == "b"
    many = await store.create_many([NewTask(id=uuid.uuid4(), input={"k": k}, metadata={}) for k in range(3)])
    assert [r.input for r in many] == [{"k": 0}, {"k": 1}, {"k": 2}]


async def test_a_request_right_after_a_batch_finishes_is_not_stranded(store: PostgresTaskStore):
    # The drain counts itself out before its task is done: a request arriving in between starts another.
    inserter = TaskInserter(store, parallel=1)
    for n in range(20):
        task = NewTask(id=uuid.uuid4(), input=f"task {n}", metadata={})
        record = await asyncio.wait_for(inserter.create(task), timeout=5)
        assert record.id == task.id
    await inserter.close()

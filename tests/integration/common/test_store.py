"""The PostgreSQL task store: conditional transitions, pagination and migrations, on a real database."""

import uuid

import asyncpg
import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, StartOutcome
from taskyard_common.store.migrate import migrate, migration_files
from taskyard_common.task_errors import TaskErrorType, task_error

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.4)


def new_task(**kwargs):
    return NewTask(id=uuid.uuid4(), input=kwargs.pop("input", "hello"), metadata={"k": "v"}, **kwargs)


async def test_full_lifecycle(store):
    created = await store.create(new_task(input={"doc": "text"}))
    assert created.status is TaskStatus.PENDING and created.input == {"doc": "text"}
    await store.mark_published(created.id)
    assert await store.route(created.id, DECISION)
    assert not await store.route(created.id, DECISION), "routing twice must not apply"
    started = await store.start(created.id, owner="w1", lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED
    running = started.record
    assert running.status is TaskStatus.RUNNING and running.attempts == 1 and running.lease_owner == "w1"
    usage = Usage(prompt_tokens=3, completion_tokens=4, total_tokens=7)
    assert not await store.complete(created.id, {"output": "x"}, usage, owner="w2"), "not the lease owner"
    assert await store.complete(created.id, {"output": "done"}, usage, owner="w1")
    assert not await store.complete(created.id, {"output": "again"}, usage, owner="w1"), "exactly once"
    again = await store.start(created.id, owner="w1", lease_seconds=30, attempt=1)
    assert again.outcome is StartOutcome.FINISHED, "a completed task is never started again"
    done = await store.get(created.id)
    assert done.status is TaskStatus.COMPLETED and done.result == {"output": "done"}
    assert done.usage == usage and done.routing == DECISION
    assert done.created_at <= done.routed_at <= done.started_at <= done.finished_at


async def test_fail_from_pending_and_not_after_terminal(store):
    task = await store.create(new_task())
    error = task_error(TaskErrorType.UNKNOWN_SPECIALIST, "no such specialist")
    assert await store.fail(task.id, error, Usage())
    assert not await store.fail(task.id, task_error(TaskErrorType.AGENT_ERROR, "again"), Usage())
    assert (await store.get(task.id)).error == error


async def test_discard_only_unpublished(store):
    kept = await store.create(new_task())
    await store.mark_published(kept.id)
    assert not await store.discard_unpublished(kept.id)
    dropped = await store.create(new_task())
    assert await store.discard_unpublished(dropped.id)
    assert await store.get(dropped.id) is None


async def test_keyset_pagination_newest_first(store):
    ids = [(await store.create(new_task())).id for _ in range(7)]
    seen, after = [], None
    while True:
        page = await store.list(status=None, specialist=None, limit=3, after=after)
        if not page:
            break
        seen.extend(t.id for t in page)
        after = (page[-1].created_at, page[-1].id)
    assert seen == list(reversed(ids))


async def test_list_filters(store):
    routed = await store.create(new_task())
    await store.route(routed.id, DECISION)
    await store.create(new_task())
    queued = await store.list(status=TaskStatus.QUEUED, specialist=None, limit=10, after=None)
    assert [t.id for t in queued] == [routed.id]
    general = await store.list(status=None, specialist="general", limit=10, after=None)
    assert [t.id for t in general] == [routed.id]


async def test_migrations_are_idempotent(database_url, db_settings):
    conn = await asyncpg.connect(database_url)
    try:
        assert await migrate(conn, db_settings.db_schema) == []
        versions = await conn.fetch(f'SELECT version FROM "{db_settings.db_schema}".schema_migrations')
        assert sorted(r["version"] for r in versions) == [v for v, _, _ in migration_files()]
    finally:
        await conn.close()


async def test_oldest_waiting_per_queue(store):
    empty = await store.oldest_waiting()
    assert empty.pending_seconds is None and empty.queued_seconds == {}

    async def aged(task_id, seconds: int) -> None:
        # Back-dated rather than waited for: the ages below are then known without any sleep.
        await store.pool.execute(
            "UPDATE tasks SET updated_at = clock_timestamp() - make_interval(secs => $2) WHERE id = $1",
            task_id,
            seconds,
        )

    pending = await store.create(new_task())
    await aged(pending.id, 500)
    summarize = RoutingDecision(method=RoutingMethod.RULES, specialist="summarizer", reason="r", confidence=1)
    older, newer, running, other = [(await store.create(new_task())).id for _ in range(4)]
    for task_id in (older, newer, running):
        assert await store.route(task_id, DECISION)
    assert await store.route(other, summarize)
    await aged(older, 300)
    await aged(newer, 10)
    await aged(other, 50)
    started = await store.start(running, owner="w", lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED
    await aged(running, 10_000)  # running: not waiting, whatever its age

    ages = await store.oldest_waiting()
    assert ages.pending_seconds is not None and 500 <= ages.pending_seconds < 3600
    assert set(ages.queued_seconds) == {"general", "summarizer"}
    assert 300 <= ages.queued_seconds["general"] < 3600, "the oldest of the specialist's queued tasks"
    assert 50 <= ages.queued_seconds["summarizer"] < 300

    # A retrying task waits in its work queue once its delay is over; before that it is in a delay queue.
    await store.pool.execute(
        "UPDATE tasks SET status = 'retrying', lease_owner = NULL, next_attempt_at = clock_timestamp() + "
        "interval '1 hour' WHERE id = $1",
        running,
    )
    assert 300 <= (await store.oldest_waiting()).queued_seconds["general"] < 3600
    await store.pool.execute(
        "UPDATE tasks SET next_attempt_at = clock_timestamp() - interval '2000 seconds' WHERE id = $1",
        running,
    )
    assert 2000 <= (await store.oldest_waiting()).queued_seconds["general"] < 3600

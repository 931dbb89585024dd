"""The sweeper announces submissions that were committed but never published (an API process died in
between); routed tasks whose work message is unconfirmed are the broker agent's (``test_reaper.py``)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from taskyard_common.catalog import Catalog
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import utcnow
from taskyard_common.settings import AmqpSettings
from taskyard_common.store import NewTask, PostgresTaskStore, TaskRecord
from taskyard_common.topology import declare
from tests.integration.api.conftest import (
    Bus,
    IntakeReader,
    MakeSettings,
    assert_problem,
    dead_lettered,
    serve,
)
from tests.support.polling import eventually


async def test_orphaned_rows_are_announced_once(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    intake: Callable[[], Awaitable[IntakeReader]],
):
    # As a crashed API leaves it: committed, pending, never published.
    orphan = await store.create(
        NewTask(
            id=uuid.uuid4(), input={"doc": "text"}, metadata={"k": "v"}, requested_specialist="summarizer"
        )
    )
    assert orphan.published_at is None
    # The grace must outlive a publish (ServiceSettings insists), so both are short here.
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    settings = make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)
    async with serve(settings) as client:
        reader = await intake()
        [(message, raw)] = await reader.take(1)
        assert message.task_id == orphan.id
        assert message.input == {"doc": "text"}
        assert message.metadata == {"k": "v"}
        assert message.requested_specialist == "summarizer"
        assert raw.message_id == str(orphan.id)

        async def marked() -> bool:
            record = await store.get(orphan.id)
            return record is not None and record.published_at is not None

        await eventually(marked, what="the orphan to be marked published")
        # A task submitted normally is announced by its request, and never again by the sweeper.
        submitted = await client.post("/v1/tasks", json={"input": "fresh"})
        assert submitted.status_code == 202
        [(fresh, _)] = await reader.take(1)
        assert str(fresh.task_id) == submitted.json()["id"]

        async def fresh_marked() -> bool:
            # Marked behind its 202, in a batch (published.py), long before the sweeper's grace.
            return await store.unpublished(older_than=orphan.created_at.replace(year=3000), limit=10) == []

        await eventually(fresh_marked, timeout=5, what="the fresh task to be marked published")
        await reader.assert_empty()


async def orphan(store: PostgresTaskStore) -> TaskRecord:
    """A submission as a crashed API leaves it (committed, pending, never published): once the sweeper has
    announced it, a sweep has run past the grace period."""
    return await store.create(NewTask(id=uuid.uuid4(), input="orphan", metadata={}))


async def test_a_replay_whose_publish_failed_is_left_to_the_broker_agent(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    catalog: Catalog,
    bus: Callable[[], Awaitable[Bus]],
):
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    settings = make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)
    async with serve(settings) as client:
        connection = await bus()
        # The specialist's queue vanished (deleted by hand): the replay's publish comes back unroutable.
        await connection.channel.queue_delete(connection.topology.specialist_queue("general"))
        task = await dead_lettered(store, "general")
        response = await client.post(f"/v1/dead-letters/{task.id}/replay")
        body = assert_problem(response, 503, "broker-unavailable")
        assert body["task_status"] == "queued" and "replayed" in body["detail"]
        assert response.headers["retry-after"] == str(amqp.retry_after_seconds)
        assert response.headers["location"] == f"/v1/tasks/{task.id}"
        # The replay stands (retrying it finds no dead letter), only its message is missing.
        assert_problem(await client.post(f"/v1/dead-letters/{task.id}/replay"), 404, "not-found")
        record = await store.get(task.id)
        assert record.status is TaskStatus.QUEUED and record.published_at is None

        # Once the queue is back, a sweep past the grace (proven by an orphan's announcement) leaves the
        # replay alone: publishing it is the broker agent's reaper's duty (``stale_queued``), not the API's.
        await declare(connection.channel, connection.topology, catalog.names, amqp)
        general = await connection.specialist("general")
        pending = await orphan(store)
        [(announced, _)] = await (await connection.intake()).take(1)
        assert announced.task_id == pending.id
        await general.assert_empty()
        assert [t.id for t in await store.stale_queued(older_than=utcnow(), limit=10)] == [task.id]


async def test_replays_committed_by_a_crashed_api_are_announced_when_never_routed(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    bus: Callable[[], Awaitable[Bus]],
):
    # As an API process leaves them when it dies between committing the replays and publishing them.
    routed = await dead_lettered(store, "summarizer")
    deadline = utcnow().replace(year=2100)
    unrouted = await dead_lettered(store, None, reason="rejected", deadline=deadline, timeout_seconds=42.5)
    for task in (routed, unrouted):
        assert await store.replay(task.id, None) is not None
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    async with serve(make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)):
        connection = await bus()
        # The never-routed one goes to intake, with its limits; the routed one is the reaper's.
        [(intake, _)] = await (await connection.intake()).take(1)
        assert intake.task_id == unrouted.id
        assert (intake.deadline, intake.timeout_seconds) == (deadline, 42.5)
        await (await connection.specialist("summarizer")).assert_empty()
        assert (await store.get(routed.id)).published_at is None


async def test_an_orphaned_scheduled_row_is_announced_with_its_not_before(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    intake: Callable[[], Awaitable[IntakeReader]],
):
    # Committed scheduled and never published: by an API that died, or by a broker agent's scheduler (the
    # sweeper announces whoever created the row); the broker agent parks the message until it is due.
    not_before = utcnow().replace(microsecond=0).replace(year=utcnow().year + 1, month=1, day=1)
    orphan = await store.create(NewTask(id=uuid.uuid4(), input="later", metadata={}, not_before=not_before))
    assert (orphan.status, orphan.published_at) == (TaskStatus.SCHEDULED, None)
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    settings = make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)
    async with serve(settings):
        reader = await intake()
        [(message, _)] = await reader.take(1)
        assert (message.task_id, message.not_before) == (orphan.id, not_before)

        async def marked() -> bool:
            record = await store.get(orphan.id)
            return record is not None and record.published_at is not None

        await eventually(marked, what="the scheduled orphan to be marked published")
        await reader.assert_empty()


async def test_the_grace_is_measured_by_the_database_clock_and_bad_rows_never_fill_the_batch(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    intake: Callable[[], Awaitable[IntakeReader]],
    monkeypatch,
):
    """Two ways an orphan used to wait forever: an API host whose clock runs behind the database's (the
    cut-off was the host's time minus the grace, compared with updated_at written by the database), and a
    batch filled by rows that can never be announced, re-selected every round."""
    from taskyard_api.submission import sweeper

    # The host's clock far behind the database's: a cut-off from it would be older than every row.
    behind = utcnow().replace(year=2000)
    monkeypatch.setattr(sweeper, "utcnow", lambda: behind, raising=False)
    monkeypatch.setattr(sweeper, "BATCH_SIZE", 2)
    bad = [await store.create(NewTask(id=uuid.uuid4(), input="bad", metadata={})) for _ in range(2)]
    for task in bad:  # written by something else than the API: no intake message can carry it
        await store.pool.execute(
            "UPDATE tasks SET requested_specialist = 'Not A Name' WHERE id = $1", task.id
        )
    good = await store.create(NewTask(id=uuid.uuid4(), input="good", metadata={}))
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    async with serve(make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)):
        reader = await intake()
        [(message, _)] = await reader.take(1)
        assert message.task_id == good.id
        await reader.assert_empty()

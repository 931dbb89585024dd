"""The sweeper announces tasks that were committed but never published (an API process died in between)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from taskyard_common.catalog import Catalog
from taskyard_common.messages import TaskStatus, utcnow
from taskyard_common.settings import AmqpSettings
from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.topology import declare
from tests.integration.api.conftest import (
    Bus,
    IntakeReader,
    MakeSettings,
    assert_problem,
    dead_lettered,
    queued,
    serve,
)
from tests.support.processes import eventually


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
        assert await store.unpublished(older_than=orphan.created_at.replace(year=3000), limit=10) == []
        await reader.assert_empty()


async def test_a_replay_whose_publish_failed_is_published_by_the_sweeper(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    catalog: Catalog,
    bus: Callable[[], Awaitable[Bus]],
):
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    settings = make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)
    # Waiting in a queue, announced long ago: the sweeper must never publish it again.
    waiting = await queued(store, "general")
    await store.mark_published(waiting.id)
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

        # Once the queue is back, the sweeper publishes it: exactly once, and only it.
        await declare(connection.channel, connection.topology, catalog.names, amqp)
        general = await connection.specialist("general")
        [(message, _)] = await general.take(1)
        assert message.task_id == task.id and message.specialist == "general" and message.attempt == 1

        async def marked() -> bool:
            return (await store.get(task.id)).published_at is not None

        await eventually(marked, what="the replayed task to be marked published")
        assert await store.stale_queued(older_than=utcnow().replace(year=3000), limit=10) == []
        await general.assert_empty()


async def test_replays_committed_by_a_crashed_api_are_published(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    bus: Callable[[], Awaitable[Bus]],
):
    # As an API process leaves them when it dies between committing the replays and publishing them.
    routed = await dead_lettered(store, "summarizer")
    unrouted = await dead_lettered(store, None, reason="rejected")
    deadline = utcnow().replace(year=2100)
    with_limits = await dead_lettered(store, "general", deadline=deadline, timeout_seconds=42.5)
    for task in (routed, unrouted, with_limits):
        assert await store.replay_dead_letter(task.id, None) is not None
    amqp = amqp_settings.model_copy(update={"publish_timeout_seconds": 0.5})
    async with serve(make_settings(amqp=amqp, sweeper_interval_seconds=0.1, sweeper_grace_seconds=0.6)):
        connection = await bus()
        [(work, _)] = await (await connection.specialist("summarizer")).take(1)
        assert work.task_id == routed.id and work.routing == routed.routing
        [(intake, _)] = await (await connection.intake()).take(1)
        assert intake.task_id == unrouted.id
        [(limited, _)] = await (await connection.specialist("general")).take(1)
        assert limited.task_id == with_limits.id
        assert (limited.deadline, limited.timeout_seconds) == (deadline, 42.5)

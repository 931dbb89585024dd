"""The sweeper announces tasks that were committed but never published (an API process died in between)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

from taskyard_common.settings import AmqpSettings
from taskyard_common.store import NewTask, PostgresTaskStore
from tests.integration.api.conftest import IntakeReader, MakeSettings, serve
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

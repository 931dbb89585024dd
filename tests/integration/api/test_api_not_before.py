"""Submitting a task with a not_before: scheduled until then, announced at once (its message waits in the
delay queues, not the API), cancellable at once, and past times simply run now."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta

import httpx

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store import NewTask, PostgresTaskStore
from tests.integration.api.conftest import IntakeReader


def rfc3339(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


async def test_a_task_with_a_not_before_ahead_is_scheduled_and_announced(
    client: httpx.AsyncClient, store: PostgresTaskStore, intake: Callable[[], Awaitable[IntakeReader]]
):
    reader = await intake()
    not_before = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    response = await client.post(
        "/v1/tasks", json={"input": "Summarize this later.", "not_before": rfc3339(not_before)}
    )
    assert response.status_code == 202, response.text
    doc = response.json()
    assert doc["status"] == "scheduled"
    assert datetime.fromisoformat(doc["not_before"]) == not_before
    task_id = uuid.UUID(doc["id"])
    # Announced like any submission: the broker agent parks the message, nothing waits in the API.
    [(message, _)] = await reader.take(1)
    assert (message.task_id, message.not_before) == (task_id, not_before)
    await reader.assert_empty()
    # Listed and filterable by its status; its accepted event says until when it waits.
    page = (await client.get("/v1/tasks", params={"status": "scheduled"})).json()
    assert [item["id"] for item in page["items"]] == [str(task_id)]
    events = (await client.get(f"/v1/tasks/{task_id}/events")).json()["items"]
    assert events[0]["type"] == "accepted"
    assert datetime.fromisoformat(events[0]["data"]["not_before"]) == not_before


async def test_a_scheduled_task_is_cancelled_at_once(client: httpx.AsyncClient, store: PostgresTaskStore):
    not_before = datetime.now(UTC) + timedelta(minutes=10)
    doc = (await client.post("/v1/tasks", json={"input": "later", "not_before": rfc3339(not_before)})).json()
    assert doc["status"] == "scheduled"

    response = await client.post(f"/v1/tasks/{doc['id']}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    assert (await store.get(uuid.UUID(doc["id"]))).status is TaskStatus.CANCELLED


async def test_a_not_before_already_past_runs_now(client: httpx.AsyncClient):
    past = datetime.now(UTC) - timedelta(minutes=5)
    doc = (await client.post("/v1/tasks", json={"input": "now", "not_before": rfc3339(past)})).json()
    assert doc["status"] == "pending"
    events = (await client.get(f"/v1/tasks/{doc['id']}/events")).json()["items"]
    assert "not_before" in events[0]["data"]


async def test_a_scheduled_task_dead_lettered_before_routing_is_replayed_scheduled(
    client: httpx.AsyncClient, store: PostgresTaskStore, intake: Callable[[], Awaitable[IntakeReader]]
):
    reader = await intake()
    not_before = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    task = await store.create(NewTask(id=uuid.uuid4(), input="later", metadata={}, not_before=not_before))
    assert await store.dead_letter(
        task.id,
        reason="delivery_limit",
        queue="p.intake",
        deaths=[{"reason": "delivery_limit", "queue": "p.intake", "count": 3}],
        message={"task_id": str(task.id)},
        specialist=None,
    )
    response = await client.post(f"/v1/dead-letters/{task.id}/replay")
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "scheduled"
    # Back to the broker agent, which parks it until its not_before.
    [(message, _)] = await reader.take(1)
    assert (message.task_id, message.not_before) == (task.id, not_before)

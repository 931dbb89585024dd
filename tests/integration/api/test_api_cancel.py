"""Cancelling tasks: at once before they run, by asking their worker while they run, never once finished."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import httpx

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage
from taskyard_common.store import PostgresTaskStore
from taskyard_common.task_errors import TaskErrorType, task_error
from tests.integration.api.conftest import Bus, assert_problem, created, queued, running


async def test_a_task_that_has_not_started_is_cancelled_at_once(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    control = await (await bus()).control()
    pending = await created(store)
    waiting = await queued(store)
    retrying = await running(store)
    assert await store.schedule_retry(
        retrying.id,
        "w",
        entry={"attempt": 1, "error": "LLM answered HTTP 503", "delay_seconds": 5, "charged": True},
        next_attempt_at=retrying.updated_at.replace(year=2100),
        usage=Usage(),
    )

    answers = {}
    for task in (pending, waiting, retrying):
        response = await client.post(f"/v1/tasks/{task.id}/cancel")
        answers[task.id] = response.json()
        assert response.status_code == 200, response.text
        doc = response.json()
        assert doc["id"] == str(task.id)
        assert doc["status"] == "cancelled"
        assert doc["cancel_requested_at"] is not None and doc["finished_at"] is not None
        assert doc["next_attempt_at"] is None
        assert (await store.get(task.id)).status is TaskStatus.CANCELLED

    # Cancelling again is idempotent: the same answer, nothing moves.
    again = await client.post(f"/v1/tasks/{pending.id}/cancel")
    assert again.status_code == 200
    assert again.json() == answers[pending.id]
    history = (await client.get(f"/v1/tasks/{retrying.id}")).json()["attempt_history"]
    assert [entry["error"] for entry in history] == ["LLM answered HTTP 503"]
    # Nothing was running: no worker needed telling.
    await control.assert_empty()


async def test_a_running_task_is_asked_to_stop(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    control = await (await bus()).control()
    task = await running(store)

    response = await client.post(f"/v1/tasks/{task.id}/cancel")
    assert response.status_code == 202, response.text
    doc = response.json()
    assert doc["status"] == "running" and doc["cancel_requested_at"] is not None
    [(message, raw)] = await control.take(1)
    assert message.task_id == task.id and message.kind == "cancel"
    assert raw.message_id == str(task.id) and raw.type == "cancel"

    # Asking again while it still runs is accepted again (and broadcast again: harmless).
    again = await client.post(f"/v1/tasks/{task.id}/cancel")
    assert again.status_code == 202
    assert again.json()["cancel_requested_at"] == doc["cancel_requested_at"]
    await control.take(1)

    # Its worker sees the request on its heartbeat too, stops it and records it cancelled.
    held, cancel = await store.heartbeat("w", [task.id], 30)
    assert held == cancel == {task.id}
    assert await store.cancel_running(task.id, "w", Usage())
    finished = await client.post(f"/v1/tasks/{task.id}/cancel")
    assert finished.status_code == 200 and finished.json()["status"] == "cancelled"
    await control.assert_empty()


async def test_cancel_with_no_worker_listening_is_still_accepted(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    # No queue is bound to the control fanout: the broker returns the message. The heartbeat still sees it.
    task = await running(store)
    response = await client.post(f"/v1/tasks/{task.id}/cancel")
    assert response.status_code == 202, response.text
    record = await store.get(task.id)
    assert record.status is TaskStatus.RUNNING and record.cancel_requested_at is not None


async def test_a_finished_task_cannot_be_cancelled(client: httpx.AsyncClient, store: PostgresTaskStore):
    done = await running(store)
    assert await store.complete(done.id, {"answer": 42}, Usage(), owner="w")
    failed = await running(store)
    assert await store.fail(failed.id, task_error(TaskErrorType.PERMANENT_ERROR, "no"), Usage(), owner="w")

    for task, status in ((done, "completed"), (failed, "failed")):
        body = assert_problem(await client.post(f"/v1/tasks/{task.id}/cancel"), 409, "task-already-finished")
        assert body["task_status"] == status
        record = await store.get(task.id)
        assert record.status.value == status and record.cancel_requested_at is None
    result = await client.get(f"/v1/tasks/{done.id}/result")
    assert result.status_code == 200


async def test_cancel_of_unknown_or_malformed_ids_is_not_found(client: httpx.AsyncClient):
    for task_id in (str(uuid.uuid4()), "not-a-uuid", "%20"):
        assert_problem(await client.post(f"/v1/tasks/{task_id}/cancel"), 404, "not-found")
    not_allowed = await client.get(f"/v1/tasks/{uuid.uuid4()}/cancel")
    assert_problem(not_allowed, 405)

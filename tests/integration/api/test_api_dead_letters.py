"""Dead letters: listing with filters and pages, replaying onto the right queue, discarding."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import httpx

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingMethod
from taskyard_common.store import PostgresTaskStore, Step
from tests.integration.api.conftest import Bus, assert_problem, dead_lettered, running


async def test_list_filters_and_pages_most_recent_first(client: httpx.AsyncClient, store: PostgresTaskStore):
    letters = [await dead_lettered(store, "general") for _ in range(3)]
    letters.append(await dead_lettered(store, "summarizer", reason="rejected"))
    letters.append(await dead_lettered(store, None, reason="rejected"))
    recorded = {
        d.task_id: d.recorded_at
        for d in await store.list_dead_letters(specialist=None, reason=None, limit=10, after=None)
    }
    newest_first = sorted(
        (str(t.id) for t in letters), key=lambda i: (recorded[uuid.UUID(i)], i), reverse=True
    )

    seen, pages, cursor = [], 0, None
    while True:
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        response = await client.get("/v1/dead-letters", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        pages += 1
        seen += [item["task_id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3 and seen == newest_first

    first = (await client.get("/v1/dead-letters", params={"limit": 1})).json()["items"][0]
    task_id = first["task_id"]
    assert first["task_status"] == "dead_lettered"
    assert first["links"] == {
        "self": f"/v1/dead-letters/{task_id}",
        "task": f"/v1/tasks/{task_id}",
        "replay": f"/v1/dead-letters/{task_id}/replay",
    }
    assert set(first) == {
        "task_id",
        "specialist",
        "reason",
        "queue",
        "deaths",
        "recorded_at",
        "task_status",
        "links",
    }
    assert (await client.get(f"/v1/dead-letters/{task_id}")).json() == first

    general = (await client.get("/v1/dead-letters", params={"specialist": "general"})).json()
    assert {item["task_id"] for item in general["items"]} == {str(t.id) for t in letters[:3]}
    assert all(
        item["reason"] == "delivery_limit" and item["queue"] == "p.work.general" for item in general["items"]
    )
    rejected = (await client.get("/v1/dead-letters", params={"reason": "rejected"})).json()
    assert {item["task_id"] for item in rejected["items"]} == {str(letters[3].id), str(letters[4].id)}
    both = {"reason": "rejected", "specialist": "summarizer"}
    assert [i["task_id"] for i in (await client.get("/v1/dead-letters", params=both)).json()["items"]] == [
        str(letters[3].id)
    ]
    none = (await client.get("/v1/dead-letters", params={"reason": "expired"})).json()
    assert none == {"items": [], "next_cursor": None}

    # The task document says why it died.
    doc = (await client.get(f"/v1/tasks/{letters[3].id}")).json()
    assert doc["status"] == "dead_lettered"
    assert doc["dead_letter"]["reason"] == "rejected" and doc["dead_letter"]["queue"] == "p.work.summarizer"
    assert doc["dead_letter"]["count"] == 1 and doc["dead_letter"]["at"] is not None
    assert doc["dead_letter"]["deaths"] == [{"reason": "rejected", "queue": "p.work.summarizer", "count": 3}]
    body = assert_problem(await client.get(f"/v1/tasks/{letters[3].id}/result"), 409, "task-not-completed")
    assert body["task_status"] == "dead_lettered"

    for params in ({"reason": "poison"}, {"limit": 0}, {"limit": 201}, {"cursor": "Zm9v"}):
        body = assert_problem(await client.get("/v1/dead-letters", params=params), 422, "validation-error")
        assert body["errors"][0]["loc"][0] == "query"


async def test_replay_publishes_to_the_specialist_queue(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    connection = await bus()
    general, summarizer = await connection.specialist("general"), await connection.specialist("summarizer")
    same = await dead_lettered(store, "general")
    moved = await dead_lettered(store, "general")

    response = await client.post(f"/v1/dead-letters/{same.id}/replay")
    assert response.status_code == 202, response.text
    assert response.headers["location"] == f"/v1/tasks/{same.id}"
    doc = response.json()
    assert doc["status"] == "queued" and doc["attempts"] == 0 and doc["specialist"] == "general"
    assert doc["dead_letter"] is None and doc["started_at"] is None and doc["finished_at"] is None
    assert doc["attempt_history"][-1]["event"] == "replayed"
    [(message, raw)] = await general.take(1)
    assert message.task_id == same.id and message.attempt == 1 and message.specialist == "general"
    assert message.input == same.input and message.routing == same.routing
    assert raw.message_id == str(same.id)

    other = await client.post(f"/v1/dead-letters/{moved.id}/replay", json={"specialist": "summarizer"})
    assert other.status_code == 202, other.text
    assert other.json()["specialist"] == "summarizer" and other.json()["status"] == "queued"
    [(message, _)] = await summarizer.take(1)
    assert message.task_id == moved.id and message.specialist == "summarizer"
    assert message.routing.method is RoutingMethod.EXPLICIT
    for task_id in (same.id, moved.id):
        record = await store.get(task_id)
        assert record.status is TaskStatus.QUEUED and record.attempts == 0
        assert record.published_at is not None, "marked published, so the sweeper leaves it alone"
    await general.assert_empty()
    await summarizer.assert_empty()

    # Replayed once: the dead letter is gone.
    assert_problem(await client.post(f"/v1/dead-letters/{same.id}/replay"), 404, "not-found")
    assert_problem(await client.get(f"/v1/dead-letters/{same.id}"), 404, "not-found")
    assert (await client.get("/v1/dead-letters")).json()["items"] == []


async def test_replay_of_a_task_never_routed_goes_back_to_intake(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    intake = await (await bus()).intake()
    task = await dead_lettered(store, None, reason="rejected")
    response = await client.post(f"/v1/dead-letters/{task.id}/replay", json={})
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "pending" and response.json()["specialist"] is None
    [(message, _)] = await intake.take(1)
    assert message.task_id == task.id and message.input == task.input
    await intake.assert_empty()


async def test_replay_refuses_unknown_tasks_and_specialists(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    general = await (await bus()).specialist("general")
    task = await dead_lettered(store, "general")
    alive = await store.get(task.id)
    for task_id in (str(uuid.uuid4()), "not-a-uuid"):
        assert_problem(await client.post(f"/v1/dead-letters/{task_id}/replay"), 404, "not-found")
    body = assert_problem(
        await client.post(f"/v1/dead-letters/{task.id}/replay", json={"specialist": "poet"}),
        422,
        "unknown-specialist",
    )
    assert "general" in body["known_specialists"]
    for invalid in ({"specialist": ""}, {"specialist": "general", "priority": 1}, [1]):
        response = await client.post(f"/v1/dead-letters/{task.id}/replay", json=invalid)
        assert_problem(response, 422, "validation-error")
    not_json = await client.post(
        f"/v1/dead-letters/{task.id}/replay",
        content=b"specialist=general",
        headers={"content-type": "text/plain"},
    )
    assert_problem(not_json, 415, "unsupported-media-type")
    # None of that touched the dead letter.
    assert await store.get(task.id) == alive
    assert (await client.get(f"/v1/dead-letters/{task.id}")).status_code == 200
    await general.assert_empty()


async def test_discard_closes_the_dead_letter_and_keeps_the_task(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    discarded, kept = await dead_lettered(store, "general"), await dead_lettered(store, "general")
    response = await client.delete(f"/v1/dead-letters/{discarded.id}")
    assert response.status_code == 204 and response.content == b""

    items = (await client.get("/v1/dead-letters")).json()["items"]
    assert [item["task_id"] for item in items] == [str(kept.id)]
    doc = (await client.get(f"/v1/tasks/{discarded.id}")).json()
    assert doc["status"] == "dead_lettered" and doc["dead_letter"]["reason"] == "delivery_limit"
    for path in (
        f"/v1/dead-letters/{discarded.id}",
        f"/v1/dead-letters/{uuid.uuid4()}",
        "/v1/dead-letters/x",
    ):
        assert_problem(await client.delete(path), 404, "not-found")
    assert_problem(await client.post(f"/v1/dead-letters/{discarded.id}/replay"), 404, "not-found")


async def test_a_replay_resumes_from_the_checkpoints_unless_asked_to_start_from_scratch(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    await bus()  # the topology, so the replays can be published
    resumed, restarted = [await running(store, "general") for _ in range(2)]
    for task in (resumed, restarted):
        step = Step(task_id=task.id, step=1, message={"role": "assistant", "content": None, "tool_calls": []})
        assert await store.record_steps([step], owner="w") == {task.id}
        assert await store.dead_letter(
            task.id, reason="rejected", queue="p.work.general", deaths=[], message={}, specialist="general"
        )
    assert (await client.post(f"/v1/dead-letters/{resumed.id}/replay")).status_code == 202
    assert len(await store.steps(resumed.id)) == 1, "kept: the next attempt resumes after them"
    response = await client.post(f"/v1/dead-letters/{restarted.id}/replay", json={"from_scratch": True})
    assert response.status_code == 202, response.text
    assert response.json()["attempt_history"][-1]["from_scratch"] is True
    assert await store.steps(restarted.id) == []
    assert (await store.get(restarted.id)).checkpoint_bytes == 0  # type: ignore[union-attr]
    # A replay that is not a yes or no is refused before anything changes.
    assert_problem(
        await client.post(f"/v1/dead-letters/{uuid.uuid4()}/replay", json={"from_scratch": "maybe"}),
        422,
        "validation-error",
    )

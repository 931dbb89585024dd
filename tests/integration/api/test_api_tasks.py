"""Submitting, reading and listing tasks against a real broker and database."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import httpx

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, PostgresTaskStore, StartOutcome
from taskyard_common.task_errors import TaskErrorType, task_error
from tests.integration.api.conftest import IntakeReader, MakeSettings, assert_problem, serve
from tests.support.polling import eventually


async def test_submit_stores_the_task_and_announces_it_once(
    client: httpx.AsyncClient, store: PostgresTaskStore, intake: Callable[[], Awaitable[IntakeReader]]
):
    reader = await intake()
    first = await client.post("/v1/tasks", json={"input": "Summarize this.", "metadata": {"team": "ops"}})
    second = await client.post(
        "/v1/tasks", json={"input": {"ticket": 7, "text": "charged twice"}, "specialist": "support-analyst"}
    )

    assert first.status_code == 202, first.text
    doc = first.json()
    task_id = uuid.UUID(doc["id"])
    assert first.headers["location"] == f"/v1/tasks/{task_id}"
    assert doc["status"] == "pending"
    assert doc["input"] == "Summarize this."
    assert doc["metadata"] == {"team": "ops"}
    assert doc["routing"] is None and doc["result"] is None and doc["error"] is None
    assert doc["usage"] == {
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cost": 0.0,
        "model": None,
    }
    assert doc["cost"] == 0.0
    assert doc["links"] == {"self": f"/v1/tasks/{task_id}", "result": f"/v1/tasks/{task_id}/result"}

    record = await store.get(task_id)
    assert record is not None and record.status is TaskStatus.PENDING

    async def marked_published() -> bool:
        # Written behind the 202, in batches (published.py), within published_flush_seconds.
        found = await store.get(task_id)
        return found is not None and found.published_at is not None

    await eventually(marked_published, timeout=5, what="the confirmed task to be marked published")

    assert second.status_code == 202, second.text
    messages = {m.task_id: (m, raw) for m, raw in await reader.take(2)}
    await reader.assert_empty()
    message, raw = messages[task_id]
    assert message.input == "Summarize this."
    assert message.metadata == {"team": "ops"}
    assert message.requested_specialist is None
    assert raw.message_id == str(task_id)
    assert raw.content_type == "application/json"
    assert raw.delivery_mode == 2  # persistent
    explicit, _ = messages[uuid.UUID(second.json()["id"])]
    assert explicit.requested_specialist == "support-analyst"
    assert explicit.input == {"ticket": 7, "text": "charged twice"}


async def test_task_document_and_result_follow_the_lifecycle(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    task_id = (await client.post("/v1/tasks", json={"input": "What is 6 * 7?"})).json()["id"]

    doc = (await client.get(f"/v1/tasks/{task_id}")).json()
    assert doc["status"] == "pending" and doc["attempts"] == 0 and doc["started_at"] is None
    body = assert_problem(await client.get(f"/v1/tasks/{task_id}/result"), 409, "task-not-completed")
    assert body["task_status"] == "pending"

    decision = RoutingDecision(
        method=RoutingMethod.RULES, specialist="general", reason="arithmetic", confidence=0.6
    )
    assert await store.route(uuid.UUID(task_id), decision)
    body = assert_problem(await client.get(f"/v1/tasks/{task_id}/result"), 409, "task-not-completed")
    assert body["task_status"] == "queued"
    started = await store.start(uuid.UUID(task_id), owner="w", lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED
    usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    assert await store.complete(uuid.UUID(task_id), {"answer": "42"}, usage, owner="w")

    result = await client.get(f"/v1/tasks/{task_id}/result")
    assert result.status_code == 200
    assert result.json() == {"task_id": task_id, "result": {"answer": "42"}, "usage": usage.model_dump()}
    doc = (await client.get(f"/v1/tasks/{task_id}")).json()
    assert doc["status"] == "completed" and doc["specialist"] == "general" and doc["attempts"] == 1
    assert doc["routing"] == {"method": "rules", "reason": "arithmetic", "confidence": 0.6, "latency_ms": None,
                              "llm_calls": 0, "tokens": 0, "cached": False, "guard": None, "fallback": None, "parts": [],
                              "model": None, "cost": 0.0}  # fmt: skip
    assert doc["result"] == {"answer": "42"} and doc["error"] is None
    assert doc["started_at"] is not None and doc["finished_at"] is not None

    failed = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    await store.route(failed.id, decision)
    await store.start(failed.id, owner="w", lease_seconds=30, attempt=1)
    assert await store.fail(failed.id, task_error(TaskErrorType.AGENT_ERROR, "too slow"), Usage(), owner="w")
    body = assert_problem(await client.get(f"/v1/tasks/{failed.id}/result"), 409, "task-not-completed")
    assert body["task_status"] == "failed"
    assert (await client.get(f"/v1/tasks/{failed.id}")).json()["error"] == {
        "type": "agent_error",
        "message": "too slow",
    }


async def test_unknown_and_malformed_task_ids_are_not_found(client: httpx.AsyncClient):
    for task_id in (str(uuid.uuid4()), "not-a-uuid", "12345", "%20", "%ff", "..%2f..%2fetc"):
        assert_problem(await client.get(f"/v1/tasks/{task_id}"), 404, "not-found")
        assert_problem(await client.get(f"/v1/tasks/{task_id}/result"), 404, "not-found")


async def test_list_pages_newest_first_and_filters(client: httpx.AsyncClient, store: PostgresTaskStore):
    created = [await store.create(NewTask(id=uuid.uuid4(), input=f"task {i}", metadata={})) for i in range(7)]
    for record in created[:3]:
        decision = RoutingDecision(
            method=RoutingMethod.LLM, specialist="summarizer", reason="r", confidence=0.9
        )
        await store.route(record.id, decision)
    newest_first = [str(r.id) for r in sorted(created, key=lambda r: (r.created_at, r.id), reverse=True)]

    seen: list[str] = []
    pages = 0
    cursor = None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        response = await client.get("/v1/tasks", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        pages += 1
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == newest_first

    queued = (await client.get("/v1/tasks", params={"status": "queued"})).json()
    assert sorted(item["id"] for item in queued["items"]) == sorted(str(r.id) for r in created[:3])
    assert queued["next_cursor"] is None
    routed = {str(r.id) for r in created[:3]}
    by_specialist = (await client.get("/v1/tasks", params={"specialist": "summarizer", "limit": 2})).json()
    assert [item["id"] for item in by_specialist["items"]] == [i for i in newest_first if i in routed][:2]
    assert by_specialist["next_cursor"] is not None
    pending = (await client.get("/v1/tasks", params={"status": "pending", "specialist": "summarizer"})).json()
    assert pending == {"items": [], "next_cursor": None, "truncated": False}

    for params in (
        {"cursor": "garbage!"},
        {"cursor": "Zm9v"},
        {"status": "sleeping"},
        {"limit": 0},
        {"limit": 201},
    ):
        body = assert_problem(await client.get("/v1/tasks", params=params), 422, "validation-error")
        assert body["errors"][0]["loc"][0] == "query"


async def test_invalid_submissions_are_422_problems_and_store_nothing(client: httpx.AsyncClient):
    body = assert_problem(
        await client.post("/v1/tasks", json={"input": "hi", "specialist": "poet"}), 422, "unknown-specialist"
    )
    assert "summarizer" in body["known_specialists"]

    invalid_bodies = [
        {"input": ""},
        {"input": "   "},
        {"input": {}},
        {"input": 42},
        {"input": ["a", "list"]},
        {"input": None},
        {},
        {"input": "hi", "priority": "urgent"},  # not one of high, normal, low
        {"input": "hi", "colour": "red"},  # extra field
        {"input": "hi", "not_before": "tomorrow"},
        {"input": "hi", "not_before": "2030-01-01T00:00:00Z", "deadline": "2029-12-31T00:00:00Z"},
        {"input": "hi", "not_before": "2999-01-01T00:00:00Z"},  # too far ahead
        {"input": "hi", "metadata": {"k": 1}},
        {"input": "hi", "metadata": "k=v"},
        {"input": "nul \u0000 char"},
        {"input": {"key": "nul \u0000"}},
    ]
    for invalid in invalid_bodies:
        body = assert_problem(await client.post("/v1/tasks", json=invalid), 422, "validation-error")
        assert body["errors"], invalid
        assert all(error["loc"][0] == "body" for error in body["errors"])

    deep: dict = {"leaf": 1}
    for _ in range(100):
        deep = {"nested": deep}
    raw_bodies = [
        b'{"input": "unterminated',
        b'{"input": NaN}',
        b'{"input": {"x": Infinity}}',
        b'{"input": "lone \\ud800 surrogate"}',
        b"[1, 2, 3]",
        b"",
        httpx.Request("POST", "/", json={"input": deep}).read(),
    ]
    headers = {"content-type": "application/json"}
    for raw in raw_bodies:
        response = await client.post("/v1/tasks", content=raw, headers=headers)
        assert_problem(response, 422, "validation-error")

    # JSON Python itself refuses to read (an integer of more than 4300 digits) is a 400, still no 500.
    huge = await client.post("/v1/tasks", content=b'{"input": {"n": ' + b"9" * 5000 + b"}}", headers=headers)
    assert_problem(huge, 400)

    assert (await client.get("/v1/tasks")).json() == {"items": [], "next_cursor": None, "truncated": False}


async def test_a_list_page_is_bounded_in_bytes_and_pages_on(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    """``limit`` counts items, ``TASKYARD_API_MAX_PAGE_BYTES`` bounds what they weigh: a page of large
    tasks ends early with a cursor, and following the cursors still lists every task once."""
    created = [
        await store.create(NewTask(id=uuid.uuid4(), input=f"{i}" + "x" * 100_000, metadata={}))
        for i in range(5)
    ]
    newest_first = [str(r.id) for r in sorted(created, key=lambda r: (r.created_at, r.id), reverse=True)]
    async with serve(make_settings(max_page_bytes=250_000)) as client:
        first = (await client.get("/v1/tasks", params={"limit": 5})).json()
        assert len(first["items"]) == 2 and first["next_cursor"] is not None
        seen = [item["id"] for item in first["items"]]
        cursor = first["next_cursor"]
        while cursor is not None:
            page = (await client.get("/v1/tasks", params={"limit": 5, "cursor": cursor})).json()
            assert 1 <= len(page["items"]) <= 2
            seen += [item["id"] for item in page["items"]]
            cursor = page["next_cursor"]
        assert seen == newest_first

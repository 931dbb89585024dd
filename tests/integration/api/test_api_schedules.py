"""``/v1/schedules`` against the real database: create, read, list, pause, resume, delete; every refusal a
problem document; roles and tenants as for tasks."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from taskyard_common.store.schedule_records import NewSchedule, TaskTemplate
from taskyard_common.store.schedules import ScheduleStore
from tests.integration.api.conftest import MakeSettings, assert_problem, serve

TASK = {"input": "Summarize the support queue.", "specialist": "summarizer", "metadata": {"team": "ops"}}


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_create_read_and_list(client: httpx.AsyncClient):
    before = datetime.now(UTC)
    response = await client.post(
        "/v1/schedules", json={"cron": "*/5 * * * *", "task": TASK, "metadata": {"owner": "ops"}}
    )
    assert response.status_code == 201, response.text
    doc = response.json()
    assert response.headers["location"] == f"/v1/schedules/{doc['id']}"
    assert (doc["cron"], doc["timezone"], doc["overlap"], doc["paused"]) == (
        "*/5 * * * *",
        "UTC",
        "skip",
        False,
    )
    assert doc["metadata"] == {"owner": "ops"}
    assert doc["task"]["input"] == TASK["input"] and doc["task"]["specialist"] == "summarizer"
    assert doc["task"]["priority"] == "normal" and "not_before" not in doc["task"]
    assert (doc["last_run_at"], doc["last_task_id"], doc["last_outcome"]) == (None, None, None)
    next_run_at = parse(doc["next_run_at"])
    assert before < next_run_at <= before + timedelta(minutes=5)
    assert next_run_at.minute % 5 == 0 and next_run_at.second == 0
    assert doc["links"] == {"self": f"/v1/schedules/{doc['id']}", "last_task": None}

    assert (await client.get(f"/v1/schedules/{doc['id']}")).json() == doc
    other = (await client.post("/v1/schedules", json={"cron": "0 9 * * 1", "timezone": "Europe/Berlin",
                                                       "task": {"input": "weekly"}, "overlap": "allow"})).json()  # fmt: skip
    assert other["timezone"] == "Europe/Berlin" and other["overlap"] == "allow"
    # 09:00 in Berlin is 07:00 or 08:00 UTC, on a Monday.
    monday = parse(other["next_run_at"])
    assert monday.weekday() == 0 and monday.hour in (7, 8)

    first = (await client.get("/v1/schedules", params={"limit": 1})).json()
    assert [s["id"] for s in first["items"]] == [other["id"]] and first["next_cursor"]
    second = (await client.get("/v1/schedules", params={"limit": 1, "cursor": first["next_cursor"]})).json()
    assert [s["id"] for s in second["items"]] == [doc["id"]] and second["next_cursor"] is None


async def test_pause_resume_delete(client: httpx.AsyncClient):
    doc = (await client.post("/v1/schedules", json={"cron": "* * * * *", "task": TASK})).json()
    path = f"/v1/schedules/{doc['id']}"
    paused = await client.post(f"{path}/pause")
    assert paused.status_code == 200, paused.text
    assert paused.json()["paused"] is True and paused.json()["next_run_at"] is None
    assert (await client.post(f"{path}/pause")).json()["paused"] is True  # idempotent

    resumed = (await client.post(f"{path}/resume")).json()
    assert resumed["paused"] is False
    # From the next occurrence after now: those that fell while paused are not run.
    assert parse(resumed["next_run_at"]) > datetime.now(UTC) - timedelta(seconds=1)
    assert (await client.post(f"{path}/resume")).json()["next_run_at"] == resumed["next_run_at"]

    deleted = await client.delete(path)
    assert deleted.status_code == 204 and deleted.content == b""
    for method, suffix in (("GET", ""), ("POST", "/pause"), ("POST", "/resume"), ("DELETE", "")):
        assert_problem(await client.request(method, f"{path}{suffix}"), 404, "not-found")
    assert_problem(await client.get("/v1/schedules/not-a-uuid"), 404, "not-found")


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"cron": "* * * *", "task": TASK}, ["body", "cron"]),
        ({"cron": "*/15 * * * * *", "task": TASK}, ["body", "cron"]),  # no seconds field
        ({"cron": "61 * * * *", "task": TASK}, ["body", "cron"]),
        ({"cron": "@hourly", "task": TASK}, ["body", "cron"]),
        ({"cron": "", "task": TASK}, ["body", "cron"]),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus", "task": TASK}, ["body", "timezone"]),
        ({"cron": "* * * * *", "timezone": "../../etc/passwd", "task": TASK}, ["body", "timezone"]),
        ({"cron": "* * * * *", "task": {**TASK, "not_before": "2030-01-01T00:00:00Z"}}, ["body", "task"]),
        ({"cron": "* * * * *", "task": {**TASK, "deadline": "2030-01-01T00:00:00Z"}}, ["body", "task"]),
        ({"cron": "* * * * *", "task": {"input": "x", "metadata": {"schedule_id": "x"}}}, ["body", "task"]),
        ({"cron": "* * * * *", "task": {"input": ""}}, ["body", "task", "input"]),
        ({"cron": "* * * * *", "task": {"input": "x", "colour": "red"}}, ["body", "task", "colour"]),
        ({"cron": "* * * * *", "task": {"input": "x", "timeout_seconds": 10**9}}, ["body", "task", "timeout_seconds"]),
        ({"cron": "* * * * *", "task": {"input": "x", "webhook": {"url": "http://127.0.0.1/h"}}}, ["body", "task", "webhook", "url"]),
        ({"cron": "* * * * *", "task": TASK, "overlap": "queue"}, ["body", "overlap"]),
        ({"cron": "* * * * *"}, ["body", "task"]),
        ({"cron": "* * * * *", "task": TASK, "every": "minute"}, ["body", "every"]),
    ],
)  # fmt: skip
async def test_invalid_schedules_are_422_problems_and_store_nothing(client: httpx.AsyncClient, body, loc):
    problem = assert_problem(await client.post("/v1/schedules", json=body), 422, "validation-error")
    assert problem["errors"][0]["loc"][: len(loc)] == loc, problem
    assert (await client.get("/v1/schedules")).json()["items"] == []


async def test_other_refusals_are_problems_too(client: httpx.AsyncClient):
    body = {"cron": "* * * * *", "task": {"input": "x", "specialist": "astrologer"}}
    unknown = assert_problem(await client.post("/v1/schedules", json=body), 422, "unknown-specialist")
    assert "summarizer" in unknown["known_specialists"]
    assert_problem(
        await client.post("/v1/schedules", content=b"cron=*", headers={"content-type": "text/plain"}),
        415,
        "unsupported-media-type",
    )
    assert_problem(await client.get("/v1/schedules", params={"cursor": "nope"}), 422, "validation-error")
    assert_problem(await client.get("/v1/schedules", params={"limit": 0}), 422, "validation-error")


@pytest.fixture
async def keys(db_settings: DbSettings) -> AsyncIterator[KeyStore]:
    store = await KeyStore.open(db_settings)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def bearer(keys: KeyStore) -> Callable[..., Awaitable[dict[str, str]]]:
    async def make(tenant: str = "acme", role: Role = Role.SUBMITTER) -> dict[str, str]:
        _, key = await keys.create(tenant=tenant, role=role, name="test")
        return {"Authorization": f"Bearer {key}"}

    return make


async def test_roles_and_tenants(make_settings: MakeSettings, bearer, store: PostgresTaskStore):
    theirs = await ScheduleStore(store.pool).create(
        NewSchedule(
            id=uuid.uuid4(),
            tenant="globex",
            cron="* * * * *",
            timezone="UTC",
            task=TaskTemplate(input="x"),
            next_run_at=datetime.now(UTC),
        )
    )
    async with serve(make_settings(auth_enabled=True)) as api:
        submitter, reader = await bearer("acme"), await bearer("acme", Role.READER)
        created = await api.post("/v1/schedules", json={"cron": "* * * * *", "task": TASK}, headers=submitter)
        assert created.status_code == 201, created.text
        path = f"/v1/schedules/{created.json()['id']}"
        # A reader reads, and may change nothing.
        assert (await api.get(path, headers=reader)).status_code == 200
        assert (await api.get("/v1/schedules", headers=reader)).status_code == 200
        assert_problem(
            await api.post("/v1/schedules", json={"cron": "* * * * *", "task": TASK}, headers=reader),
            403,
            "forbidden",
        )
        for method, suffix in (("POST", "/pause"), ("POST", "/resume"), ("DELETE", "")):
            assert_problem(await api.request(method, f"{path}{suffix}", headers=reader), 403, "forbidden")
        # Another tenant's schedule does not exist for this key, whatever the route.
        other = f"/v1/schedules/{theirs.id}"
        for method, suffix in (("GET", ""), ("POST", "/pause"), ("POST", "/resume"), ("DELETE", "")):
            assert_problem(await api.request(method, f"{other}{suffix}", headers=submitter), 404, "not-found")
        listed = (await api.get("/v1/schedules", headers=submitter)).json()["items"]
        assert [s["id"] for s in listed] == [created.json()["id"]]
    assert (await ScheduleStore(store.pool).get(theirs.id, "globex")) == theirs

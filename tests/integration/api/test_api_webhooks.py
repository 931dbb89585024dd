"""Webhooks in the API: a submission's ``webhook`` (validated, address rules at submission), the task
document showing it, and the routes over a task's deliveries (list with attempts, redeliver, tenancy)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from taskyard_common.messages import Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from taskyard_common.webhooks import WebhookSettings
from tests.integration.api.conftest import MakeSettings, assert_problem, running, serve

pytestmark = pytest.mark.integration

ALL_EVENTS = ["completed", "failed", "cancelled", "dead_lettered"]


async def submit(client: httpx.AsyncClient, webhook: object, **headers: str) -> httpx.Response:
    return await client.post("/v1/tasks", json={"input": "do it", "webhook": webhook}, headers=headers)


async def test_a_submission_stores_its_webhook_and_the_task_document_shows_it(client, store):
    answer = await submit(
        client, {"url": "https://hooks.example.com/t?k=1", "events": ["failed", "completed", "failed"]}
    )
    assert answer.status_code == 202, answer.text
    shown = {"url": "https://hooks.example.com/t?k=1", "events": ["completed", "failed"]}
    assert answer.json()["webhook"] == shown, "events once each, in lifecycle order"
    task_id = uuid.UUID(answer.json()["id"])
    assert (await client.get(f"/v1/tasks/{task_id}")).json()["webhook"] == shown
    assert (await store.get(task_id)).webhook == shown
    default = await submit(client, {"url": "http://hooks.example.com/"})
    assert default.json()["webhook"]["events"] == ALL_EVENTS
    plain = await client.post("/v1/tasks", json={"input": "no hook"})
    assert plain.json()["webhook"] is None


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.1/hook",
        "https://10.200.3.4:8443/hook",
        "http://127.0.0.1:9000/hook",
        "http://[::1]/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[fc00::1]/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://167772161/hook",  # 10.0.0.1 as one number
        "http://0.0.0.0/hook",
    ],
)
async def test_a_private_or_loopback_address_is_refused_with_422_under_the_default_settings(
    client, store, url
):
    body = assert_problem(await submit(client, {"url": url}), 422, "validation-error")
    assert body["errors"][0]["loc"] == ["body", "webhook", "url"]
    assert body["errors"][0]["type"] == "webhook_address_refused"
    assert await store.list(status=None, specialist=None, limit=5, after=None) == [], "nothing stored"


@pytest.mark.parametrize(
    "webhook",
    [
        {"url": "ftp://hooks.example.com/x"},
        {"url": "https://user:secret@hooks.example.com/x"},
        {"url": "https:///no-host"},
        {"url": "hooks.example.com/x"},
        {"url": "https://hooks.example.com:99999/x"},
        {"url": "https://hooks.example.com/a b"},
        {"url": "https://hooks.exämple.com/x"},
        {"url": "https://hooks.example.com/" + "x" * 2048},
        {"url": "https://hooks.example.com/x", "events": []},
        {"url": "https://hooks.example.com/x", "events": ["running"]},
        {"url": "https://hooks.example.com/x", "secret": "mine"},
        {"events": ["completed"]},
        "https://hooks.example.com/x",
    ],
)
async def test_an_invalid_webhook_is_refused(client, webhook):
    body = assert_problem(await submit(client, webhook), 422, "validation-error")
    assert body["errors"][0]["loc"][:2] == ["body", "webhook"]


async def test_each_switch_opens_its_own_kind_of_address(make_settings: MakeSettings):
    settings = make_settings(webhook=WebhookSettings(allow_loopback=True, allow_private=False))
    async with serve(settings) as api:
        assert (await submit(api, {"url": "http://127.0.0.1:8080/hook"})).status_code == 202
        assert_problem(await submit(api, {"url": "http://10.0.0.1/hook"}), 422, "validation-error")
    settings = make_settings(webhook=WebhookSettings(allow_loopback=False, allow_private=True))
    async with serve(settings) as api:
        assert (await submit(api, {"url": "http://10.0.0.1/hook"})).status_code == 202
        assert_problem(await submit(api, {"url": "http://[::1]/hook"}), 422, "validation-error")


async def test_an_idempotent_retry_with_another_webhook_is_another_request(client):
    key = {"Idempotency-Key": "hooked-1"}
    first = await submit(client, {"url": "https://a.example.com/"}, **key)
    again = await submit(client, {"url": "https://a.example.com/"}, **key)
    assert again.headers.get("idempotent-replayed") == "true" and again.json()["id"] == first.json()["id"]
    assert_problem(
        await submit(client, {"url": "https://b.example.com/"}, **key), 422, "idempotency-key-reused"
    )


async def finish(store: PostgresTaskStore, task_id: uuid.UUID) -> None:
    """Route, start and complete a task as the broker agent and a worker would: its delivery is written."""
    from taskyard_common.messages import RoutingDecision, RoutingMethod

    decision = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.5)
    assert await store.route(task_id, decision)
    await store.start(task_id, owner="w", lease_seconds=30, attempt=1)
    assert await store.complete(task_id, {"output": "done"}, Usage(), owner="w")


async def test_deliveries_are_listed_with_their_attempts_and_redelivered_with_the_same_id(client, store):
    answer = await submit(client, {"url": "https://hooks.example.com/x", "events": ["completed"]})
    task_id = uuid.UUID(answer.json()["id"])
    path = f"/v1/tasks/{task_id}/webhook-deliveries"
    assert (await client.get(path)).json() == {"items": []}, "nothing announced before it finishes"
    await finish(store, task_id)
    (pending,) = (await client.get(path)).json()["items"]
    assert pending["status"] == "pending" and pending["attempts"] == 0 and pending["event"] == "completed"
    assert pending["payload"]["type"] == "task.completed" and pending["next_attempt_at"]
    assert pending["links"]["redeliver"] == f"{path}/{pending['id']}/redeliver"
    # The dispatcher gives up on it (as after 24 hours of failures).
    entry = {"at": "2030-01-01T00:00:00+00:00", "status_code": 500, "error": None, "duration_ms": 12.5}
    await store.pool.execute(
        "UPDATE webhook_deliveries SET status = 'failed', attempts = 1, attempt_log = $2 WHERE id = $1",
        pending["id"],
        [entry],
    )
    (failed,) = (await client.get(path)).json()["items"]
    assert failed["status"] == "failed" and failed["next_attempt_at"] is None
    assert failed["attempt_history"] == [{**entry, "at": "2030-01-01T00:00:00Z"}]
    again = await client.post(pending["links"]["redeliver"])
    assert again.status_code == 202, again.text
    redelivered = again.json()
    assert redelivered["id"] == pending["id"] and redelivered["status"] == "pending"
    assert redelivered["redelivered_at"] and redelivered["next_attempt_at"]
    assert redelivered["attempt_history"] == failed["attempt_history"], "its history stays"
    assert_problem(await client.post(f"{path}/msg_nothing_1/redeliver"), 404, "not-found")
    for malformed in ("msg%00x", "a%20b", "x" * 201):
        assert_problem(await client.post(f"{path}/{malformed}/redeliver"), 404, "not-found")
    assert_problem(await client.get(f"/v1/tasks/{uuid.uuid4()}/webhook-deliveries"), 404, "not-found")
    assert_problem(await client.get("/v1/tasks/not-a-uuid/webhook-deliveries"), 404, "not-found")


@pytest.fixture
async def keys(db_settings: DbSettings) -> AsyncIterator[KeyStore]:
    store = await KeyStore.open(db_settings)
    try:
        yield store
    finally:
        await store.close()


async def test_only_the_tenant_reads_its_deliveries_and_a_reader_cannot_redeliver(
    make_settings: MakeSettings, store: PostgresTaskStore, keys: KeyStore
):
    async def bearer(tenant: str, role: Role) -> dict[str, str]:
        return {"Authorization": f"Bearer {(await keys.create(tenant=tenant, role=role))[1]}"}

    task = await running(
        store, tenant="acme", webhook={"url": "https://h.example.com/", "events": ALL_EVENTS}
    )
    assert await store.complete(task.id, {"output": "x"}, Usage(), owner="w")
    path = f"/v1/tasks/{task.id}/webhook-deliveries"
    async with serve(make_settings(auth_enabled=True)) as api:
        (item,) = (await api.get(path, headers=await bearer("acme", Role.READER))).json()["items"]
        redeliver = f"{path}/{item['id']}/redeliver"
        assert_problem(await api.post(redeliver, headers=await bearer("acme", Role.READER)), 403, "forbidden")
        # Another tenant's task is not found, whatever the role (the role is checked first, as for cancel).
        for role in (Role.READER, Role.SUBMITTER, Role.ADMIN):
            assert_problem(await api.get(path, headers=await bearer("globex", role)), 404, "not-found")
        for role in (Role.SUBMITTER, Role.ADMIN):
            assert_problem(await api.post(redeliver, headers=await bearer("globex", role)), 404, "not-found")
        assert (await api.post(redeliver, headers=await bearer("acme", Role.SUBMITTER))).status_code == 202
        assert (await api.post(redeliver, headers=await bearer("acme", Role.ADMIN))).status_code == 202

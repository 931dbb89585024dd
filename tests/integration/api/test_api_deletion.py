"""Deleting finished tasks through the API: one task (204, 409 while unfinished, 404 for another tenant's),
every finished task of a tenant (admins), and an Idempotency-Key that names a deleted task creating anew."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from taskyard_common.messages import Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from tests.integration.api.conftest import MakeSettings, assert_problem, running, serve


@pytest.fixture
async def keys(db_settings: DbSettings) -> AsyncIterator[KeyStore]:
    store = await KeyStore.open(db_settings)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
async def api(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(make_settings(auth_enabled=True)) as client:
        yield client


async def auth(keys: KeyStore, tenant: str, role: Role) -> dict[str, str]:
    _, key = await keys.create(tenant=tenant, role=role, name="test")
    return {"Authorization": f"Bearer {key}"}


async def finished(store: PostgresTaskStore, tenant: str) -> uuid.UUID:
    task = await running(store, tenant=tenant)
    assert await store.complete(task.id, {"output": "done"}, Usage(), owner="w")
    return task.id


async def test_deleting_a_task_and_reusing_its_idempotency_key(
    api: httpx.AsyncClient, keys: KeyStore, store: PostgresTaskStore
):
    acme = await auth(keys, "acme", Role.SUBMITTER)
    submitted = await api.post(
        "/v1/tasks", json={"input": "x"}, headers={**acme, "Idempotency-Key": "order-7"}
    )
    assert submitted.status_code == 202, submitted.text
    first = uuid.UUID(submitted.json()["id"])
    assert_problem(await api.delete(f"/v1/tasks/{first}", headers=acme), 409, "task-not-finished")
    live = await running(store, tenant="acme")
    body = assert_problem(await api.delete(f"/v1/tasks/{live.id}", headers=acme), 409, "task-not-finished")
    assert body["task_status"] == "running"

    done = await finished(store, "acme")
    other = await finished(store, "globex")
    reader = await auth(keys, "acme", Role.READER)
    assert_problem(await api.delete(f"/v1/tasks/{done}", headers=reader), 403, "forbidden")
    assert_problem(await api.delete(f"/v1/tasks/{other}", headers=acme), 404, "not-found")
    assert_problem(await api.delete("/v1/tasks/not-a-uuid", headers=acme), 404, "not-found")
    deleted = await api.delete(f"/v1/tasks/{done}", headers=acme)
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(await api.get(f"/v1/tasks/{done}", headers=acme), 404, "not-found")
    assert await store.get(other) is not None, "another tenant's task untouched"

    # The submitted task, once cancelled (finished), is deleted with its key: the same key makes a new task.
    assert (await api.post(f"/v1/tasks/{first}/cancel", headers=acme)).status_code == 200
    assert (await api.delete(f"/v1/tasks/{first}", headers=acme)).status_code == 204
    again = await api.post("/v1/tasks", json={"input": "x"}, headers={**acme, "Idempotency-Key": "order-7"})
    assert again.status_code == 202 and "idempotent-replayed" not in again.headers
    assert uuid.UUID(again.json()["id"]) != first


async def test_an_admin_deletes_every_finished_task_of_its_tenant(
    api: httpx.AsyncClient, keys: KeyStore, store: PostgresTaskStore
):
    gone = [await finished(store, "acme") for _ in range(3)]
    live = await running(store, tenant="acme")
    kept = await finished(store, "globex")
    submitter = await auth(keys, "acme", Role.SUBMITTER)
    assert_problem(await api.delete("/v1/tenant/tasks", headers=submitter), 403, "forbidden")
    purged = await api.delete("/v1/tenant/tasks", headers=await auth(keys, "acme", Role.ADMIN))
    assert purged.status_code == 200, purged.text
    assert purged.json() == {"deleted": 3, "complete": True, "remaining": 1}
    assert [await store.get(t) is None for t in (*gone, live.id, kept)] == [True, True, True, False, False]

"""``/v1/tenants/{tenant}/limits``: an admin reads, sets and drops its own tenant's max_running; nobody else."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from tests.integration.api.conftest import MakeSettings, assert_problem, running, serve

LIMITS = "/v1/tenants/acme/limits"


@pytest.fixture
async def api(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(make_settings(auth_enabled=True)) as client:
        yield client


async def header(db: DbSettings, tenant: str, role: Role) -> dict[str, str]:
    keys = await KeyStore.open(db)
    try:
        _, key = await keys.create(tenant=tenant, role=role, name="test")
    finally:
        await keys.close()
    return {"Authorization": f"Bearer {key}"}


async def test_an_admin_sets_reads_and_drops_its_tenants_cap(
    api: httpx.AsyncClient, db_settings: DbSettings, store: PostgresTaskStore
):
    admin = await header(db_settings, "acme", Role.ADMIN)
    unset = await api.get(LIMITS, headers=admin)
    assert unset.status_code == 200, unset.text
    assert unset.json() == {"tenant": "acme", "max_running": None, "running": 0, "updated_at": None}
    await running(store, tenant="acme")
    put = await api.put(LIMITS, json={"max_running": 3}, headers=admin)
    assert put.status_code == 200, put.text
    assert put.json()["max_running"] == 3 and put.json()["running"] == 1 and put.json()["updated_at"]
    assert (await api.get(LIMITS, headers=admin)).json()["max_running"] == 3
    # Every limit at once: an empty document makes the tenant unlimited again.
    assert (await api.put(LIMITS, json={}, headers=admin)).json()["max_running"] is None
    await api.put(LIMITS, json={"max_running": 2}, headers=admin)
    dropped = await api.delete(LIMITS, headers=admin)
    assert dropped.status_code == 204 and dropped.content == b""
    assert (await api.get(LIMITS, headers=admin)).json()["updated_at"] is None
    assert (await api.delete(LIMITS, headers=admin)).status_code == 204, "dropping nothing is no error"


async def test_bad_limits_are_problems_and_change_nothing(api: httpx.AsyncClient, db_settings: DbSettings):
    admin = await header(db_settings, "acme", Role.ADMIN)
    await api.put(LIMITS, json={"max_running": 5}, headers=admin)
    for body in ({"max_running": 0}, {"max_running": "ten"}, {"max_running": 2, "extra": 1}, [1]):
        assert_problem(await api.put(LIMITS, json=body, headers=admin), 422, "validation-error")
    as_text = await api.put(LIMITS, content=b"max_running=3", headers={**admin, "Content-Type": "text/plain"})
    assert_problem(as_text, 415, "unsupported-media-type")
    broken = await api.put(LIMITS, content=b"{", headers={**admin, "Content-Type": "application/json"})
    assert broken.status_code in (400, 422) and broken.headers["content-type"] == "application/problem+json"
    assert (await api.get(LIMITS, headers=admin)).json()["max_running"] == 5


async def test_only_the_tenants_own_admin_reaches_its_limits(api: httpx.AsyncClient, db_settings: DbSettings):
    for role in (Role.READER, Role.SUBMITTER):
        headers = await header(db_settings, "acme", role)
        assert_problem(await api.get(LIMITS, headers=headers), 403, "forbidden")
        assert_problem(await api.put(LIMITS, json={"max_running": 1}, headers=headers), 403, "forbidden")
        assert_problem(await api.delete(LIMITS, headers=headers), 403, "forbidden")
    other = await header(db_settings, "globex", Role.ADMIN)
    for path in (LIMITS, "/v1/tenants/Not%20A%20Tenant/limits"):
        assert_problem(await api.get(path, headers=other), 404, "not-found")
        assert_problem(await api.put(path, json={"max_running": 1}, headers=other), 404, "not-found")
        assert_problem(await api.delete(path, headers=other), 404, "not-found")
    assert_problem(await api.get(LIMITS), 401, "unauthorized")

"""API keys, roles and tenants: who may call what, and a tenant never sees another tenant's tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from tests.integration.api.conftest import MakeSettings, assert_problem, created, dead_lettered, serve
from tests.support.polling import eventually

Bearer = Callable[..., Awaitable[dict[str, str]]]


@pytest.fixture
async def keys(db_settings: DbSettings) -> AsyncIterator[KeyStore]:
    store = await KeyStore.open(db_settings)
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def bearer(keys: KeyStore) -> Bearer:
    """``await bearer(tenant, role)``: the Authorization header of a new key."""

    async def make(tenant: str = "acme", role: Role = Role.SUBMITTER) -> dict[str, str]:
        _, key = await keys.create(tenant=tenant, role=role, name="test")
        return {"Authorization": f"Bearer {key}"}

    return make


@pytest.fixture
async def api(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(make_settings(auth_enabled=True)) as client:
        yield client


V1_ROUTES = [
    ("GET", "/v1/tasks"),
    ("POST", "/v1/tasks"),
    ("GET", "/v1/tasks/00000000-0000-0000-0000-000000000000"),
    ("GET", "/v1/tasks/00000000-0000-0000-0000-000000000000/result"),
    ("GET", "/v1/tasks/00000000-0000-0000-0000-000000000000/events"),
    ("POST", "/v1/tasks/00000000-0000-0000-0000-000000000000/cancel"),
    ("DELETE", "/v1/tasks/00000000-0000-0000-0000-000000000000"),
    ("DELETE", "/v1/tenant/tasks"),
    ("POST", "/v1/task-groups"),
    ("GET", "/v1/task-groups/00000000-0000-0000-0000-000000000000"),
    ("POST", "/v1/task-groups/00000000-0000-0000-0000-000000000000/cancel"),
    ("GET", "/v1/tasks/00000000-0000-0000-0000-000000000000/webhook-deliveries"),
    ("POST", "/v1/tasks/00000000-0000-0000-0000-000000000000/webhook-deliveries/msg_x_1/redeliver"),
    ("GET", "/v1/dead-letters"),
    ("GET", "/v1/dead-letters/00000000-0000-0000-0000-000000000000"),
    ("POST", "/v1/dead-letters/00000000-0000-0000-0000-000000000000/replay"),
    ("DELETE", "/v1/dead-letters/00000000-0000-0000-0000-000000000000"),
    ("GET", "/v1/specialists"),
    ("GET", "/v1/schedules"),
    ("POST", "/v1/schedules"),
    ("GET", "/v1/schedules/00000000-0000-0000-0000-000000000000"),
    ("POST", "/v1/schedules/00000000-0000-0000-0000-000000000000/pause"),
    ("POST", "/v1/schedules/00000000-0000-0000-0000-000000000000/resume"),
    ("DELETE", "/v1/schedules/00000000-0000-0000-0000-000000000000"),
    ("GET", "/v1/tenants/acme/limits"),
    ("PUT", "/v1/tenants/acme/limits"),
    ("DELETE", "/v1/tenants/acme/limits"),
]


async def test_every_v1_route_needs_a_valid_key_and_probes_stay_open(
    api: httpx.AsyncClient, bearer: Bearer, keys: KeyStore
):
    _, good = await keys.create(tenant="acme", role=Role.ADMIN)
    unknown = "tyk_00000000_" + good.split("_", 2)[2]
    wrong_secret = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    for method, path in V1_ROUTES:
        missing = await api.request(method, path, json={"input": "x"} if method == "POST" else None)
        body = assert_problem(missing, 401, "unauthorized")
        assert missing.headers["www-authenticate"].startswith("Bearer"), (method, path)
        assert "Authorization" in body["detail"]
        for key in ("not-a-key", unknown, wrong_secret, good.lower()):
            refused = await api.request(method, path, headers={"Authorization": f"Bearer {key}"})
            assert_problem(refused, 401, "unauthorized")
            assert refused.headers["www-authenticate"].startswith("Bearer")
        basic = await api.request(method, path, headers={"Authorization": "Basic dXNlcjpwdw=="})
        assert_problem(basic, 401, "unauthorized")
    # The probes and metrics need no key and show no task data.
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await api.get(path)).status_code == 200


async def test_a_body_is_not_read_before_the_key_is_valid(api: httpx.AsyncClient, keys: KeyStore):
    """FastAPI parses a JSON body before it checks the key: without a valid one, a request with a body is
    answered 401 before its body is read, so a malformed or near-limit body costs no parsing."""
    _, good = await keys.create(tenant="acme", role=Role.SUBMITTER)
    unknown = "tyk_00000000_" + good.split("_", 2)[2]
    garbage = b'{"input": "' + b"x" * 900_000  # near the 1 MiB limit, and not even JSON
    for headers in ({}, {"Authorization": f"Bearer {unknown}"}, {"Authorization": "Bearer not-a-key"}):
        for path in ("/v1/tasks", "/v1/task-groups", "/v1/schedules"):
            refused = await api.post(
                path, content=garbage, headers={**headers, "Content-Type": "application/json"}
            )
            assert_problem(refused, 401, "unauthorized")
            assert refused.headers["www-authenticate"].startswith("Bearer")
    # With the key, the same body is read and found malformed.
    malformed = await api.post(
        "/v1/tasks",
        content=garbage,
        headers={"Authorization": f"Bearer {good}", "Content-Type": "application/json"},
    )
    assert_problem(malformed, 422, "validation-error")
    accepted = await api.post("/v1/tasks", json={"input": "x"}, headers={"Authorization": f"Bearer {good}"})
    assert accepted.status_code == 202, accepted.text


async def test_a_revoked_key_is_refused_once_its_cached_look_up_expires(
    make_settings: MakeSettings, keys: KeyStore
):
    record, good = await keys.create(tenant="acme", role=Role.ADMIN)
    headers = {"Authorization": f"Bearer {good}"}
    async with serve(make_settings(auth_enabled=True, auth_cache_seconds=0.5)) as api:
        assert (await api.get("/v1/tasks", headers=headers)).status_code == 200
        assert await keys.revoke(record.id)
        # Still trusted from the cache for at most auth_cache_seconds, then refused.

        async def refused() -> bool:
            return (await api.get("/v1/tasks", headers=headers)).status_code == 401

        await eventually(refused, timeout=5, what="the revoked key to be refused")
        assert_problem(await api.get("/v1/tasks", headers=headers), 401, "unauthorized")
        # A wrong secret never matches the cached entry of a good key.
        _, other = await keys.create(tenant="acme", role=Role.ADMIN)
        other_headers = {"Authorization": f"Bearer {other}"}
        assert (await api.get("/v1/tasks", headers=other_headers)).status_code == 200
        wrong = other[:-4] + ("AAAA" if not other.endswith("AAAA") else "BBBB")
        refused_wrong = await api.get("/v1/tasks", headers={"Authorization": f"Bearer {wrong}"})
        assert_problem(refused_wrong, 401, "unauthorized")


async def test_without_the_cache_a_revocation_applies_from_the_next_request(
    make_settings: MakeSettings, keys: KeyStore
):
    record, good = await keys.create(tenant="acme", role=Role.ADMIN)
    headers = {"Authorization": f"Bearer {good}"}
    async with serve(make_settings(auth_enabled=True, auth_cache_seconds=0)) as api:
        assert (await api.get("/v1/tasks", headers=headers)).status_code == 200
        assert await keys.revoke(record.id)
        assert_problem(await api.get("/v1/tasks", headers=headers), 401, "unauthorized")


async def test_roles_limit_what_a_key_may_do(
    api: httpx.AsyncClient, bearer: Bearer, store: PostgresTaskStore
):
    reader = await bearer("acme", Role.READER)
    submitter = await bearer("acme", Role.SUBMITTER)
    admin = await bearer("acme", Role.ADMIN)
    task = await created(store, tenant="acme")

    refused = await api.post("/v1/tasks", json={"input": "x"}, headers=reader)
    assert "submitter" in assert_problem(refused, 403, "forbidden")["detail"]
    assert_problem(await api.post(f"/v1/tasks/{task.id}/cancel", headers=reader), 403, "forbidden")
    for path in ("/v1/tasks", f"/v1/tasks/{task.id}", f"/v1/tasks/{task.id}/events", "/v1/specialists"):
        assert (await api.get(path, headers=reader)).status_code == 200, path

    accepted = await api.post("/v1/tasks", json={"input": "x"}, headers=submitter)
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["status"] == "pending"
    assert_problem(await api.get("/v1/dead-letters", headers=submitter), 403, "forbidden")
    assert_problem(await api.delete(f"/v1/dead-letters/{task.id}", headers=submitter), 403, "forbidden")

    assert (await api.get("/v1/dead-letters", headers=admin)).status_code == 200
    assert (await api.post("/v1/tasks", json={"input": "y"}, headers=admin)).status_code == 202
    cancelled = await api.post(f"/v1/tasks/{task.id}/cancel", headers=submitter)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


async def test_a_tenant_never_sees_another_tenants_tasks(
    api: httpx.AsyncClient, bearer: Bearer, store: PostgresTaskStore
):
    ours, theirs = await bearer("acme", Role.ADMIN), await bearer("globex", Role.ADMIN)
    task = await created(store, tenant="acme")
    letter = await dead_lettered(store, "general", tenant="acme")

    for path in (
        f"/v1/tasks/{task.id}",
        f"/v1/tasks/{task.id}/result",
        f"/v1/tasks/{task.id}/events",
        f"/v1/dead-letters/{letter.id}",
    ):
        assert_problem(await api.get(path, headers=theirs), 404, "not-found")
    assert_problem(await api.post(f"/v1/tasks/{task.id}/cancel", headers=theirs), 404, "not-found")
    assert_problem(await api.post(f"/v1/dead-letters/{letter.id}/replay", headers=theirs), 404, "not-found")
    assert_problem(await api.delete(f"/v1/dead-letters/{letter.id}", headers=theirs), 404, "not-found")
    assert (await api.get("/v1/tasks", headers=theirs)).json()["items"] == []
    assert (await api.get("/v1/dead-letters", headers=theirs)).json()["items"] == []
    # Nothing of ours was touched.
    assert (await store.get(task.id)).status is TaskStatus.PENDING  # type: ignore[union-attr]
    assert (await store.get_dead_letter(letter.id)) is not None

    # Their own submission is theirs alone.
    mine = (await api.post("/v1/tasks", json={"input": "theirs"}, headers=theirs)).json()
    assert [t["id"] for t in (await api.get("/v1/tasks", headers=theirs)).json()["items"]] == [mine["id"]]
    assert {t["id"] for t in (await api.get("/v1/tasks", headers=ours)).json()["items"]} == {
        str(task.id),
        str(letter.id),
    }
    assert_problem(await api.get(f"/v1/tasks/{mine['id']}", headers=ours), 404, "not-found")
    assert (await api.get(f"/v1/tasks/{task.id}", headers=ours)).status_code == 200
    assert [d["task_id"] for d in (await api.get("/v1/dead-letters", headers=ours)).json()["items"]] == [
        str(letter.id)
    ]
    assert (await api.post(f"/v1/dead-letters/{letter.id}/replay", headers=ours)).status_code == 202


async def test_with_auth_disabled_every_request_is_the_default_admin(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    accepted = await client.post("/v1/tasks", json={"input": "no key needed"})
    assert accepted.status_code == 202, accepted.text
    record = await store.get(accepted.json()["id"])
    assert record is not None and record.tenant == "default"
    assert (await client.get("/v1/dead-letters")).status_code == 200
    assert (await client.get(f"/v1/tasks/{record.id}")).status_code == 200


async def test_the_openapi_document_declares_bearer_auth_and_its_errors(api: httpx.AsyncClient):
    schema = (await api.get("/openapi.json")).json()
    schemes = schema["components"]["securitySchemes"]
    assert list(schemes.values()) == [{**next(iter(schemes.values())), "type": "http", "scheme": "bearer"}]
    name = next(iter(schemes))
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if not path.startswith("/v1"):
                assert "security" not in operation, (method, path)
                continue
            assert operation["security"] == [{name: []}], (method, path)
            assert "WWW-Authenticate" in operation["responses"]["401"]["headers"], (method, path)
    submit = schema["paths"]["/v1/tasks"]["post"]["responses"]
    for status in ("400", "403", "409", "422", "429", "503"):
        assert submit[status]["content"]["application/problem+json"], status
    assert {"Retry-After", "RateLimit", "RateLimit-Policy"} <= set(submit["429"]["headers"])
    assert {"Idempotent-Replayed", "RateLimit"} <= set(submit["202"]["headers"])
    params = {p["name"] for p in schema["paths"]["/v1/tasks"]["post"]["parameters"]}
    assert "Idempotency-Key" in params
    for path in ("/v1/dead-letters", "/v1/dead-letters/{task_id}/replay"):
        for operation in schema["paths"][path].values():
            assert "403" in operation["responses"]

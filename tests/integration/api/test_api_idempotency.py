"""``Idempotency-Key`` on ``POST /v1/tasks``: a retry answers the original task, never creates another."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import httpx

from taskyard_api.bus import BusLink
from taskyard_api.submission.sweeper import Sweeper
from taskyard_common.catalog import Catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.topology import Topology
from tests.integration.api.conftest import IntakeReader, MakeSettings, assert_problem, serve
from tests.support.polling import eventually

BODY = {"input": "Summarize: idempotency keys make retries safe.", "metadata": {"k": "v"}}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def key_rows(db: DbSettings, key: str) -> int:
    conn = await asyncpg.connect(db.url.get_secret_value())
    try:
        return await conn.fetchval(
            f'SELECT count(*) FROM "{db.db_schema}".idempotency_keys WHERE key = $1', key
        )
    finally:
        await conn.close()


async def test_a_retry_with_the_same_key_answers_the_original_task(
    client: httpx.AsyncClient, intake, store: PostgresTaskStore
):
    reader: IntakeReader = await intake()
    first = await client.post("/v1/tasks", json=BODY, headers=keyed("order-4411"))
    assert first.status_code == 202, first.text
    assert "idempotent-replayed" not in first.headers
    # The same body in another key order and spelling of the same JSON is the same request.
    again = await client.post(
        "/v1/tasks", json={"metadata": {"k": "v"}, "input": BODY["input"]}, headers=keyed("order-4411")
    )
    assert again.status_code == 202, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.headers["location"] == first.headers["location"]
    assert again.json()["id"] == first.json()["id"]
    await reader.take(1)
    await reader.assert_empty()
    assert len(await store.list(status=None, specialist=None, limit=10, after=None)) == 1

    # A key is for one request: another body with it is refused, and nothing is stored.
    other = await client.post("/v1/tasks", json={"input": "something else"}, headers=keyed("order-4411"))
    assert_problem(other, 422, "idempotency-key-reused")
    # A different key is a different task.
    fresh = await client.post("/v1/tasks", json=BODY, headers=keyed("order-4412"))
    assert fresh.status_code == 202 and fresh.json()["id"] != first.json()["id"]


async def test_malformed_keys_are_refused(client: httpx.AsyncClient):
    for bad in ("", "x" * 256):
        assert_problem(await client.post("/v1/tasks", json=BODY, headers=keyed(bad)), 422, "validation-error")
    assert (await client.post("/v1/tasks", json=BODY, headers=keyed("~" * 255))).status_code == 202


async def test_a_hundred_concurrent_requests_with_one_key_make_one_task(
    make_settings: MakeSettings, intake, store: PostgresTaskStore
):
    async with serve(make_settings(rate_limit_per_second=0)) as client:
        reader: IntakeReader = await intake()
        responses = await asyncio.gather(
            *(client.post("/v1/tasks", json=BODY, headers=keyed("same")) for _ in range(100))
        )
        statuses = {r.status_code for r in responses}
        assert statuses <= {202, 409}, [r.text for r in responses if r.status_code not in (202, 409)]
        accepted = {r.json()["id"] for r in responses if r.status_code == 202}
        assert len(accepted) == 1
        for busy in (r for r in responses if r.status_code == 409):
            assert_problem(busy, 409, "idempotency-key-in-use")
            assert busy.headers["retry-after"] == "1"
        tasks = await store.list(status=None, specialist=None, limit=200, after=None)
        assert [str(t.id) for t in tasks] == list(accepted)
        (message, _), *_ = await reader.take(1)
        assert str(message.task_id) in accepted
        await reader.assert_empty()
        # Once published, every retry is a replay.
        replayed = await client.post("/v1/tasks", json=BODY, headers=keyed("same"))
        assert replayed.status_code == 202 and replayed.headers["idempotent-replayed"] == "true"


async def test_an_expired_key_names_a_new_task(
    client: httpx.AsyncClient,
    store: PostgresTaskStore,
    db_settings: DbSettings,
    amqp_settings: AmqpSettings,
    catalog: Catalog,
):
    first = await client.post("/v1/tasks", json=BODY, headers=keyed("k-expiring"))
    assert first.status_code == 202
    topology = Topology(amqp_settings.prefix)
    sweeper = Sweeper(
        store,
        BusLink(amqp_settings, topology, catalog.names),  # never started: only the keys are swept
        topology,
        interval_seconds=60,
        grace_seconds=60,
        idempotency_retention_seconds=0.001,
    )

    async def swept() -> bool:
        return await sweeper.expire_keys_once() >= 1

    await eventually(swept, what="the sweeper to forget the key")
    assert await key_rows(db_settings, "k-expiring") == 0
    second = await client.post("/v1/tasks", json=BODY, headers=keyed("k-expiring"))
    assert second.status_code == 202 and "idempotent-replayed" not in second.headers
    assert second.json()["id"] != first.json()["id"]


async def test_a_key_past_its_retention_is_reused_even_before_the_sweeper_runs(make_settings: MakeSettings):
    async with serve(make_settings(idempotency_retention_seconds=0.2)) as client:
        first = (await client.post("/v1/tasks", json=BODY, headers=keyed("k"))).json()["id"]
        ids: list[str] = []

        async def new_task() -> bool:
            response = await client.post("/v1/tasks", json=BODY, headers=keyed("k"))
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
            return ids[-1] != first

        await eventually(new_task, what="the key to expire")
        assert "idempotent-replayed" not in (await client.post("/v1/tasks", json=BODY)).headers


async def test_a_refused_publish_releases_the_key(
    make_settings: MakeSettings, amqp_settings: AmqpSettings, db_settings: DbSettings, intake
):
    # Room for one message: the queue refuses publishes (back pressure) until it is drained.
    tiny = amqp_settings.model_copy(update={"max_length": 1})
    async with serve(make_settings(amqp=tiny)) as client:
        reader: IntakeReader = await intake()
        refused: list[tuple[str, httpx.Response]] = []
        accepted = 0

        async def full() -> bool:
            nonlocal accepted
            key = uuid.uuid4().hex
            response = await client.post("/v1/tasks", json=BODY, headers=keyed(key))
            if response.status_code == 202:
                accepted += 1
            else:
                refused.append((key, response))
            return bool(refused)

        await eventually(full, what="the intake queue to refuse a publish")
        key, response = refused[0]
        assert_problem(response, 503, "queue-full")
        assert await key_rows(db_settings, key) == 0
        await reader.take(accepted)
        retried = await client.post("/v1/tasks", json=BODY, headers=keyed(key))
        assert retried.status_code == 202, retried.text
        assert "idempotent-replayed" not in retried.headers
        assert await key_rows(db_settings, key) == 1

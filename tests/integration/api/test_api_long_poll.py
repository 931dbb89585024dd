"""ETags, 304 and long-polls on ``GET /v1/tasks/{task_id}``: woken through RabbitMQ, through the watcher's
poll when no wake-up comes, and again after the broker was away."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr
from yarl import URL

from taskyard_common.messages import RoutingDecision, RoutingMethod
from taskyard_common.settings import AmqpSettings
from taskyard_common.store import PostgresTaskStore
from tests.integration.api.conftest import MakeSettings, assert_problem, is_ready, serve
from tests.support.polling import eventually
from tests.support.scrape import metric_sum
from tests.support.tcp_proxy import TcpProxy

DECISION = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.5)
# Long-polls ask for the longest wait; returning well before it is the behaviour under test.
WAIT = 60
RETURNS_WITHIN = 30


async def submit(client: httpx.AsyncClient) -> httpx.Response:
    response = await client.post("/v1/tasks", json={"input": "poll me"})
    assert response.status_code == 202, response.text
    return response


async def long_poll(client: httpx.AsyncClient, task_id: str, etag: str | None = None) -> httpx.Response:
    """A long-poll for WAIT seconds that must come back within RETURNS_WITHIN."""
    headers = {"If-None-Match": etag} if etag else {}
    return await asyncio.wait_for(
        client.get(f"/v1/tasks/{task_id}", params={"wait": WAIT}, headers=headers, timeout=WAIT + 5),
        RETURNS_WITHIN,
    )


async def waiting_long_polls(client: httpx.AsyncClient) -> float:
    return metric_sum((await client.get("/metrics")).text, "taskyard_long_polls_in_progress")


async def test_task_documents_carry_an_etag_and_an_unchanged_one_answers_304(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    created = await submit(client)
    task_id, etag = created.json()["id"], created.headers["etag"]
    assert etag.startswith('W/"')
    read = await client.get(f"/v1/tasks/{task_id}")
    assert read.status_code == 200 and read.headers["etag"] == etag, "the 202's ETag is the document's"

    unchanged = await client.get(f"/v1/tasks/{task_id}", headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b"" and unchanged.headers["etag"] == etag
    assert (
        await client.get(f"/v1/tasks/{task_id}", headers={"If-None-Match": '"other", ' + etag})
    ).status_code == 304
    # With a wait and no change: 304 once the wait is over; without If-None-Match: the document again.
    waited = await client.get(f"/v1/tasks/{task_id}", params={"wait": 0.2}, headers={"If-None-Match": etag})
    assert waited.status_code == 304 and waited.headers["etag"] == etag
    plain = await client.get(f"/v1/tasks/{task_id}", params={"wait": 0.2})
    assert plain.status_code == 200 and plain.headers["etag"] == etag

    assert await store.route(uuid.UUID(task_id), DECISION)
    changed = await client.get(f"/v1/tasks/{task_id}", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.json()["status"] == "queued"
    assert changed.headers["etag"] != etag
    # A stale If-None-Match answers at once, however long the wait asked for.
    stale = await long_poll(client, task_id, etag)
    assert stale.status_code == 200 and stale.headers["etag"] == changed.headers["etag"]


async def test_a_bad_wait_is_a_validation_error(client: httpx.AsyncClient):
    task_id = (await submit(client)).json()["id"]
    for wait in ("0", "-1", "60.5", "61", "soon", "nan", "inf", ""):
        assert_problem(
            await client.get(f"/v1/tasks/{task_id}", params={"wait": wait}), 422, "validation-error"
        )
    assert (await client.get(f"/v1/tasks/{task_id}", params={"wait": "0.01"})).status_code == 200
    assert_problem(await client.get(f"/v1/tasks/{uuid.uuid4()}", params={"wait": 1}), 404, "not-found")


async def test_a_long_poll_returns_when_the_task_changes_woken_through_rabbitmq(make_settings: MakeSettings):
    # The watcher polls once a minute: only a wake-up brings the change before the wait is over.
    async with serve(make_settings(watch_poll_seconds=60)) as client:
        created = await submit(client)
        task_id, etag = created.json()["id"], created.headers["etag"]
        polling = asyncio.ensure_future(long_poll(client, task_id, etag))

        async def waiting() -> bool:
            return await waiting_long_polls(client) == 1

        await eventually(waiting, what="the long-poll to wait")
        cancelled = await client.post(f"/v1/tasks/{task_id}/cancel")
        assert cancelled.status_code == 200
        answer = await polling
        assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
        assert answer.headers["etag"] != etag
        assert await waiting_long_polls(client) == 0


async def test_a_change_nobody_announced_is_found_by_the_poll(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    async with serve(make_settings(watch_poll_seconds=0.2)) as client:
        created = await submit(client)
        task_id = created.json()["id"]
        polling = asyncio.ensure_future(long_poll(client, task_id))  # no If-None-Match: from the current one

        async def waiting() -> bool:
            return await waiting_long_polls(client) == 1

        await eventually(waiting, what="the long-poll to wait")
        # This store tells nobody (no on_change): as a change whose wake-up was lost.
        assert await store.route(uuid.UUID(task_id), DECISION)
        answer = await polling
        assert answer.status_code == 200 and answer.json()["status"] == "queued"


@pytest.fixture
async def broker_proxy(amqp_settings: AmqpSettings) -> AsyncIterator[TcpProxy]:
    target = URL(amqp_settings.url.get_secret_value())
    proxy = TcpProxy(target.host or "127.0.0.1", target.port or 5672)
    await proxy.start()
    yield proxy
    await proxy.close()


async def test_without_the_broker_requests_are_not_held_and_wake_ups_resume_after_it_returns(
    make_settings: MakeSettings, amqp_settings: AmqpSettings, broker_proxy: TcpProxy
):
    url = URL(amqp_settings.url.get_secret_value())
    proxied = (
        url.with_host(broker_proxy.host).with_port(broker_proxy.port).update_query(reconnect_interval="0.2")
    )
    amqp = amqp_settings.model_copy(update={"url": SecretStr(str(proxied)), "publish_timeout_seconds": 2.0})
    await broker_proxy.stop()  # away before the API starts
    async with serve(make_settings(amqp=amqp, watch_poll_seconds=60), wait_ready=False) as client:
        await broker_proxy.resume()
        await eventually(lambda: is_ready(client), what="/readyz once the broker is reachable")
        first = await submit(client)
        await broker_proxy.stop()
        # Not held up: a long-poll answers after its own wait, a stream opens.
        task_id, etag = first.json()["id"], first.headers["etag"]
        waited = await asyncio.wait_for(
            client.get(f"/v1/tasks/{task_id}", params={"wait": 0.5}, headers={"If-None-Match": etag}),
            RETURNS_WITHIN,
        )
        assert waited.status_code == 304
        await broker_proxy.resume()
        await eventually(lambda: is_ready(client), what="/readyz after the broker came back")
        await _a_cancel_wakes_a_long_poll(client, await submit(client))


async def _a_cancel_wakes_a_long_poll(client: httpx.AsyncClient, created: httpx.Response) -> None:
    task_id, etag = created.json()["id"], created.headers["etag"]
    polling = asyncio.ensure_future(long_poll(client, task_id, etag))

    async def waiting() -> bool:
        return await waiting_long_polls(client) == 1

    await eventually(waiting, what="the long-poll to wait")

    # The API's own change: its wake-up goes out on the reconnected link.
    assert (await client.post(f"/v1/tasks/{task_id}/cancel")).status_code == 200
    answer = await polling
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"

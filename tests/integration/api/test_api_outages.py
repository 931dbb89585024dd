"""The API without its broker or its database: it starts, says it is not ready, refuses with 503, recovers."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from pydantic import SecretStr
from yarl import URL

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store import PostgresTaskStore
from tests.integration.api.conftest import (
    IntakeReader,
    MakeSettings,
    assert_problem,
    dead_lettered,
    is_ready,
    running,
    serve,
)
from tests.support.polling import eventually
from tests.support.scrape import metric_sum
from tests.support.tcp_proxy import TcpProxy

# "It returns" rather than "it is fast": generous enough for a loaded machine, far below a hang.
RETURNS_WITHIN = 30


def proxied(url: str, proxy: TcpProxy, **query: str) -> str:
    return str(URL(url).with_host(proxy.host).with_port(proxy.port).update_query(query))


@pytest.fixture
async def proxy_to(request: pytest.FixtureRequest) -> AsyncIterator[Callable[[str], Awaitable[TcpProxy]]]:
    proxies: list[TcpProxy] = []

    async def start(url: str) -> TcpProxy:
        target = URL(url)
        proxy = TcpProxy(target.host or "127.0.0.1", target.port or 5672)
        await proxy.start()
        proxies.append(proxy)
        return proxy

    yield start
    for proxy in proxies:
        await proxy.close()


async def submit(client: httpx.AsyncClient) -> httpx.Response:
    return await asyncio.wait_for(client.post("/v1/tasks", json={"input": "hello"}), RETURNS_WITHIN)


async def test_without_the_broker_the_api_starts_refuses_and_recovers(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    store: PostgresTaskStore,
    proxy_to: Callable[[str], Awaitable[TcpProxy]],
    intake: Callable[[], Awaitable[IntakeReader]],
):
    running_task = await running(store)
    letter = await dead_lettered(store, None)
    proxy = await proxy_to(amqp_settings.url.get_secret_value())
    await proxy.stop()  # RabbitMQ is "down" before the API even starts
    # aio-pika reads reconnect_interval from the URL: a quick reconnect after the connection drops.
    amqp = amqp_settings.model_copy(
        update={
            "url": SecretStr(proxied(amqp_settings.url.get_secret_value(), proxy, reconnect_interval="0.2")),
            "publish_timeout_seconds": 2.0,
        }
    )
    async with serve(make_settings(amqp=amqp), wait_ready=False) as client:
        readiness = assert_problem(await client.get("/readyz"), 503, "not-ready")
        assert readiness["unavailable"] == ["broker"]
        assert "127.0.0.1" not in readiness["detail"] and "amqp" not in readiness["detail"]

        refused = await submit(client)
        body = assert_problem(refused, 503, "broker-unavailable")
        assert "not stored" in body["detail"]
        assert refused.headers["retry-after"] == str(amqp_settings.retry_after_seconds)
        assert len((await client.get("/v1/tasks")).json()["items"]) == 2  # the two set up above
        metrics = (await client.get("/metrics")).text
        assert 'taskyard_submit_rejected_total{reason="broker_unavailable"}' in metrics

        # Cancelling needs only the database: the worker's heartbeat carries the request instead.
        cancelled = await asyncio.wait_for(client.post(f"/v1/tasks/{running_task.id}/cancel"), RETURNS_WITHIN)
        assert cancelled.status_code == 202 and cancelled.json()["cancel_requested_at"] is not None
        # A replay refuses before taking the dead letter: nothing changed, retry later.
        replay = await asyncio.wait_for(client.post(f"/v1/dead-letters/{letter.id}/replay"), RETURNS_WITHIN)
        body = assert_problem(replay, 503, "broker-unavailable")
        assert "not replayed" in body["detail"] and "task_status" not in body
        assert replay.headers["retry-after"] == str(amqp_settings.retry_after_seconds)
        assert (await store.get(letter.id)).status is TaskStatus.DEAD_LETTERED

        await proxy.resume()
        await eventually(lambda: is_ready(client), what="/readyz after the broker came back")
        assert (await client.post(f"/v1/dead-letters/{letter.id}/replay")).status_code == 202
        first = await submit(client)
        assert first.status_code == 202, first.text

        # Now the established connection drops (a broker restart): 503 again, then aio-pika reconnects.
        await proxy.stop()
        await eventually(lambda: is_refused_readiness(client), what="/readyz to notice the lost broker")
        assert_problem(await submit(client), 503, "broker-unavailable")
        await proxy.resume()

        async def accepted() -> bool:
            return (await submit(client)).status_code == 202

        await eventually(accepted, what="a submission accepted after the broker reconnected")
        items = (await client.get("/v1/tasks")).json()["items"]
        # Only the accepted ones (every refused submission was discarded), the running and the replayed.
        assert len(items) == 4
        accepted = [item["id"] for item in items if item["id"] not in {str(running_task.id), str(letter.id)}]

    reader = await intake()
    # The replayed task was never routed, so it went back to intake too.
    announced = {message.task_id for message, _ in await reader.take(3)}
    assert {str(task_id) for task_id in announced} == {*accepted, str(letter.id)}
    await reader.assert_empty()


async def is_refused_readiness(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 503


async def test_without_the_database_the_api_answers_503_and_recovers(
    make_settings: MakeSettings,
    db_settings: DbSettings,
    store: PostgresTaskStore,
    proxy_to: Callable[[str], Awaitable[TcpProxy]],
):
    proxy = await proxy_to(db_settings.url.get_secret_value())
    db = db_settings.model_copy(update={"url": SecretStr(proxied(db_settings.url.get_secret_value(), proxy))})
    letter = await dead_lettered(store, "general")
    settings = make_settings(db=db)
    async with serve(settings) as client:
        task_id = (await submit(client)).json()["id"]

        async def requests() -> list[httpx.Response]:
            calls = (
                client.get(f"/v1/tasks/{task_id}"),
                client.get("/v1/tasks"),
                client.post("/v1/tasks", json={"input": "hello"}),
                client.get(f"/v1/tasks/{task_id}/result"),
                client.post(f"/v1/tasks/{task_id}/cancel"),
                client.get("/v1/dead-letters"),
                client.post(f"/v1/dead-letters/{letter.id}/replay"),
                client.delete(f"/v1/dead-letters/{letter.id}"),
            )
            # Neither a 500 nor a hang: every call returns, and promptly.
            return [await asyncio.wait_for(call, RETURNS_WITHIN) for call in calls]

        # Every connection of the pool dies at once, and new ones are refused (a restart or a failover).
        await proxy.stop()
        readiness = assert_problem(await client.get("/readyz"), 503, "not-ready")
        assert readiness["unavailable"] == ["database"]
        for response in await requests():
            assert_problem(response, 503, "database-unavailable")
            assert response.headers["retry-after"] == str(settings.retry_after_seconds)
        # The broker was never the problem: nothing reached the intake queue but the first task.
        assert (await store.get(uuid.UUID(task_id))).status is TaskStatus.PENDING

        # Back again: the pool reconnects by itself, no restart.
        await proxy.resume()
        await eventually(lambda: is_ready(client), what="/readyz after the database came back")
        assert (await client.get(f"/v1/tasks/{task_id}")).status_code == 200
        assert (await submit(client)).status_code == 202
        assert (await client.get("/v1/dead-letters")).json()["items"][0]["task_id"] == str(letter.id)
        cancelled = await client.post(f"/v1/tasks/{task_id}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        assert (await client.post(f"/v1/dead-letters/{letter.id}/replay")).status_code == 202


async def test_a_full_intake_queue_refuses_with_503_and_stores_nothing(
    make_settings: MakeSettings, amqp_settings: AmqpSettings
):
    # Same prefix (the fixture deletes these queues afterwards), but room for a single message.
    tiny = amqp_settings.model_copy(update={"max_length": 1})
    async with serve(make_settings(amqp=tiny)) as client:
        # The counter is process-wide: other tests in this process may have counted refusals already.
        before = metric_sum(
            (await client.get("/metrics")).text, "taskyard_submit_rejected_total", reason="queue_full"
        )
        accepted = 0
        refused: list[httpx.Response] = []

        async def full() -> bool:
            nonlocal accepted
            response = await submit(client)
            if response.status_code == 202:
                accepted += 1
            else:
                refused.append(response)
            return bool(refused)

        await eventually(full, what="the intake queue to refuse a publish")
        body = assert_problem(refused[0], 503, "queue-full")
        assert "not stored" in body["detail"]
        assert refused[0].headers["retry-after"] == str(tiny.retry_after_seconds)
        # Quorum queues enforce their length a little late: one or two get in, and only they are stored.
        assert accepted >= 1
        assert len((await client.get("/v1/tasks")).json()["items"]) == accepted
        metrics = (await client.get("/metrics")).text
        assert metric_sum(metrics, "taskyard_submit_rejected_total", reason="queue_full") == before + 1


class FreezingProxy(TcpProxy):
    """A proxy that can stop forwarding without closing anything: a partition or a frozen database host."""

    def __init__(self, target_host: str, target_port: int) -> None:
        super().__init__(target_host, target_port)
        self.flowing = asyncio.Event()
        self.flowing.set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:  # type: ignore[override]
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        writer.transport.abort()


async def test_a_database_that_stops_answering_gets_503_not_a_hang(
    make_settings: MakeSettings, db_settings: DbSettings
):
    target = URL(db_settings.url.get_secret_value())
    async with FreezingProxy(target.host or "127.0.0.1", target.port or 5432) as proxy:
        db = db_settings.model_copy(
            update={
                "url": SecretStr(proxied(db_settings.url.get_secret_value(), proxy)),
                "command_timeout_seconds": 1.0,
            }
        )
        async with serve(make_settings(db=db)) as client:
            task_id = (await submit(client)).json()["id"]
            proxy.flowing.clear()
            # In flight, on a fresh connection, and with the pool's connections stuck: each one returns.
            for _ in range(2):
                for call in (client.get(f"/v1/tasks/{task_id}"), client.post(f"/v1/tasks/{task_id}/cancel")):
                    response = await asyncio.wait_for(call, RETURNS_WITHIN)
                    assert_problem(response, 503, "database-unavailable")
            readiness = assert_problem(await client.get("/readyz"), 503, "not-ready")
            assert readiness["unavailable"] == ["database"]

            proxy.flowing.set()
            await eventually(lambda: is_ready(client), what="/readyz after the database answered again")
            assert (await client.get(f"/v1/tasks/{task_id}")).status_code == 200

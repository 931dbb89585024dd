"""The API without its broker or its database: it starts, says it is not ready, refuses with 503, recovers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from pydantic import SecretStr
from yarl import URL

from taskyard_common.settings import AmqpSettings, DbSettings
from tests.integration.api.conftest import IntakeReader, MakeSettings, assert_problem, is_ready, serve
from tests.support.processes import eventually
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
    proxy_to: Callable[[str], Awaitable[TcpProxy]],
    intake: Callable[[], Awaitable[IntakeReader]],
):
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
        assert (await client.get("/v1/tasks")).json()["items"] == []
        metrics = (await client.get("/metrics")).text
        assert 'taskyard_submit_rejected_total{reason="broker_unavailable"}' in metrics

        await proxy.resume()
        await eventually(lambda: is_ready(client), what="/readyz after the broker came back")
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
        assert len(items) == 2  # only the accepted ones: every refused submission was discarded

    reader = await intake()
    announced = {message.task_id for message, _ in await reader.take(2)}
    assert {str(task_id) for task_id in announced} == {item["id"] for item in items}
    await reader.assert_empty()


async def is_refused_readiness(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 503


async def test_without_the_database_the_api_answers_503(
    make_settings: MakeSettings, db_settings: DbSettings, proxy_to: Callable[[str], Awaitable[TcpProxy]]
):
    proxy = await proxy_to(db_settings.url.get_secret_value())
    db = db_settings.model_copy(update={"url": SecretStr(proxied(db_settings.url.get_secret_value(), proxy))})
    async with serve(make_settings(db=db)) as client:
        task_id = (await submit(client)).json()["id"]

        await proxy.stop()
        readiness = assert_problem(await client.get("/readyz"), 503, "not-ready")
        assert readiness["unavailable"] == ["database"]
        for response in (
            await client.get(f"/v1/tasks/{task_id}"),
            await client.get("/v1/tasks"),
            await submit(client),
        ):
            assert_problem(response, 503, "database-unavailable")
            assert response.headers["retry-after"]

        await proxy.resume()
        await eventually(lambda: is_ready(client), what="/readyz after the database came back")
        assert (await client.get(f"/v1/tasks/{task_id}")).status_code == 200


async def test_a_full_intake_queue_refuses_with_503_and_stores_nothing(
    make_settings: MakeSettings, amqp_settings: AmqpSettings
):
    # Same prefix (the fixture deletes these queues afterwards), but room for a single message.
    tiny = amqp_settings.model_copy(update={"max_length": 1})
    async with serve(make_settings(amqp=tiny)) as client:
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
        assert 'taskyard_submit_rejected_total{reason="queue_full"} 1.0' in metrics

"""Helpers of the API suite: build the app against this test's queues and schema, drive it in-process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aio_pika
import httpx
import pytest
from aio_pika.abc import AbstractQueue

from taskyard_api.main import create_app
from taskyard_api.settings import ApiSettings, ServiceSettings
from taskyard_common.messages import IntakeMessage
from taskyard_common.settings import AmqpSettings, CatalogSettings, DbSettings, LogSettings
from taskyard_common.topology import Topology
from tests.support.processes import eventually

BASE_URL = "http://taskyard.test"
PROBLEM = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, slug: str | None = None) -> dict:
    """What every error must be: problem+json with its status and a title, and no traceback in it."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    assert body["title"]
    if slug is not None:
        assert body["type"] == f"https://taskyard.dev/problems/{slug}"
    assert "Traceback" not in response.text
    return body


MakeSettings = Callable[..., ServiceSettings]


@pytest.fixture
def make_settings(amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path) -> MakeSettings:
    """ServiceSettings for this test's queues and schema; keyword arguments override ``ApiSettings``."""

    def make(
        *, amqp: AmqpSettings | None = None, db: DbSettings | None = None, **api: Any
    ) -> ServiceSettings:
        # A slow sweeper unless a test wants one: it must not interfere with what others count.
        api = {"sweeper_interval_seconds": 60.0, "broker_retry_max_seconds": 0.5, **api}
        return ServiceSettings(
            amqp=amqp or amqp_settings,
            db=db or db_settings,
            catalog=CatalogSettings(path=catalog_path),
            log=LogSettings(),
            api=ApiSettings(**api),
        )

    return make


async def is_ready(client: httpx.AsyncClient) -> bool:
    return (await client.get("/readyz")).status_code == 200


@asynccontextmanager
async def serve(settings: ServiceSettings, *, wait_ready: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan and yield a client talking to it in-process."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            if wait_ready:
                await eventually(lambda: is_ready(client), timeout=30, what="/readyz to answer 200")
            yield client


@pytest.fixture
async def client(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(make_settings()) as api:
        yield api


class IntakeReader:
    """Reads the real intake queue, as the broker agent would."""

    def __init__(self, queue: AbstractQueue) -> None:
        self._queue = queue

    async def take(
        self, count: int, *, within: float = 15
    ) -> list[tuple[IntakeMessage, aio_pika.IncomingMessage]]:
        taken: list[tuple[IntakeMessage, aio_pika.IncomingMessage]] = []

        async def got_all() -> bool:
            message = await self._queue.get(no_ack=False, fail=False)
            if message is not None:
                await message.ack()
                taken.append((IntakeMessage.model_validate_json(message.body), message))
            return len(taken) >= count

        await eventually(got_all, timeout=within, what=f"{count} intake message(s)")
        return taken

    async def assert_empty(self) -> None:
        # Publishes are confirmed before the API answers, so anything sent is already in the queue.
        message = await self._queue.get(no_ack=False, fail=False)
        assert message is None, f"unexpected extra intake message: {message.body!r}"


@pytest.fixture
async def intake(
    amqp_settings: AmqpSettings, test_id: str
) -> AsyncIterator[Callable[[], Awaitable[IntakeReader]]]:
    """``await intake()`` once the app declared the topology (i.e. after /readyz answered 200)."""
    connections: list[aio_pika.abc.AbstractConnection] = []

    async def open_reader() -> IntakeReader:
        connection = await aio_pika.connect(
            amqp_settings.url.get_secret_value(), client_properties={"connection_name": f"intake {test_id}"}
        )
        connections.append(connection)
        channel = await connection.channel()
        queue = await channel.get_queue(Topology(amqp_settings.prefix).intake_queue, ensure=True)
        return IntakeReader(queue)

    yield open_reader
    for connection in connections:
        await connection.close()

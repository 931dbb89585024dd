"""Helpers of the API suite: build the app against this test's queues and schema, drive it in-process."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import aio_pika
import httpx
import pytest
from aio_pika.abc import AbstractChannel, AbstractQueue

from taskyard_api.main import create_app
from taskyard_api.settings import ApiSettings, ServiceSettings
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import (
    ControlMessage,
    Envelope,
    IntakeMessage,
    RoutingDecision,
    RoutingMethod,
    WorkMessage,
)
from taskyard_common.settings import AmqpSettings, CatalogSettings, DbSettings, LogSettings
from taskyard_common.store import NewTask, StartOutcome, TaskRecord, TaskStore
from taskyard_common.topology import Topology
from taskyard_common.webhooks import WebhookSettings
from tests.support.polling import eventually

BASE_URL = "http://taskyard.test"
PROBLEM = "application/problem+json"

M = TypeVar("M", bound=Envelope)


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
        *,
        amqp: AmqpSettings | None = None,
        db: DbSettings | None = None,
        webhook: WebhookSettings | None = None,
        **api: Any,
    ) -> ServiceSettings:
        # A slow sweeper unless a test wants one: it must not interfere with what others count.
        api = {
            "sweeper_interval_seconds": 60.0,
            "broker_retry_max_seconds": 0.5,
            "auth_enabled": False,
            **api,
        }
        return ServiceSettings(
            amqp=amqp or amqp_settings,
            db=db or db_settings,
            catalog=CatalogSettings(path=catalog_path),
            log=LogSettings(),
            api=ApiSettings(**api),
            # The defaults, whatever the environment says: private and loopback addresses refused.
            webhook=webhook or WebhookSettings(allow_private=False, allow_loopback=False),
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


class QueueReader(Generic[M]):
    """Reads a real queue, as the service consuming it would."""

    def __init__(self, queue: AbstractQueue, model: type[M]) -> None:
        self._queue = queue
        self._model = model

    async def take(self, count: int, *, within: float = 15) -> list[tuple[M, aio_pika.IncomingMessage]]:
        taken: list[tuple[M, aio_pika.IncomingMessage]] = []

        async def got_all() -> bool:
            message = await self._queue.get(no_ack=False, fail=False)
            if message is not None:
                await message.ack()
                taken.append((self._model.model_validate_json(message.body), message))
            return len(taken) >= count

        await eventually(got_all, timeout=within, what=f"{count} message(s) on {self._queue.name}")
        return taken

    async def assert_empty(self) -> None:
        # Publishes are confirmed before the API answers, so anything sent is already in the queue.
        message = await self._queue.get(no_ack=False, fail=False)
        assert message is None, f"unexpected extra message on {self._queue.name}: {message.body!r}"


IntakeReader = QueueReader[IntakeMessage]


class Bus:
    """This test's own connection to the broker, to read the queues the API publishes to."""

    def __init__(self, channel: AbstractChannel, topology: Topology) -> None:
        self.channel = channel
        self.topology = topology

    async def queue(self, name: str, model: type[M]) -> QueueReader[M]:
        return QueueReader(await self.channel.get_queue(name, ensure=True), model)

    async def intake(self) -> IntakeReader:
        return await self.queue(self.topology.intake_queue, IntakeMessage)

    async def specialist(self, name: str) -> QueueReader[WorkMessage]:
        return await self.queue(self.topology.specialist_queue(name), WorkMessage)

    async def control(self) -> QueueReader[ControlMessage]:
        """A queue of its own on the control fanout, as each worker has."""
        queue = await self.channel.declare_queue(exclusive=True, auto_delete=True)
        await queue.bind(self.topology.control_exchange)
        return QueueReader(queue, ControlMessage)


@pytest.fixture
async def bus(amqp_settings: AmqpSettings, test_id: str) -> AsyncIterator[Callable[[], Awaitable[Bus]]]:
    """``await bus()`` once the app declared the topology (i.e. after /readyz answered 200)."""
    connections: list[aio_pika.abc.AbstractConnection] = []

    async def open_bus() -> Bus:
        connection = await aio_pika.connect(
            amqp_settings.url.get_secret_value(), client_properties={"connection_name": f"bus {test_id}"}
        )
        connections.append(connection)
        return Bus(await connection.channel(), Topology(amqp_settings.prefix))

    yield open_bus
    for connection in connections:
        await connection.close()


@pytest.fixture
def intake(bus: Callable[[], Awaitable[Bus]]) -> Callable[[], Awaitable[IntakeReader]]:
    """``await intake()`` once the app declared the topology (i.e. after /readyz answered 200)."""

    async def open_reader() -> IntakeReader:
        return await (await bus()).intake()

    return open_reader


# Tasks put into a given state through the store, as the broker agent and the workers would.


async def created(store: TaskStore, **fields: Any) -> TaskRecord:
    return await store.create(NewTask(id=uuid.uuid4(), input="do it", metadata={}, **fields))


async def queued(store: TaskStore, specialist: str = "general", **fields: Any) -> TaskRecord:
    task = await created(store, **fields)
    decision = RoutingDecision(method=RoutingMethod.RULES, specialist=specialist, reason="r", confidence=0.5)
    assert await store.route(task.id, decision)
    return task


async def running(
    store: TaskStore, specialist: str = "general", owner: str = "w", **fields: Any
) -> TaskRecord:
    task = await queued(store, specialist, **fields)
    started = await store.start(task.id, owner=owner, lease_seconds=30, attempt=1)
    assert started.outcome is StartOutcome.STARTED and started.record is not None
    return started.record


async def dead_lettered(
    store: TaskStore, specialist: str | None = "general", reason: str = "delivery_limit", **fields: Any
) -> TaskRecord:
    """Dead-lettered from its specialist's queue after running, or from intake when ``specialist`` is None."""
    task = await (running(store, specialist, **fields) if specialist else created(store, **fields))
    queue = f"p.work.{specialist}" if specialist else "p.intake"
    deaths = [{"reason": reason, "queue": queue, "count": 3}]
    assert await store.dead_letter(
        task.id,
        reason=reason,
        queue=queue,
        deaths=deaths,
        message={"task_id": str(task.id)},
        specialist=specialist,
    )
    record = await store.get(task.id)
    assert record is not None and record.status is TaskStatus.DEAD_LETTERED
    return record

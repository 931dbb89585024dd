"""Fixtures of the broker agent's integration tests: the agent in-process, and the test's side of the bus."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractQueue

from taskyard_broker_agent.app import BrokerAgent
from taskyard_broker_agent.settings import BrokerAgentSettings, ServiceSettings
from taskyard_common.amqp import Publisher
from taskyard_common.messages import IntakeMessage, TaskInput, WorkMessage
from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.topology import INTAKE_ROUTING_KEY, Topology
from tests.support.processes import eventually

NO_LLM = LlmSettings(base_url=None, api_key=None)


@pytest.fixture
def make_settings(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path
) -> Callable[..., ServiceSettings]:
    def make(llm: LlmSettings = NO_LLM, **broker: Any) -> ServiceSettings:
        return ServiceSettings(
            amqp=amqp_settings,
            db=db_settings,
            llm=llm,
            catalog=CatalogSettings(path=catalog_path),
            health=HealthSettings(port=0),
            log=LogSettings(),
            broker=BrokerAgentSettings(**{"shutdown_grace_seconds": 5, **broker}),
        )

    return make


@pytest.fixture
def llm_settings(devllm) -> Callable[[str], LlmSettings]:
    def make(model: str) -> LlmSettings:
        return LlmSettings(base_url=devllm.base_url, api_key=None, model=model, routing_timeout_seconds=5)

    return make


@pytest.fixture
def run_agent(
    make_settings: Callable[..., ServiceSettings],
) -> Callable[..., Any]:
    """``async with run_agent(llm=...) as agent:`` runs the broker agent in this process; stopping it lets
    the messages in flight finish, so after the block nothing more is published."""

    @asynccontextmanager
    async def run(**kwargs: Any) -> AsyncIterator[BrokerAgent]:
        async with BrokerAgent(make_settings(**kwargs)) as agent:
            yield agent

    return run


class Bus:
    """The test's side of the broker: sends intake messages, reads the specialist and dead-letter queues."""

    def __init__(self, channel: AbstractChannel, publisher: Publisher, topology: Topology) -> None:
        self.channel = channel
        self.publisher = publisher
        self.topology = topology

    async def send(self, message: IntakeMessage) -> None:
        await self.publisher.publish(self.topology.intake_exchange, INTAKE_ROUTING_KEY, message)

    async def send_raw(self, body: bytes) -> None:
        exchange = await self.channel.get_exchange(self.topology.intake_exchange, ensure=False)
        await exchange.publish(aio_pika.Message(body, message_id="raw"), routing_key=INTAKE_ROUTING_KEY)

    async def queue(self, name: str) -> AbstractQueue:
        return await self.channel.declare_queue(name, passive=True)

    async def wait_body(self, queue_name: str) -> bytes:
        queue = await self.queue(queue_name)
        got: list[bytes] = []

        async def arrived() -> bool:
            message = await queue.get(no_ack=True, fail=False)
            if message is not None:
                got.append(message.body)
            return bool(got)

        await eventually(arrived, timeout=15, what=f"a message on {queue_name}")
        return got[0]

    async def wait_work(self, specialist: str) -> WorkMessage:
        body = await self.wait_body(self.topology.specialist_queue(specialist))
        return WorkMessage.model_validate_json(body)

    async def count(self, queue_name: str) -> int:
        declared = await self.channel.declare_queue(queue_name, passive=True)
        return declared.declaration_result.message_count or 0


@pytest.fixture
async def bus(amqp_settings: AmqpSettings, test_id: str) -> AsyncIterator[Bus]:
    connection = await aio_pika.connect(
        amqp_settings.url.get_secret_value(), client_properties={"connection_name": f"test {test_id}"}
    )
    try:
        channel = await connection.channel()
        publisher = await Publisher.open(connection, amqp_settings)
        yield Bus(channel, publisher, Topology(amqp_settings.prefix))
        await publisher.close()
    finally:
        await connection.close()


@pytest.fixture
def new_task(store: PostgresTaskStore) -> Callable[..., Awaitable[IntakeMessage]]:
    """Creates the task row (as the API does) and returns the intake message announcing it."""

    async def create(
        task_input: TaskInput, *, requested: str | None = None, metadata: dict[str, str] | None = None
    ) -> IntakeMessage:
        task_id = uuid.uuid4()
        await store.create(
            NewTask(id=task_id, input=task_input, metadata=metadata or {}, requested_specialist=requested)
        )
        return IntakeMessage(
            task_id=task_id,
            input=task_input,
            requested_specialist=requested,
            metadata=metadata or {},
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        )

    return create

"""Fixtures of the broker agent's integration tests: the agent in-process, and the test's side of the bus."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import aio_pika
import aiormq
import pytest
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue
from yarl import URL

from taskyard_broker_agent.agent import BrokerAgent
from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.routing.router import Router
from taskyard_broker_agent.settings import (
    BrokerAgentSettings,
    LaneSettings,
    SchedulerSettings,
    ServiceSettings,
)
from taskyard_common.amqp import Publisher
from taskyard_common.announce import destination
from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import LiveCatalog
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import (
    IntakeMessage,
    Priority,
    RoutingDecision,
    RoutingMethod,
    TaskInput,
    WorkMessage,
)
from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_common.store import DEFAULT_TENANT, NewTask, PostgresTaskStore
from taskyard_common.topology import INTAKE_ROUTING_KEY
from taskyard_common.webhooks import WebhookSettings
from tests.support.bus import Bus as SharedBus
from tests.support.polling import eventually
from tests.support.tcp_proxy import TcpProxy

NO_LLM = LlmSettings(base_url=None, api_key=None)


@pytest.fixture
def make_settings(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path
) -> Callable[..., ServiceSettings]:
    def make(
        llm: LlmSettings = NO_LLM,
        amqp: AmqpSettings | None = None,
        db: DbSettings | None = None,
        webhook: WebhookSettings | None = None,
        scheduler: SchedulerSettings | None = None,
        lanes: LaneSettings | None = None,
        **broker: Any,
    ) -> ServiceSettings:
        return ServiceSettings(
            amqp=amqp or amqp_settings,
            db=db or db_settings,
            llm=llm,
            catalog=CatalogSettings(path=catalog_path),
            health=HealthSettings(port=0),
            log=LogSettings(),
            broker=BrokerAgentSettings(**{"shutdown_grace_seconds": 5, **broker}),
            webhook=webhook or WebhookSettings(),
            # A slow scheduler unless a test wants one: it must not take other tests' rounds.
            scheduler=scheduler or SchedulerSettings(interval_seconds=60),
            lanes=lanes or LaneSettings(),
        )

    return make


@pytest.fixture
def make_context(
    make_settings: Callable[..., ServiceSettings], catalog: Catalog, store: PostgresTaskStore, bus: Bus
) -> Callable[..., AgentContext]:
    """``make_context(publisher, **broker)``: what the agent hands its parts, for a part run on its own
    (routing with the rules only)."""

    def make(publisher: Publisher, **broker: Any) -> AgentContext:
        return AgentContext(
            settings=make_settings(**broker),
            live=LiveCatalog.fixed(catalog),
            topology=bus.topology,
            store=store,
            publisher=publisher,
            router=Router.create(catalog, None),
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


class Bus(SharedBus):
    """Sends intake messages, reads the specialist and dead-letter queues."""

    async def send(self, message: IntakeMessage) -> None:
        """Publish an intake message as the API would: to its priority's intake queue."""
        native = self.publisher.native_priorities
        await self.publisher.publish(*destination(self.topology, message, native=native), message)

    async def fill(self, specialist: str, max_length: int) -> int:
        """Fill a specialist queue until the broker refuses a publish (``reject-publish``); returns how many
        messages it holds. A quorum queue's limit is approximate: it may take one more than ``max_length``."""
        channel = await self.connection.channel()  # a confirm channel of its own
        try:
            exchange = await channel.get_exchange(self.topology.tasks_exchange, ensure=False)
            await asyncio.gather(
                *(
                    exchange.publish(aio_pika.Message(b"filler"), routing_key=specialist)
                    for _ in range(max_length)
                )
            )
            held = max_length
            for _ in range(10):
                try:
                    await exchange.publish(aio_pika.Message(b"filler"), routing_key=specialist)
                except aiormq.exceptions.DeliveryError:
                    return held
                held += 1
            raise AssertionError(f"{specialist} still takes messages beyond {held}")
        finally:
            await channel.close()

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

    async def take(self, queue_name: str) -> AbstractIncomingMessage:
        """One message from ``queue_name`` as a worker would hold it: unacked, to settle as the test likes."""
        queue = await self.queue(queue_name)
        got: list[AbstractIncomingMessage] = []

        async def arrived() -> bool:
            message = await queue.get(fail=False)
            if message is not None:
                got.append(message)
            return bool(got)

        await eventually(arrived, timeout=15, what=f"a message on {queue_name}")
        return got[0]

    async def wait_work(self, specialist: str, level: Priority = Priority.NORMAL) -> WorkMessage:
        body = await self.wait_body(self.topology.specialist_queue(specialist, level))
        return WorkMessage.model_validate_json(body)


@pytest.fixture
async def bus(amqp_settings: AmqpSettings, test_id: str) -> AsyncIterator[Bus]:
    async with Bus.open(amqp_settings, test_id) as opened:
        yield opened


@pytest.fixture
def new_task(store: PostgresTaskStore) -> Callable[..., Awaitable[IntakeMessage]]:
    """Creates the task row (as the API does) and returns the intake message announcing it."""

    async def create(
        task_input: TaskInput,
        *,
        requested: str | None = None,
        metadata: dict[str, str] | None = None,
        deadline: datetime | None = None,
        timeout_seconds: float | None = None,
        priority: Priority = Priority.NORMAL,
    ) -> IntakeMessage:
        task_id = uuid.uuid4()
        await store.create(
            NewTask(
                id=task_id,
                input=task_input,
                metadata=metadata or {},
                requested_specialist=requested,
                deadline=deadline,
                timeout_seconds=timeout_seconds,
                priority=priority,
            )
        )
        return IntakeMessage(
            task_id=task_id,
            input=task_input,
            requested_specialist=requested,
            metadata=metadata or {},
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            deadline=deadline,
            timeout_seconds=timeout_seconds,
            priority=priority,
        )

    return create


@pytest.fixture
def routed_task(
    store: PostgresTaskStore, new_task: Callable[..., Awaitable[IntakeMessage]]
) -> Callable[..., Awaitable[WorkMessage]]:
    """A task routed to ``specialist`` (as the broker agent leaves it) and the work message announcing it."""

    async def create(specialist: str = "summarizer", **kwargs: Any) -> WorkMessage:
        intake = await new_task("Please summarize this document", **kwargs)
        decision = RoutingDecision(
            method=RoutingMethod.RULES, specialist=specialist, reason="matched: summarize", confidence=0.7
        )
        assert await store.route(intake.task_id, decision)
        return WorkMessage(
            task_id=intake.task_id,
            specialist=specialist,
            input=intake.input,
            routing=decision,
            tenant=DEFAULT_TENANT,
            deadline=intake.deadline,
            timeout_seconds=intake.timeout_seconds,
        )

    return create


def status_is(
    store: PostgresTaskStore, task_id: uuid.UUID, status: TaskStatus
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        task = await store.get(task_id)
        return task is not None and task.status is status

    return check


@pytest.fixture
async def tcp_proxy() -> AsyncIterator[Callable[[str], Awaitable[tuple[TcpProxy, str]]]]:
    """``proxy, url = await tcp_proxy(url)``: a TCP proxy in front of the service at ``url`` and the same
    URL pointing at the proxy; ``proxy.stop()`` cuts every connection through it, ``proxy.resume()``
    accepts again."""
    proxies: list[TcpProxy] = []

    async def make(url: str) -> tuple[TcpProxy, str]:
        target = URL(url)
        proxy = TcpProxy(target.host or "127.0.0.1", target.explicit_port or target.port or 0)
        await proxy.start()
        proxies.append(proxy)
        return proxy, str(target.with_host("127.0.0.1").with_port(proxy.port))

    yield make
    for proxy in proxies:
        await proxy.close()

"""The broker agent process: resources opened once at start, the intake and dead-letter consumers, the
lease reaper, a graceful SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType

import aiormq
from aio_pika.abc import AbstractChannel, AbstractQueue, AbstractRobustConnection
from pydantic import ValidationError

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.dead_letters.consumer import DeadLetterConsumer
from taskyard_broker_agent.inflight import InFlight
from taskyard_broker_agent.intake import IntakeHandler
from taskyard_broker_agent.queue_metrics import QueueMetrics
from taskyard_broker_agent.reaper import Reaper
from taskyard_broker_agent.routing.router import Router
from taskyard_broker_agent.settings import ServiceSettings, get_settings
from taskyard_common import metrics
from taskyard_common.amqp import Publisher, connect, consume, server_version
from taskyard_common.catalog import Catalog, CatalogError, load_catalog
from taskyard_common.errors import TaskyardError
from taskyard_common.health import HealthServer
from taskyard_common.logging import configure_logging
from taskyard_common.messages import IntakeMessage
from taskyard_common.settings import HealthSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.topology import Topology, dead_letter_queue_arguments, declare

SERVICE = "taskyard-broker-agent"
# /readyz must answer quickly even when the database hangs.
_READY_TIMEOUT_SECONDS = 2.0

log = logging.getLogger(__name__)


@dataclass
class Resources:
    """Everything the process holds open; ``aclose`` releases it in reverse order of opening."""

    settings: ServiceSettings
    catalog: Catalog
    topology: Topology
    store: PostgresTaskStore
    router: Router
    connection: AbstractRobustConnection
    channel: AbstractChannel
    intake_queue: AbstractQueue
    dead_letter_channel: AbstractChannel
    dead_letter_queue: AbstractQueue
    publisher: Publisher
    health: HealthServer
    # More conditions of readiness, added by the agent once its parts run (the reaper).
    ready_checks: list[Callable[[], bool]]
    _ready: Callable[[], Awaitable[bool]]
    _stack: AsyncExitStack

    @classmethod
    async def open(cls, settings: ServiceSettings) -> Resources:
        catalog = load_catalog(settings.catalog.path)
        topology = Topology(settings.amqp.prefix)
        async with AsyncExitStack() as stack:
            store = await PostgresTaskStore.open(settings.db)
            stack.push_async_callback(store.close)
            router = Router.create(
                catalog,
                settings.llm if settings.llm_routing_enabled else None,
                min_confidence=settings.broker.min_confidence,
                max_request_chars=settings.broker.max_request_chars,
                cache_size=settings.broker.cache_size,
                cache_ttl_seconds=settings.broker.cache_ttl_seconds,
            )
            stack.push_async_callback(router.close)
            connection = await connect(settings.amqp, name=SERVICE)
            stack.push_async_callback(connection.close)
            log.info("connected to RabbitMQ %s", ".".join(map(str, server_version(connection))))
            # The consuming channel; its prefetch bounds the intake messages in flight in this process.
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=settings.broker.prefetch)
            declared = await declare(channel, topology, catalog.names, settings.amqp)
            # Dead letters on a channel of their own: their prefetch is independent of the intake's.
            dead_letter_channel = await connection.channel()
            await dead_letter_channel.set_qos(prefetch_count=settings.broker.dead_letter_prefetch)
            dead_letter_queue = await dead_letter_channel.declare_queue(
                topology.dead_letter_queue, durable=True, arguments=dead_letter_queue_arguments()
            )
            publisher = await Publisher.open(connection, settings.amqp)
            stack.push_async_callback(publisher.close)
            checks: list[Callable[[], bool]] = []

            async def ready() -> bool:
                if connection.is_closed or channel.is_closed or dead_letter_channel.is_closed:
                    return False
                if not all(check() for check in checks):
                    return False
                async with asyncio.timeout(_READY_TIMEOUT_SECONDS):
                    await store.ping()
                return True

            health = HealthServer(settings.health, ready=ready)
            await health.start()
            stack.push_async_callback(health.close)
            resources = cls(
                settings,
                catalog,
                topology,
                store,
                router,
                connection,
                channel,
                declared.queues[topology.intake_queue],
                dead_letter_channel,
                dead_letter_queue,
                publisher,
                health,
                checks,
                ready,
                stack.pop_all(),
            )
        return resources

    async def ready(self) -> bool:
        """What ``/readyz`` answers: broker channels open, reaper running, database answering."""
        try:
            return await self._ready()
        except Exception:
            return False

    async def aclose(self) -> None:
        await self._stack.aclose()


class BrokerAgent:
    """Consumes the intake and dead-letter queues and reaps expired leases until stopped.
    ``async with BrokerAgent(settings):`` runs it in-process."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.resources: Resources | None = None
        self.reaper: Reaper | None = None
        self._queue_metrics: QueueMetrics | None = None
        self._inflight = InFlight("intake message")
        self._dead_letters_inflight = InFlight("dead letter")
        self._consumer_tag: str | None = None
        self._dead_letter_tag: str | None = None

    @property
    def in_flight(self) -> int:
        """Intake messages being handled right now (their settlement included)."""
        return len(self._inflight)

    async def start(self) -> None:
        self.resources = resources = await Resources.open(self.settings)
        try:
            metrics.init_broker_labels(resources.catalog.names)
            if resources.router.uses_llm:
                metrics.init_llm_labels(self.settings.llm.model)
            context = AgentContext(
                settings=self.settings,
                catalog=resources.catalog,
                topology=resources.topology,
                store=resources.store,
                publisher=resources.publisher,
                router=resources.router,
            )
            handler = IntakeHandler(context)
            dead_letters = DeadLetterConsumer(context)
            self.reaper = reaper = Reaper(context)
            reaper.start()
            resources.ready_checks.append(lambda: reaper.running)
            self._queue_metrics = QueueMetrics(context, resources.connection)
            self._queue_metrics.start()
            self._dead_letter_tag = await resources.dead_letter_queue.consume(
                self._dead_letters_inflight.track(dead_letters.on_message)
            )
            self._consumer_tag = await consume(
                resources.intake_queue, IntakeMessage, self._inflight.track(handler)
            )
        except BaseException:
            self.resources = None
            if self._queue_metrics is not None:
                await self._queue_metrics.stop()
                self._queue_metrics = None
            if self.reaper is not None:
                await self.reaper.stop(0)
                self.reaper = None
            await resources.aclose()
            raise
        log.info(
            "consuming %s (prefetch %d, routing with %s) and %s; reaping expired leases every %.1f s",
            resources.intake_queue.name,
            self.settings.broker.prefetch,
            f"LLM {self.settings.llm.model}" if resources.router.uses_llm else "rules only",
            resources.dead_letter_queue.name,
            self.settings.broker.reaper_interval_seconds,
        )

    async def ready(self) -> bool:
        return self.resources is not None and await self.resources.ready()

    async def stop(self) -> None:
        """Stop taking messages, let those in flight and the reaper's round finish (bounded), then close
        everything."""
        resources, self.resources = self.resources, None
        if resources is None:
            return
        grace = self.settings.broker.shutdown_grace_seconds
        if self._queue_metrics is not None:
            await self._queue_metrics.stop()
            self._queue_metrics = None
        try:
            for queue, tag in (
                (resources.intake_queue, self._consumer_tag),
                (resources.dead_letter_queue, self._dead_letter_tag),
            ):
                if tag is not None:
                    with contextlib.suppress(RuntimeError, aiormq.exceptions.AMQPError):
                        await queue.cancel(tag)
            await asyncio.gather(
                self._inflight.drain(grace),
                self._dead_letters_inflight.drain(grace),
                self.reaper.stop(grace) if self.reaper is not None else asyncio.sleep(0),
            )
        finally:
            await resources.aclose()
        log.info("stopped")

    async def __aenter__(self) -> BrokerAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def serve(settings: ServiceSettings) -> None:
    """Run until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with BrokerAgent(settings):
        await stop.wait()
        log.info("stopping: consumer cancelled, finishing messages in flight")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog=SERVICE,
        description="Route new taskyard tasks from the intake queue to specialist queues "
        "(explicit request, else the LLM, else the rules router). Configured by TASKYARD_* variables.",
    )
    parser.add_argument("--health-port", type=int, help="port of /healthz, /readyz, /metrics (0: off)")
    args = parser.parse_args(argv)
    try:
        settings = get_settings()
        if args.health_port is not None:
            health = HealthSettings(host=settings.health.host, port=args.health_port)
            settings = settings.model_copy(update={"health": health})
    except ValidationError as exc:
        print(f"{SERVICE}: invalid configuration:\n{exc}", file=sys.stderr)
        sys.exit(2)
    configure_logging(settings.log, SERVICE)
    try:
        asyncio.run(serve(settings))
    except (CatalogError, TaskyardError, OSError) as exc:
        # Startup failures (no database or broker, a conflicting queue, a bad catalog, a busy port): one line.
        log.error("cannot run: %s", exc)
        sys.exit(1)


if __name__ == "__main__":
    main()

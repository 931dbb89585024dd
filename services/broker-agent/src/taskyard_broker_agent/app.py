"""The broker agent process: resources opened once at start, the intake consumer, a graceful SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from contextlib import AsyncExitStack
from dataclasses import dataclass
from types import TracebackType

import aiormq
from aio_pika.abc import AbstractChannel, AbstractQueue, AbstractRobustConnection
from pydantic import ValidationError

from taskyard_broker_agent.inflight import InFlight
from taskyard_broker_agent.intake import IntakeHandler
from taskyard_broker_agent.router import Router
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
from taskyard_common.topology import Topology, declare

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
    publisher: Publisher
    health: HealthServer
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
            )
            stack.push_async_callback(router.close)
            connection = await connect(settings.amqp, name=SERVICE)
            stack.push_async_callback(connection.close)
            log.info("connected to RabbitMQ %s", ".".join(map(str, server_version(connection))))
            # The consuming channel; its prefetch bounds the intake messages in flight in this process.
            channel = await connection.channel()
            await channel.set_qos(prefetch_count=settings.broker.prefetch)
            declared = await declare(channel, topology, catalog.names, settings.amqp)
            publisher = await Publisher.open(connection, settings.amqp)
            stack.push_async_callback(publisher.close)

            async def ready() -> bool:
                if connection.is_closed or channel.is_closed:
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
                publisher,
                health,
                stack.pop_all(),
            )
        return resources

    async def aclose(self) -> None:
        await self._stack.aclose()


class BrokerAgent:
    """Consumes the intake queue until stopped. ``async with BrokerAgent(settings):`` runs it in-process."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.resources: Resources | None = None
        self._inflight = InFlight()
        self._consumer_tag: str | None = None

    @property
    def in_flight(self) -> int:
        """Intake messages being handled right now (their settlement included)."""
        return len(self._inflight)

    async def start(self) -> None:
        self.resources = resources = await Resources.open(self.settings)
        try:
            metrics.init_broker_labels(resources.catalog.names)
            handler = IntakeHandler(
                resources.catalog,
                resources.store,
                resources.publisher,
                resources.router,
                resources.topology,
                retry_base_seconds=self.settings.broker.retry_base_seconds,
                retry_max_seconds=self.settings.broker.retry_max_seconds,
            )
            self._consumer_tag = await consume(
                resources.intake_queue, IntakeMessage, self._inflight.track(handler)
            )
        except BaseException:
            self.resources = None
            await resources.aclose()
            raise
        log.info(
            "consuming %s (prefetch %d, routing with %s)",
            resources.intake_queue.name,
            self.settings.broker.prefetch,
            f"LLM {self.settings.llm.model}" if resources.router.uses_llm else "rules only",
        )

    async def stop(self) -> None:
        """Stop taking messages, let those in flight finish (bounded), then close everything."""
        resources, self.resources = self.resources, None
        if resources is None:
            return
        try:
            if self._consumer_tag is not None:
                with contextlib.suppress(RuntimeError, aiormq.exceptions.AMQPError):
                    await resources.intake_queue.cancel(self._consumer_tag)
            await self._inflight.drain(self.settings.broker.shutdown_grace_seconds)
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

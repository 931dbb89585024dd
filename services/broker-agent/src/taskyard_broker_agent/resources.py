"""Everything the broker agent process holds open: opened once at start, closed once, in reverse order.

The catalog is read before anything connects, so a bad catalog fails at once (exit 2, see ``main``)
instead of after connecting to the database and the broker; it is then followed (``live``) while the
agent runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from aio_pika.abc import AbstractChannel, AbstractQueue, AbstractRobustConnection

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.routing.router import Router
from taskyard_broker_agent.settings import ServiceSettings
from taskyard_broker_agent.webhooks.outbox import Outbox
from taskyard_common.amqp import Publisher, connect
from taskyard_common.broker_version import server_version
from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import LiveCatalog, open_live_catalog
from taskyard_common.event_bus import EventNotifier
from taskyard_common.follow_up_announcer import FollowUpAnnouncer
from taskyard_common.health import HealthServer, ReadyCheck
from taskyard_common.llm_limits import LlmLimits
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.rate_limits import RateLimitStore
from taskyard_common.store.retention import RetentionStore
from taskyard_common.store.schedules import ScheduleStore
from taskyard_common.store.webhook_secrets import WebhookSecretStore
from taskyard_common.topology import Topology, dead_letter_queue_arguments, declare

SERVICE = "taskyard-broker-agent"
# /readyz must answer quickly even when the database hangs.
_READY_TIMEOUT_SECONDS = 2.0

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Resources:
    settings: ServiceSettings
    live: LiveCatalog
    topology: Topology
    store: PostgresTaskStore
    router: Router
    connection: AbstractRobustConnection
    # The intake consumers' channel, one consumer per priority level's queue (highest first), each with a
    # prefetch of twice ``prefetch``; the agent's weighted slots bound the messages handled at once.
    intake_channel: AbstractChannel
    intake_queues: tuple[AbstractQueue, ...]
    # Dead letters on a channel of their own: their prefetch is independent of the intake's.
    dead_letter_channel: AbstractChannel
    dead_letter_queue: AbstractQueue
    publisher: Publisher
    health: HealthServer
    # The webhook outbox and the tenants' signing secrets, on the task store's pool.
    outbox: Outbox
    webhook_secrets: WebhookSecretStore
    # The cron schedules, on the task store's pool.
    schedules: ScheduleStore
    # Removing finished tasks past their retention, on the task store's pool.
    retention: RetentionStore

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: ServiceSettings, *, ready: ReadyCheck) -> AsyncIterator[Resources]:
        """Open everything, yield it, close it in reverse order. ``ready`` answers ``/readyz``."""
        topology = Topology(settings.amqp.prefix)
        async with AsyncExitStack() as stack:
            live = await stack.enter_async_context(
                open_live_catalog(settings.catalog, settings.db, sighup=True)
            )
            catalog = live.catalog
            store = await PostgresTaskStore.open(settings.db)
            stack.push_async_callback(store.close)
            router = Router.create(
                catalog,
                settings.llm if settings.llm_routing_enabled else None,
                min_confidence=settings.broker.min_confidence,
                evidence_floor=settings.broker.evidence_floor,
                max_request_chars=settings.broker.max_request_chars,
                cache_size=settings.broker.cache_size,
                cache_ttl_seconds=settings.broker.cache_ttl_seconds,
                # The router's calls count against its model's fleet-wide limits too.
                limits=LlmLimits(
                    RateLimitStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                    catalog.model_table,
                ),
            )
            stack.push_async_callback(router.close)
            connection = await connect(settings.amqp, name=SERVICE)
            stack.push_async_callback(connection.close)
            log.info("connected to RabbitMQ %s", ".".join(map(str, server_version(connection))))
            intake_channel = await connection.channel()
            await intake_channel.set_qos(prefetch_count=2 * settings.broker.prefetch)
            declared = await declare(intake_channel, topology, catalog.names, settings.amqp)
            dead_letter_channel = await connection.channel()
            await dead_letter_channel.set_qos(prefetch_count=settings.broker.dead_letter_prefetch)
            dead_letter_queue = await dead_letter_channel.declare_queue(
                topology.dead_letter_queue,
                durable=True,
                arguments=dead_letter_queue_arguments(server_version(connection)),
            )
            publisher = await Publisher.open(connection, settings.amqp)
            stack.push_async_callback(publisher.close)
            # Every routing, reclaim and dead letter recorded here wakes whoever watches the task.
            notifier = await EventNotifier.open(await connection.channel(), topology.events_exchange)
            stack.push_async_callback(notifier.close)
            store.on_change = notifier.notify
            # A task the agent ends (routing failed, dead-lettered) may resume a waiting parent or settle a
            # group; the reaper's rounds settle groups too.
            follow_ups = FollowUpAnnouncer(lambda: publisher, topology, store)
            stack.push_async_callback(follow_ups.close)
            store.on_follow_up = follow_ups
            health = HealthServer(settings.health, ready=ready)
            await health.start()
            stack.push_async_callback(health.close)
            yield cls(
                settings=settings,
                live=live,
                topology=topology,
                store=store,
                router=router,
                connection=connection,
                intake_channel=intake_channel,
                intake_queues=tuple(declared.queues[name] for name in topology.intake_queues()),
                dead_letter_channel=dead_letter_channel,
                dead_letter_queue=dead_letter_queue,
                publisher=publisher,
                health=health,
                outbox=Outbox(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                webhook_secrets=WebhookSecretStore(
                    store.pool, acquire_timeout=settings.db.command_timeout_seconds
                ),
                schedules=ScheduleStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                retention=RetentionStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
            )

    @property
    def catalog(self) -> Catalog:
        return self.live.catalog

    def context(self) -> AgentContext:
        """What the agent's parts work with."""
        return AgentContext(
            settings=self.settings,
            live=self.live,
            topology=self.topology,
            store=self.store,
            publisher=self.publisher,
            router=self.router,
        )

    async def reachable(self) -> bool:
        """The broker connection and both consuming channels open, and the database answering in time."""
        if self.connection.is_closed or self.intake_channel.is_closed or self.dead_letter_channel.is_closed:
            return False
        try:
            async with asyncio.timeout(_READY_TIMEOUT_SECONDS):
                await self.store.ping()
        except Exception:
            return False
        return True

"""The broker agent: the intake and dead-letter consumers, the lease reaper, the queue sampler, the parked
tasks' feeder, the webhook dispatcher, the cron schedules' scheduler and the retention loop, on the resources of one process; a
graceful stop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from contextlib import AsyncExitStack
from types import TracebackType

import aiormq
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue

from taskyard_broker_agent.dead_letters.consumer import DeadLetterConsumer
from taskyard_broker_agent.fleet import FleetCounter
from taskyard_broker_agent.inflight import InFlight
from taskyard_broker_agent.intake.handler import IntakeHandler
from taskyard_broker_agent.lanes import Feeder, Lanes
from taskyard_broker_agent.queue_metrics import QueueMetrics
from taskyard_broker_agent.reaper import Reaper
from taskyard_broker_agent.resources import Resources
from taskyard_broker_agent.retention import Retention
from taskyard_broker_agent.scheduling.scheduler import Scheduler
from taskyard_broker_agent.settings import ServiceSettings
from taskyard_broker_agent.webhooks.dispatcher import Dispatcher
from taskyard_common import metrics
from taskyard_common.amqp import consume
from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import diff
from taskyard_common.messages import IntakeMessage
from taskyard_common.slots import WeightedSlots
from taskyard_common.topology import declare_specialist

log = logging.getLogger(__name__)


class BrokerAgent:
    """Consumes the intake and dead-letter queues, reaps expired leases and delivers webhooks until stopped.
    ``async with BrokerAgent(settings):`` runs it in-process."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.resources: Resources | None = None
        self.reaper: Reaper | None = None
        self.webhooks: Dispatcher | None = None
        self.scheduler: Scheduler | None = None
        self.retention: Retention | None = None
        self.feeder: Feeder | None = None
        self._queue_metrics: QueueMetrics | None = None
        self.fleet: FleetCounter | None = None
        self.lanes: Lanes | None = None
        self._intake_inflight = InFlight("intake message")
        self._dead_letter_inflight = InFlight("dead letter")
        self._consumers: list[tuple[AbstractQueue, str]] = []
        self._closing: AsyncExitStack | None = None

    @property
    def in_flight(self) -> int:
        """Intake messages being handled right now (their settlement included)."""
        return len(self._intake_inflight)

    async def start(self) -> None:
        closing = AsyncExitStack()
        resources = await closing.enter_async_context(Resources.open(self.settings, ready=self.ready))
        self.resources = resources
        try:
            await self._start_parts(resources)
        except BaseException:
            self.resources = None
            try:
                await self._stop_parts(grace_seconds=0)
            finally:
                await closing.aclose()
            raise
        self._closing = closing
        log.info(
            "consuming %s (prefetch %d, routing with %s) and %s; reaping expired leases every %.1f s",
            [queue.name for queue in resources.intake_queues],
            self.settings.broker.prefetch,
            f"LLM {self.settings.llm.model}" if resources.router.uses_llm else "rules only",
            resources.dead_letter_queue.name,
            self.settings.broker.reaper_interval_seconds,
        )

    async def _catalog_changed(self, old: Catalog, new: Catalog) -> None:
        """Before a new catalog takes effect: its new specialists' queues declared (so that nothing is
        routed to a queue that does not exist), the router rebuilt (prompt, rules, guard, an empty cache),
        the metric labels and sampled queues extended. A removed specialist's queues stay (they may hold
        tasks; the operator deletes them when asked)."""
        resources = self.resources
        if resources is None:
            return
        added = diff(old, new).added
        if added:
            channel = await resources.connection.channel()
            try:
                for name in added:
                    await declare_specialist(channel, resources.topology, name, self.settings.amqp)
            finally:
                if not channel.is_closed:
                    await channel.close()
        resources.router.use_catalog(new)
        metrics.init_broker_labels(new.names)
        if self._queue_metrics is not None:
            self._queue_metrics.use_names(new.names)

    async def _start_parts(self, resources: Resources) -> None:
        metrics.init_broker_labels(resources.catalog.names)
        resources.live.on_change(self._catalog_changed)
        if resources.router.uses_llm:
            metrics.init_llm_labels(self.settings.llm.model)
        context = resources.context()
        self.lanes = lanes = Lanes(context, self.settings.lanes)
        intake = IntakeHandler(context, lanes)
        dead_letters = DeadLetterConsumer(context)
        self.reaper = Reaper(context)
        self.reaper.start()
        self._queue_metrics = QueueMetrics(context, resources.connection)
        self._queue_metrics.start()
        self.fleet = FleetCounter(context, resources.connection, lanes, self.settings.lanes.fleet_seconds)
        self.fleet.start()
        self.feeder = Feeder(context, lanes, self.settings.lanes)
        self.feeder.start()
        self.webhooks = Dispatcher(resources.outbox, resources.webhook_secrets, self.settings.webhook)
        self.webhooks.start()
        if self.settings.scheduler.enabled:
            self.scheduler = Scheduler(context, resources.schedules)
            self.scheduler.start()
        if self.settings.retention.enabled:
            self.retention = Retention(resources.retention, self.settings.retention)
            self.retention.start()
        tag = await resources.dead_letter_queue.consume(
            self._dead_letter_inflight.track(dead_letters.on_message)
        )
        self._consumers.append((resources.dead_letter_queue, tag))
        # Every level's intake queue, under one limit of ``prefetch`` messages handled at once, granted by
        # weighted selection between the levels (taskyard_common.slots).
        slots = WeightedSlots(self.settings.broker.prefetch)

        async def gated(message: IntakeMessage, incoming: AbstractIncomingMessage) -> None:
            async with slots.slot(message.priority):
                await intake(message, incoming)

        for queue in resources.intake_queues:
            tag = await consume(queue, IntakeMessage, self._intake_inflight.track(gated))
            self._consumers.append((queue, tag))

    async def ready(self) -> bool:
        """What ``/readyz`` answers: the reaper's, the dispatcher's and (when enabled) the scheduler's loops
        running (and the retention loop, when enabled), the broker channels open, the database answering."""
        resources, reaper, webhooks = self.resources, self.reaper, self.webhooks
        if resources is None or reaper is None or not reaper.running:
            return False
        if webhooks is None or not webhooks.running:
            return False
        if self.feeder is None or not self.feeder.running:
            return False
        if self.settings.scheduler.enabled and (self.scheduler is None or not self.scheduler.running):
            return False
        if self.settings.retention.enabled and (self.retention is None or not self.retention.running):
            return False
        return await resources.reachable()

    async def stop(self) -> None:
        """Stop taking messages, let those in flight and the reaper's round finish (bounded), then close
        everything."""
        closing, self._closing = self._closing, None
        if closing is None:
            return
        self.resources = None
        try:
            await self._stop_parts(self.settings.broker.shutdown_grace_seconds)
        finally:
            await closing.aclose()
        log.info("stopped")

    async def _stop_parts(self, grace_seconds: float) -> None:
        queue_metrics, self._queue_metrics = self._queue_metrics, None
        if queue_metrics is not None:
            await queue_metrics.stop()
        fleet, self.fleet = self.fleet, None
        if fleet is not None:
            await fleet.stop()
        consumers, self._consumers = self._consumers, []
        for queue, tag in consumers:
            # The channel may be gone already (a broker outage): its consumer went with it.
            with contextlib.suppress(RuntimeError, aiormq.exceptions.AMQPError):
                await queue.cancel(tag)
        reaper, self.reaper = self.reaper, None
        webhooks, self.webhooks = self.webhooks, None
        scheduler, self.scheduler = self.scheduler, None
        retention, self.retention = self.retention, None
        feeder, self.feeder = self.feeder, None
        await asyncio.gather(
            feeder.stop(grace_seconds) if feeder is not None else asyncio.sleep(0),
            self._intake_inflight.drain(grace_seconds),
            self._dead_letter_inflight.drain(grace_seconds),
            reaper.stop(grace_seconds) if reaper is not None else asyncio.sleep(0),
            webhooks.stop(grace_seconds) if webhooks is not None else asyncio.sleep(0),
            scheduler.stop(grace_seconds) if scheduler is not None else asyncio.sleep(0),
            retention.stop(grace_seconds) if retention is not None else asyncio.sleep(0),
        )

    async def __aenter__(self) -> BrokerAgent:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

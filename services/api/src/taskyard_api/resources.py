"""Everything the API holds open: opened once at start, closed in reverse order when it stops.

A broken catalog or an unreachable database stops the start (the orchestrator retries); an unreachable
RabbitMQ does not: the API serves reads and answers 503 to submissions meanwhile. The catalog is followed
(``live``) while the API runs: what it checks submissions against and lists is always the current one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from taskyard_api.bus import BusLink
from taskyard_api.settings import ServiceSettings
from taskyard_api.submission.budget import BudgetGate
from taskyard_api.submission.inserts import TaskInserter
from taskyard_api.submission.published import PublishedMarker
from taskyard_api.submission.sweeper import Sweeper
from taskyard_api.submission.token_batches import BatchedBuckets
from taskyard_api.tenancy.key_cache import CachedKeys
from taskyard_api.tenancy.read_limit import ReadLimiter
from taskyard_api.watching.watcher import Watcher
from taskyard_api.webhooks.deliveries import WebhookDeliveries
from taskyard_common import metrics
from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import LiveCatalog, open_live_catalog
from taskyard_common.follow_up_announcer import FollowUpAnnouncer
from taskyard_common.store import PostgresTaskStore, TaskStore
from taskyard_common.store.budgets import BudgetStore
from taskyard_common.store.keys import KeyStore
from taskyard_common.store.rate_limits import RateLimitStore
from taskyard_common.store.retention import TABLES, RetentionStore
from taskyard_common.store.schedules import ScheduleStore
from taskyard_common.store.spend import SpendStore
from taskyard_common.store.tenant_limits import TenantLimitStore
from taskyard_common.topology import Topology


@dataclass(frozen=True, kw_only=True)
class Resources:
    settings: ServiceSettings
    live: LiveCatalog
    topology: Topology
    store: TaskStore
    bus: BusLink
    # Share the task store's connection pool (closed with it).
    keys: CachedKeys
    limits: BatchedBuckets
    # Reads per tenant, in this process.
    reads: ReadLimiter
    # Marks confirmed submissions published, in batches.
    published: PublishedMarker
    # Stores concurrent submissions together.
    inserts: TaskInserter
    # The webhook outbox, on the task store's pool.
    deliveries: WebhookDeliveries
    # Wakes the event streams and long-polls of a task when it changes.
    watcher: Watcher
    # The cron schedules, on the task store's pool.
    schedules: ScheduleStore
    # Deleting finished tasks with everything attached, on the task store's pool.
    retention: RetentionStore
    # The tenants' limits (max_running), on the task store's pool.
    tenant_limits: TenantLimitStore
    # What the tenants' tasks spent on LLM calls, their budgets and the monthly one's check, on the task
    # store's pool.
    spend: SpendStore
    budgets: BudgetStore
    budget_gate: BudgetGate
    # The shared token buckets (the models' fleet-wide LLM limits are read from them).
    rate_limits: RateLimitStore

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: ServiceSettings) -> AsyncIterator[Resources]:
        """Open everything and start the background rounds; on exit, close them in reverse order (the
        exit stack's callbacks run last-in first-out, also when opening failed half-way)."""
        # DELETE /v1/tasks/{id} and /v1/tenant/tasks count the rows they remove.
        metrics.init_store_labels(TABLES)
        topology = Topology(settings.amqp.prefix)
        async with AsyncExitStack() as stack:
            live = await stack.enter_async_context(
                open_live_catalog(settings.catalog, settings.db, sighup=True)
            )
            catalog = live.catalog
            store = await PostgresTaskStore.open(settings.db)
            stack.push_async_callback(store.close)
            # Closed after the sweeper, before the store: its last flush marks what the final requests
            # queued.
            published = PublishedMarker(store, flush_interval=settings.api.published_flush_seconds)
            stack.push_async_callback(published.close)
            published.start()
            inserts = TaskInserter(store)
            stack.push_async_callback(inserts.close)
            bus = BusLink(
                settings.amqp,
                topology,
                catalog.names,
                retry_max_seconds=settings.api.broker_retry_max_seconds,
            )
            stack.push_async_callback(bus.close)
            bus.start()
            # What the API changes (a submission, a cancel, a replay) wakes whoever watches the task.
            store.on_change = bus.notify
            # Closed before the bus link and the store it uses; closing ends every stream and long-poll.
            watcher = Watcher(
                store, bus, topology.events_exchange, poll_seconds=settings.api.watch_poll_seconds
            )
            stack.push_async_callback(watcher.close)
            watcher.start()
            # A cancel may settle a group (announce nothing while the broker is away: the sweeper does).
            follow_ups = FollowUpAnnouncer(lambda: bus.publisher, topology, store)
            stack.push_async_callback(follow_ups.close)
            store.on_follow_up = follow_ups
            sweeper = Sweeper(
                store,
                bus,
                topology,
                interval_seconds=settings.api.sweeper_interval_seconds,
                grace_seconds=settings.api.sweeper_grace_seconds,
                idempotency_retention_seconds=settings.api.idempotency_retention_seconds,
            )
            # Closed first: it uses the bus link and the store.
            stack.push_async_callback(sweeper.close)
            sweeper.start()
            timeout = settings.db.command_timeout_seconds
            spend = SpendStore(store.pool, acquire_timeout=timeout)
            budgets = BudgetStore(store.pool, acquire_timeout=timeout)
            yield cls(
                settings=settings,
                live=live,
                topology=topology,
                store=store,
                bus=bus,
                # Bounded like every other store: a silent database must not hang authentication.
                keys=CachedKeys(
                    KeyStore(store.pool, acquire_timeout=timeout), ttl_seconds=settings.api.auth_cache_seconds
                ),
                limits=BatchedBuckets(RateLimitStore(store.pool, acquire_timeout=timeout)),
                reads=ReadLimiter(
                    per_second=settings.api.read_rate_limit_per_second,
                    burst=settings.api.read_rate_limit_burst,
                ),
                published=published,
                inserts=inserts,
                deliveries=WebhookDeliveries(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                watcher=watcher,
                schedules=ScheduleStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                retention=RetentionStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                tenant_limits=TenantLimitStore(
                    store.pool, acquire_timeout=settings.db.command_timeout_seconds
                ),
                spend=spend,
                budgets=budgets,
                budget_gate=BudgetGate(budgets, spend, ttl_seconds=settings.api.auth_cache_seconds),
                rate_limits=RateLimitStore(store.pool, acquire_timeout=timeout),
            )

    @property
    def catalog(self) -> Catalog:
        """The catalog now (it follows its source)."""
        return self.live.catalog

"""Everything the API holds open, created once at start and closed in ``finally``."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from fastapi import FastAPI

from taskyard_api.bus import BusLink
from taskyard_api.settings import ServiceSettings
from taskyard_api.submission.inserts import TaskInserter
from taskyard_api.submission.published import PublishedMarker
from taskyard_api.submission.sweeper import Sweeper
from taskyard_api.submission.token_batches import BatchedBuckets
from taskyard_api.tenancy.key_cache import CachedKeys
from taskyard_common.catalog import Catalog, CatalogError, load_catalog
from taskyard_common.errors import StoreUnavailable
from taskyard_common.metrics import SUBMIT_REJECTED
from taskyard_common.store import PostgresTaskStore, TaskStore
from taskyard_common.store.keys import KeyStore
from taskyard_common.store.rate_limits import RateLimitStore
from taskyard_common.topology import Topology

log = logging.getLogger(__name__)

# Why a submission was refused: the bounded label set of ``taskyard_submit_rejected_total``.
REJECT_REASONS = ("broker_unavailable", "queue_full", "unroutable", "database_unavailable")


@dataclass(frozen=True)
class Resources:
    settings: ServiceSettings
    catalog: Catalog
    topology: Topology
    store: TaskStore
    bus: BusLink
    # Share the task store's connection pool (closed with it).
    keys: CachedKeys
    limits: BatchedBuckets
    # Marks confirmed submissions published, in batches.
    published: PublishedMarker
    # Stores concurrent submissions together.
    inserts: TaskInserter


def make_lifespan(settings: ServiceSettings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A broken catalog or an unreachable database stops the start (the orchestrator retries);
        # an unreachable RabbitMQ does not: the API serves reads and answers 503 to submissions meanwhile.
        topology = Topology(settings.amqp.prefix)
        for reason in REJECT_REASONS:
            SUBMIT_REJECTED.labels(reason)
        async with contextlib.AsyncExitStack() as stack:
            try:
                catalog = load_catalog(settings.catalog.path)
                store = await PostgresTaskStore.open(settings.db)
            except (CatalogError, StoreUnavailable) as exc:
                # One readable line before the server's traceback; neither message holds a URL or secret.
                log.error("cannot start: %s", exc)
                raise
            stack.push_async_callback(store.close)
            published = PublishedMarker(store, flush_interval=settings.api.published_flush_seconds)
            # Closed after the sweeper and the server (callbacks run in reverse), before the store: its last
            # flush marks what the final requests queued.
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
            sweeper = Sweeper(
                store,
                bus,
                topology,
                interval_seconds=settings.api.sweeper_interval_seconds,
                grace_seconds=settings.api.sweeper_grace_seconds,
                idempotency_retention_seconds=settings.api.idempotency_retention_seconds,
            )
            # Closed first (callbacks run in reverse): it uses the bus link and the store.
            stack.push_async_callback(sweeper.close)
            sweeper.start()
            keys = CachedKeys(KeyStore(store.pool), ttl_seconds=settings.api.auth_cache_seconds)
            limits = BatchedBuckets(RateLimitStore(store.pool))
            app.state.resources = Resources(
                settings, catalog, topology, store, bus, keys, limits, published, inserts
            )
            if not settings.api.auth_enabled:
                log.warning(
                    "authentication is DISABLED (TASKYARD_API_AUTH_ENABLED=false): every request acts as an "
                    "admin of tenant 'default'. Never run like this outside local development."
                )
            log.info("taskyard-api started with %d specialists", len(catalog.names))
            try:
                yield
            finally:
                del app.state.resources

    return lifespan

"""Everything a worker process holds open, created once at start and closed once at the end.

The catalog and the tool names are checked before anything connects, so a misconfigured worker fails in
milliseconds with a clear message instead of after connecting to the broker and the database.
"""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass

import openai
from aio_pika.abc import AbstractChannel, AbstractQueue, AbstractRobustConnection

from taskyard_common.amqp import connect
from taskyard_common.catalog import Catalog, CatalogError, SpecialistSpec, load_catalog
from taskyard_common.health import HealthServer
from taskyard_common.llm import make_client
from taskyard_common.store import PostgresTaskStore, TaskStore
from taskyard_common.topology import Topology, declare
from taskyard_worker.settings import ServiceSettings
from taskyard_worker.tools import ToolRegistry, UnknownToolError
from taskyard_worker.tools.registry import check_tool_names

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The worker is misconfigured (catalog, specialist name, tools): retrying cannot help."""


def load_spec(settings: ServiceSettings, specialist: str) -> tuple[Catalog, SpecialistSpec]:
    """The catalog and this worker's spec, with its tool names checked; ``StartupError`` otherwise."""
    try:
        catalog = load_catalog(settings.catalog.path)
    except CatalogError as exc:
        raise StartupError(str(exc)) from None
    spec = catalog.get(specialist)
    if spec is None:
        raise StartupError(
            f"unknown specialist {specialist!r} in {settings.catalog.path}; known: {', '.join(catalog.names)}"
        )
    try:
        check_tool_names(spec.tools)
    except UnknownToolError as exc:
        raise StartupError(f"specialist {specialist!r}: {exc}") from None
    return catalog, spec


@dataclass
class Resources:
    settings: ServiceSettings
    catalog: Catalog
    spec: SpecialistSpec
    tools: ToolRegistry
    llm: openai.AsyncOpenAI
    store: TaskStore
    connection: AbstractRobustConnection
    channel: AbstractChannel
    queue: AbstractQueue
    health: HealthServer
    _stack: AsyncExitStack

    @classmethod
    async def open(cls, settings: ServiceSettings, specialist: str) -> Resources:
        catalog, spec = load_spec(settings, specialist)
        async with AsyncExitStack() as stack:
            # Closed in reverse order: health first (stop advertising readiness), the store last.
            store = await PostgresTaskStore.open(settings.db)
            stack.push_async_callback(store.close)
            connection = await connect(settings.amqp, f"taskyard-worker-{spec.name}")
            stack.push_async_callback(connection.close)
            channel = await connection.channel()
            # The prefetch is the number of tasks this process runs at once: each delivery is its own
            # asyncio task, so up to ``concurrency`` agent loops (and LLM calls) are in flight together.
            await channel.set_qos(prefetch_count=spec.concurrency)
            topology = Topology(settings.amqp.prefix)
            declared = await declare(channel, topology, catalog.names, settings.amqp)
            queue = declared.queues[topology.specialist_queue(spec.name)]
            # One LLM client (one connection pool) per process, shared by every task.
            llm = make_client(settings.llm)
            stack.push_async_callback(llm.close)
            tools = ToolRegistry.build(spec.tools, settings.worker)
            stack.push_async_callback(tools.close)

            async def ready() -> bool:
                if connection.is_closed or not connection.connected.is_set():
                    return False
                await store.ping()
                return True

            health = HealthServer(settings.health, ready)
            await health.start()
            stack.push_async_callback(health.close)
            resources = cls(
                settings,
                catalog,
                spec,
                tools,
                llm,
                store,
                connection,
                channel,
                queue,
                health,
                stack.pop_all(),
            )
        log.info(
            "worker for %r ready: queue %s, concurrency %d, model %s, tools %s",
            spec.name, queue.name, spec.concurrency, spec.model or settings.llm.model, list(spec.tools),
        )  # fmt: skip
        return resources

    async def close(self) -> None:
        await self._stack.aclose()

"""Everything a worker process holds open, created once at start and closed once at the end.

The catalog and the tool names are checked before anything connects, so a misconfigured worker fails in
milliseconds with a clear message instead of after connecting to the broker and the database.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiormq
from aio_pika.abc import AbstractQueue, AbstractRobustChannel, AbstractRobustConnection
from prometheus_client import REGISTRY

from taskyard_common.amqp import Publisher, connect
from taskyard_common.catalog import Catalog, CatalogError, SpecialistSpec, load_catalog
from taskyard_common.event_bus import EventNotifier
from taskyard_common.follow_up_announcer import FollowUpAnnouncer
from taskyard_common.health import HealthServer
from taskyard_common.llm import ClientPool, settings_for
from taskyard_common.llm_limits import LlmLimits
from taskyard_common.model_specs import fallback_chain
from taskyard_common.pod_metrics import pod_registry
from taskyard_common.service import ConfigurationError
from taskyard_common.store import PostgresTaskStore, TaskStore
from taskyard_common.store.budgets import BudgetStore
from taskyard_common.store.rate_limits import RateLimitStore
from taskyard_common.topology import Topology, declare, declare_specialist, work_queue_arguments
from taskyard_worker.settings import ServiceSettings
from taskyard_worker.supervision import main_share
from taskyard_worker.tools import ToolRegistry, UnknownToolError
from taskyard_worker.tools.registry import check_tool_names

log = logging.getLogger(__name__)


class StartupError(ConfigurationError):
    """The worker is misconfigured (catalog, specialist name, tools): retrying cannot help (exit 2)."""


def load_spec(
    settings: ServiceSettings, specialist: str, catalog: Catalog | None = None
) -> tuple[Catalog, SpecialistSpec]:
    """The catalog (``catalog``, else the file's) and this worker's spec, with its tool names checked;
    ``StartupError`` otherwise."""
    if catalog is None:
        try:
            catalog = load_catalog(settings.catalog.path)
        except CatalogError as exc:
            raise StartupError(str(exc)) from None
    spec = catalog.get(specialist)
    if spec is None:
        raise StartupError(
            f"unknown specialist {specialist!r} in the {settings.catalog.source} catalog; "
            f"known: {', '.join(catalog.names)}"
        )
    try:
        check_tool_names(spec.tools)
    except UnknownToolError as exc:
        raise StartupError(f"specialist {specialist!r}: {exc}") from None
    return catalog, spec


# Control messages are small and handled at once; a few in flight are plenty.
CONTROL_PREFETCH = 10


def level_prefetch(concurrency: int, *, job_mode: bool) -> int:
    """The prefetch of each priority level's consumer (see ``WorkerResources.open``). A job-mode worker
    (a KEDA ScaledJob for long tasks) takes only ``concurrency`` per level: a message held waiting in one
    Job for a slot is one another Job could run, and KEDA counts it as taken."""
    return concurrency if job_mode else 2 * concurrency


def worker_owner() -> str:
    """This process's lease owner id: readable (host, pid) and unique (a restart reuses a pid in a pod)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


async def warn_on_broker_cancel(channel: AbstractRobustChannel, what: str) -> None:
    """Log when the broker cancels a consumer of ``channel`` (its queue was deleted, a node went away).

    The broker says so with ``basic.cancel``; the consumer simply stops receiving, and aiormq tells the
    application nothing. aio-pika's robust channel re-declares the queue and consumes again; this line says
    which queue it was. Re-attached whenever the channel reopens: a reconnection brings a new underlying
    channel.
    """

    def on_cancel(frame: aiormq.spec.Basic.Cancel) -> None:
        log.warning(
            "the broker cancelled consumer %s of the %s queue (queue deleted?); consuming again",
            frame.consumer_tag,
            what,
        )

    async def attach(*_: Any) -> None:
        underlay = await channel.get_underlay_channel()
        underlay.on_consumer_cancel_callbacks.add(on_cancel)

    channel.reopen_callbacks.add(attach)
    await attach()


@dataclass(frozen=True, kw_only=True)
class WorkerResources:
    """What a worker process holds open, built by ``open`` (keyword arguments only: two channels or two
    queues of one type cannot be swapped by position) and closed when ``open``'s block ends."""

    settings: ServiceSettings
    catalog: Catalog
    spec: SpecialistSpec
    tools: ToolRegistry
    llm: ClientPool
    # The clients of the model's fallbacks, by model name.
    endpoints: dict[str, ClientPool]
    store: TaskStore
    # The tenants' budgets and the models' fleet-wide limits, on the task store's pool.
    budgets: BudgetStore
    limits: LlmLimits
    connection: AbstractRobustConnection
    # The main queues' channel (one queue per priority level, highest first, each with a prefetch of twice
    # the concurrency), the quarantine queue's (prefetch 1) and the control queue's: separate, so one's
    # prefetch or failure never holds up the others.
    main_channel: AbstractRobustChannel
    main_queues: tuple[AbstractQueue, ...]
    quarantine_channel: AbstractRobustChannel
    quarantine_queue: AbstractQueue
    control_queue: AbstractQueue
    publisher: Publisher
    topology: Topology
    owner: str
    health: HealthServer

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: ServiceSettings,
        specialist: str,
        *,
        catalog: Catalog | None = None,
        owner: str | None = None,
        serve_health: bool = True,
        metrics_dir: str | None = None,
        topology_declared: bool = False,
        concurrency_split: int = 1,
    ) -> AsyncIterator[WorkerResources]:
        """Check the configuration, open everything, yield; on exit close what was opened, in reverse
        order: health first (stop advertising readiness), the store last. ``catalog``: the catalog now
        (None: read the file); ``owner``: the lease owner id (None: a new one, ``worker_owner``; a
        supervisor's child gets its own from the parent); ``serve_health``: False for a supervisor's
        quarantine child (the main child serves the pod's health and metrics port); ``metrics_dir``: the
        supervisor's shared metrics directory (``pod_metrics``: ``/metrics`` serves every child's values);
        ``topology_declared``: a supervisor's child that consumed before declared the whole topology, so this
        one declares only its specialist's queues (a poison task's kills fork many children, each of which
        declared every queue of the catalog again, on a CPU the other services need); ``concurrency_split``:
        how many of a supervisor's children share the specialist's concurrency (``spec`` then holds this
        one's share, ``supervision.main_share``)."""
        catalog, spec = load_spec(settings, specialist, catalog)
        if concurrency_split > 1:
            spec = spec.model_copy(update={"concurrency": main_share(spec.concurrency, concurrency_split)})
        async with AsyncExitStack() as stack:
            store = await PostgresTaskStore.open(settings.db)
            stack.push_async_callback(store.close)
            connection = await connect(settings.amqp, f"taskyard-worker-{spec.name}")
            stack.push_async_callback(connection.close)
            main_channel = await connection.channel()
            # Each delivery is its own asyncio task; the worker's weighted slots (``concurrency`` of them)
            # bound the agent loops in flight. The prefetch applies per consumer, one per level queue:
            # twice the concurrency, so while every slot runs one level's tasks as many more of that level
            # wait here for a freed slot (with only the concurrency, that level would have none waiting
            # and each freed slot would go to another level).
            job_mode = settings.worker.exit_when_idle_seconds is not None
            await main_channel.set_qos(prefetch_count=level_prefetch(spec.concurrency, job_mode=job_mode))
            topology = Topology(settings.amqp.prefix)
            if topology_declared:
                queues = await declare_specialist(main_channel, topology, spec.name, settings.amqp)
            else:
                queues = (await declare(main_channel, topology, catalog.names, settings.amqp)).queues
            main_queues = tuple(queues[name] for name in topology.specialist_queues(spec.name))
            # Quarantined messages run one at a time: a poison one kills only itself there.
            quarantine_channel = await connection.channel()
            await quarantine_channel.set_qos(prefetch_count=1)
            quarantine_queue = await quarantine_channel.declare_queue(
                topology.quarantine_queue(spec.name),
                durable=True,
                arguments=work_queue_arguments(topology, settings.amqp),
            )
            await quarantine_queue.bind(topology.quarantine_exchange, routing_key=spec.name)
            # This process's own queue on the control fanout; gone with the connection.
            control_channel = await connection.channel()
            await control_channel.set_qos(prefetch_count=CONTROL_PREFETCH)
            control_queue = await control_channel.declare_queue(None, exclusive=True, auto_delete=True)
            await control_queue.bind(topology.control_exchange)
            await warn_on_broker_cancel(main_channel, "main")
            await warn_on_broker_cancel(quarantine_channel, "quarantine")
            publisher = await Publisher.open(connection, settings.amqp)
            stack.push_async_callback(publisher.close)
            # Every step and outcome this worker records wakes whoever watches the task.
            notifier = await EventNotifier.open(await connection.channel(), topology.events_exchange)
            stack.push_async_callback(notifier.close)
            store.on_change = notifier.notify
            # A task this worker ends may create or resume another (a chain's next step, a waiting parent).
            follow_ups = FollowUpAnnouncer(lambda: publisher, topology, store)
            stack.push_async_callback(follow_ups.close)
            store.on_follow_up = follow_ups
            # One set of LLM clients per process, shared by every task, with a keep-alive connection for
            # each task that may be in flight (see ``ClientPool`` for why several clients).
            primary = settings_for(settings.llm, catalog.model(spec.model or settings.llm.model))
            llm = ClientPool.create(primary, concurrency=spec.concurrency)
            stack.push_async_callback(llm.close)
            # The fallback models' clients: the same ones on the same endpoint, a pool per other endpoint.
            pools = {primary.base_url: llm}
            endpoints: dict[str, ClientPool] = {}
            for name in fallback_chain(catalog.model_table, spec.model or settings.llm.model)[1:]:
                served = settings_for(settings.llm, catalog.model(name))
                if served.base_url not in pools:
                    pools[served.base_url] = ClientPool.create(served, concurrency=spec.concurrency)
                    stack.push_async_callback(pools[served.base_url].close)
                endpoints[name] = pools[served.base_url]
            tools = ToolRegistry.build(spec.tools, settings.worker)
            stack.push_async_callback(tools.close)

            async def ready() -> bool:
                if connection.is_closed or not connection.connected.is_set():
                    return False
                await store.ping()
                return True

            health_settings = settings.health
            if not serve_health:
                health_settings = health_settings.model_copy(update={"port": 0})
            registry = REGISTRY if metrics_dir is None else pod_registry(metrics_dir)
            health = HealthServer(health_settings, ready, registry)
            await health.start()
            stack.push_async_callback(health.close)
            resources = cls(
                settings=settings,
                catalog=catalog,
                spec=spec,
                tools=tools,
                llm=llm,
                endpoints=endpoints,
                store=store,
                budgets=BudgetStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                limits=LlmLimits(
                    RateLimitStore(store.pool, acquire_timeout=settings.db.command_timeout_seconds),
                    catalog.model_table,
                ),
                connection=connection,
                main_channel=main_channel,
                main_queues=main_queues,
                quarantine_channel=quarantine_channel,
                quarantine_queue=quarantine_queue,
                control_queue=control_queue,
                publisher=publisher,
                topology=topology,
                owner=owner or worker_owner(),
                health=health,
            )
            log.info(
                "worker %s for %r ready: queues %s, concurrency %d, model %s, tools %s",
                resources.owner, spec.name, [queue.name for queue in main_queues], spec.concurrency,
                spec.model or settings.llm.model, list(spec.tools),
            )  # fmt: skip
            yield resources

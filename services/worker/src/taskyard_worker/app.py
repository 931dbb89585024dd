"""``taskyard-worker --specialist NAME``: consume one specialist's queues until SIGTERM.

Shutdown is graceful because Kubernetes (and KEDA scale-in) stops busy pods: the consumers are cancelled
first so no new task arrives, each running task finishes the step it is in (recorded), and is handed back
(republished, lease released, not charged) to resume at the next step on another worker; a task whose step
was its last completes. A step still running after ``shutdown_grace_seconds`` is cut short and handed back.

The catalog is followed while the worker runs (``follow_catalog``): a change to this worker's own spec stops
and starts its consumers again in this process with the new spec (the same graceful stop); a change to any
other specialist does nothing here; a deleted specialist stops consuming until it is back.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiormq
from aio_pika.abc import AbstractQueue

from taskyard_common.amqp import consume
from taskyard_common.catalog import Catalog, SpecialistSpec
from taskyard_common.catalog_sources import LiveCatalog, open_live_catalog
from taskyard_common.llm import make_client
from taskyard_common.messages import ControlMessage, WorkMessage
from taskyard_common.metrics import init_failover_labels, init_llm_labels, init_worker_labels
from taskyard_common.model_specs import fallback_chain
from taskyard_common.pod_metrics import remove as remove_metrics_dir
from taskyard_common.pod_metrics import share_between_processes
from taskyard_common.service import exit_code, run_service
from taskyard_worker.context import WorkerContext
from taskyard_worker.control import ControlHandler
from taskyard_worker.flights import Source
from taskyard_worker.handler import WorkHandler
from taskyard_worker.heartbeat import Heartbeat
from taskyard_worker.main_split import MainSplit
from taskyard_worker.resources import StartupError, WorkerResources, load_spec
from taskyard_worker.settings import ServiceSettings, get_settings
from taskyard_worker.supervision import Role, child_roles
from taskyard_worker.supervisor import Supervisor

log = logging.getLogger("taskyard_worker")

CANCEL_TIMEOUT_SECONDS = 5.0


class Worker:
    """The consumers of one specialist's queues (main, quarantine, control) over opened ``WorkerResources``."""

    def __init__(self, resources: WorkerResources, role: Role = Role.ALL) -> None:
        self.resources = resources
        self.role = role
        self.context = WorkerContext.build(resources)
        self.flights = self.context.flights
        self.handler = WorkHandler(self.context)
        self.heartbeat = Heartbeat(self.context)
        # (queue, consumer tag) of the work consumers, cancelled first on stop; the control one last.
        self._work_consumers: list[tuple[AbstractQueue, str]] = []
        self._control_consumer: tuple[AbstractQueue, str] | None = None

    @property
    def owner(self) -> str:
        return self.resources.owner

    async def start(self) -> None:
        resources = self.resources
        init_worker_labels(resources.spec.name)
        primary = resources.spec.model or resources.settings.llm.model
        for model in fallback_chain(resources.catalog.model_table, primary):
            init_llm_labels(model, resources.spec.name)
            init_failover_labels(model)
        self.heartbeat.start()
        control = resources.control_queue
        self._control_consumer = (
            control,
            await consume(control, ControlMessage, ControlHandler(self.context)),
        )
        queues: list[tuple[AbstractQueue, Source]] = []
        if self.role.main_queues:
            queues += [(queue, Source.MAIN) for queue in resources.main_queues]
        if self.role.quarantine_queue:
            queues.append((resources.quarantine_queue, Source.QUARANTINE))
        for queue, source in queues:
            tag = await consume(queue, WorkMessage, self.handler.consumer(source))
            self._work_consumers.append((queue, tag))

    async def _cancel_consumer(self, queue: AbstractQueue, tag: str) -> None:
        if self.resources.connection.is_closed:
            return  # nothing to cancel: a closed connection delivers nothing (and its unacked are requeued)
        try:
            # Bounded: a robust channel waits for its connection to come back before it sends anything, so
            # during a broker outage an unbounded cancel would hang the shutdown.
            async with asyncio.timeout(CANCEL_TIMEOUT_SECONDS):
                await queue.cancel(tag)
        except (TimeoutError, RuntimeError, aiormq.exceptions.AMQPError) as exc:
            log.warning(
                "could not cancel the consumer of %s (%s); draining anyway", queue.name, type(exc).__name__
            )

    async def stop(self) -> None:
        """Stop taking messages, let in-flight tasks finish their step within the grace period, hand them
        back."""
        consumers, self._work_consumers = self._work_consumers, []
        for queue, tag in consumers:
            await self._cancel_consumer(queue, tag)
        grace = self.resources.settings.worker.shutdown_grace_seconds
        if self.flights:
            log.info(
                "waiting up to %gs for %d tasks in flight to finish their step", grace, len(self.flights)
            )
        handed_back = await self.handler.drain(grace)
        if handed_back:
            log.warning("grace period over: stopped %d deliveries and handed their tasks back", handed_back)
        # The heartbeat runs until the end: the tasks being handed back still hold their leases.
        await self.heartbeat.stop()
        if self._control_consumer is not None:
            await self._cancel_consumer(*self._control_consumer)
            self._control_consumer = None
        log.info("worker stopped; deliveries handled: %s", dict(self.context.outcomes) or "none")


@dataclass(frozen=True)
class ChildRun:
    """How a process runs its worker: its ``role`` (what it consumes), its lease ``owner`` id (None: a new
    one per start) and ``on_ready`` (called each time it consumes): a supervisor's child gets all three."""

    role: Role = Role.ALL
    owner: str | None = None
    on_ready: Callable[[], None] | None = None
    metrics_dir: str | None = None  # the supervisor's (``pod_metrics``); None: this process's metrics only
    # A successor of a child that consumed: the topology is declared, only this specialist's queues are
    # (``WorkerResources.open``), at its first start (a catalog change declares everything again).
    topology_declared: bool = False
    # How many children share the specialist's concurrency (a main child's share: ``supervision.main_share``,
    # of the catalog's figure at each start, which a catalog change may move).
    concurrency_split: int = 1


@asynccontextmanager
async def running_worker(
    settings: ServiceSettings,
    specialist: str,
    *,
    catalog: Catalog | None = None,
    child: ChildRun = ChildRun(),
) -> AsyncIterator[Worker]:
    """Open resources, consume, and on exit stop gracefully and close everything. ``catalog``: the catalog
    now (None: read the catalog file)."""
    async with WorkerResources.open(
        settings,
        specialist,
        catalog=catalog,
        owner=child.owner,
        serve_health=child.role.serves_health,
        concurrency_split=child.concurrency_split,
        metrics_dir=child.metrics_dir,
        topology_declared=child.topology_declared,
    ) as resources:
        worker = Worker(resources, child.role)
        try:
            await worker.start()  # a start that fails half-way is stopped too (the heartbeat is running)
            if child.on_ready is not None:
                child.on_ready()
            yield worker
        finally:
            await worker.stop()


async def _first(*waits: Coroutine[Any, Any, object]) -> set[str]:
    """Run ``waits`` until the first ends; the names of those that ended (the others are cancelled)."""
    names = {asyncio.ensure_future(w): getattr(w, "__name__", "wait") for w in waits}
    tasks = set(names)
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {names[t] for t in done}


async def _spec_changed(live: LiveCatalog, specialist: str, spec: SpecialistSpec | None) -> None:
    """Return once this worker's spec differs from ``spec`` (changed, added, or deleted)."""
    while True:
        version = live.version
        if live.catalog.get(specialist) != spec:
            return
        await live.wait_changed(version)


async def follow_catalog(
    settings: ServiceSettings,
    specialist: str,
    live: LiveCatalog,
    stop: asyncio.Event,
    child: ChildRun = ChildRun(),
) -> None:
    """Consume with the catalog's current spec of ``specialist`` until ``stop``: when the spec changes, stop
    gracefully (in-flight tasks finish their step or are handed back) and consume again with the new one,
    in this process; while the specialist is not in the catalog (deleted), consume nothing and wait."""
    idle_limit = settings.worker.exit_when_idle_seconds
    while not stop.is_set():
        catalog = live.catalog
        spec = catalog.get(specialist)
        if spec is None:
            log.warning(
                "specialist %r is not in the catalog (deleted?): not consuming until it is back", specialist
            )
            await _first(stop.wait(), _spec_changed(live, specialist, None))
            continue
        try:
            load_spec(settings, specialist, catalog)
        except StartupError as exc:
            # A changed spec this worker cannot run (a tool it does not have): wait for the next change
            # rather than exit and be restarted into the same catalog.
            log.error("not consuming: %s", exc)
            await _first(stop.wait(), _spec_changed(live, specialist, spec))
            continue
        async with running_worker(settings, specialist, catalog=catalog, child=child) as worker:
            # The catalog may have changed since the topology was declared: a later start declares it all.
            child = dataclasses.replace(child, topology_declared=False)
            waits = [stop.wait(), _spec_changed(live, specialist, spec)]
            if idle_limit is not None:
                waits.append(worker.flights.until_idle(idle_limit))
            ended = await _first(*waits)
            if "until_idle" in ended and not stop.is_set():
                # The same graceful stop as SIGTERM: a delivery that arrived meanwhile is finished first.
                log.info("idle for %gs (--exit-when-idle): stopping", idle_limit)
                stop.set()
            elif "_spec_changed" in ended and not stop.is_set():
                log.info(
                    "the spec of %r changed in the catalog: consuming again with the new one", specialist
                )
            else:
                log.info("stop signal received")


async def serve(
    settings: ServiceSettings,
    specialist: str,
    child: ChildRun = ChildRun(),
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        async with open_live_catalog(settings.catalog, settings.db, sighup=True) as live:
            load_spec(settings, specialist, live.catalog)  # not in the catalog at start: exit 2
            await follow_catalog(settings, specialist, live, stop, child)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="taskyard-worker",
        description="Run the agent loop of one taskyard specialist: consume its queue, run each task with "
        "the LLM and the specialist's tools, record the result. Configured by TASKYARD_* environment "
        "variables (see docs/worker.md).",
    )
    parser.add_argument("--specialist", required=True, metavar="NAME", help="a specialist of the catalog")
    parser.add_argument(
        "--exit-when-idle",
        type=float,
        metavar="SECONDS",
        help="job mode: stop gracefully and exit 0 once nothing was in flight or delivered for SECONDS "
        "(default: TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS, else run until SIGTERM)",
    )
    args = parser.parse_args(argv)
    if args.exit_when_idle is not None and not args.exit_when_idle > 0:
        parser.error("--exit-when-idle must be a number of seconds above 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)

    def load_settings() -> ServiceSettings:
        settings = get_settings()
        if args.exit_when_idle is None:
            return settings
        worker = settings.worker.model_copy(update={"exit_when_idle_seconds": args.exit_when_idle})
        return settings.model_copy(update={"worker": worker})

    run_service(
        f"taskyard-worker[{args.specialist}]",
        load_settings=load_settings,
        log_settings=lambda settings: settings.log,
        run=lambda settings: run_worker(settings, args.specialist),
    )


def run_worker(settings: ServiceSettings, specialist: str) -> None:
    """One process (``TASKYARD_WORKER_SUPERVISOR=false``) or a supervisor forking the worker children."""
    if not settings.worker.supervisor:
        asyncio.run(serve(settings, specialist))
        return
    # Checked here once, so that a wrong specialist exits 2 at once instead of in every child; only for the
    # file source: the database's or Kubernetes' catalog is read by each child from its live source (a
    # specialist just added there is not in the seeded file), and a child's exit 2 ends the supervisor.
    if settings.catalog.source == "file":
        load_spec(settings, specialist)
    # Warm: building an LLM client imports its HTTP stack lazily (a third of a second of a child's start);
    # this one opens nothing and is dropped.
    make_client(settings.llm)
    # Before the first fork and the first metric change: every child's metrics in files the main child
    # merges (a quarantine child's tasks, a killed child's counts).
    metrics_dir = share_between_processes()

    def child_main(role: Role, owner: str, on_ready: Callable[[], None], successor: bool, split: int) -> int:
        run = ChildRun(
            role=role,
            owner=owner,
            on_ready=on_ready,
            metrics_dir=metrics_dir,
            topology_declared=successor,
            concurrency_split=split,
        )
        try:
            return exit_code(lambda: asyncio.run(serve(settings, specialist, run)))
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:
            log.exception("the %s worker child failed", role)
            return 1

    job_mode = settings.worker.exit_when_idle_seconds is not None
    roles = child_roles(
        job_mode=job_mode,
        quarantine_children=settings.worker.quarantine_children,
        main_children=settings.worker.main_children,
    )
    worker = settings.worker
    # Only a pod with one main child at rest, which has a quarantine child to isolate the suspects in.
    adaptive = not job_mode and worker.quarantine_children > 0 and worker.main_children == 1
    split = MainSplit(
        base=worker.main_children,
        after_crash=worker.split_after_crash if adaptive else 1,
        calm_seconds=worker.split_calm_seconds,
        quarantine_base=worker.quarantine_children,
    )
    supervisor = Supervisor(roles, child_main, settings.db, metrics_dir=metrics_dir, split=split)
    try:
        code = supervisor.run()
    finally:
        remove_metrics_dir(metrics_dir)
    if code != 0:
        sys.exit(code)


if __name__ == "__main__":
    main()

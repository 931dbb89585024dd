"""Tenant lanes: how many of a tenant's messages a specialist's queue holds, and the feeder that fills them.

Routing parks a tenant's task instead of publishing it once the tenant's lane for the specialist is full
(``taskyard_common.store.parking`` says when); a worker's refused start parks it too. The **feeder** below
releases parked tasks as the lanes drain, one statement a round, and publishes them through the announce
path (publish, then mark). So one tenant's backlog waits in the store, not in front of everyone else's
messages, and a refusal costs one statement and an ack instead of a round trip through the delay queues.

**The lane depth** of a specialist (the rule): ``max(min_depth, ceil(factor * fleet))``, where ``fleet`` is
the specialist's running slots across its workers: the catalog's ``concurrency`` (slots per worker) times
the workers seen consuming its queues (the most consumers on any of its level queues, as ``fleet.py`` last
counted them, every couple of seconds; one until it has). With the default ``factor`` 1 a lane holds one fleet's worth of
messages: enough for a tenant alone to fill every slot once more before the feeder's next round, and no
more than one fleet's worth in front of another tenant's first message.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.settings import LaneSettings
from taskyard_common import metrics
from taskyard_common.announce import announcement, publish_then_mark
from taskyard_common.errors import StoreUnavailable, TaskyardError
from taskyard_common.periodic import PeriodicTask

log = logging.getLogger(__name__)


class Lanes:
    """Each specialist's lane depth, from the catalog now and the workers last seen (see the module)."""

    def __init__(self, context: AgentContext, settings: LaneSettings) -> None:
        self._context = context
        self._settings = settings
        self._workers: dict[str, int] = {}

    @property
    def enabled(self) -> bool:
        return self._settings.enabled

    def saw_workers(self, workers: Mapping[str, int]) -> None:
        """The fleet count's round: consumers per specialist (a specialist missing keeps its last count)."""
        self._workers.update(workers)

    def depth(self, specialist: str) -> int | None:
        """The lane depth routing parks by for ``specialist``; None when lanes are off or the specialist is
        not in the catalog (then nothing is parked at routing)."""
        return self._depth(specialist) if self._settings.enabled else None

    def depths(self) -> dict[str, int]:
        """Every catalog specialist's lane depth, for the feeder: even with lanes off at routing, a worker's
        refused start parks a task, which the feeder must release."""
        depths = {name: self._depth(name) for name in self._context.catalog.names}
        return {name: depth for name, depth in depths.items() if depth is not None}

    def _depth(self, specialist: str) -> int | None:
        spec = self._context.catalog.get(specialist)
        if spec is None:
            return None
        fleet = spec.concurrency * max(1, self._workers.get(specialist, 0))
        return max(self._settings.min_depth, math.ceil(self._settings.factor * fleet))


class Feeder:
    """Releases parked tasks into their lanes every ``feeder_interval_seconds`` (see the module)."""

    def __init__(self, context: AgentContext, lanes: Lanes, settings: LaneSettings) -> None:
        self._context = context
        self._lanes = lanes
        self._batch = settings.feeder_batch
        self._loop = PeriodicTask("feeder", settings.feeder_interval_seconds, self.round, logger=log)

    @property
    def running(self) -> bool:
        return self._loop.running

    def start(self) -> None:
        self._loop.start()

    async def stop(self, grace_seconds: float = 0.0) -> None:
        await self._loop.stop(grace_seconds)

    async def round(self) -> int:
        """One round: release what the lanes have room for, publish them all (confirms awaited together),
        then mark the confirmed ones in one statement. Returns how many were published. A task whose publish
        fails stays queued, unparked and unmarked: the reaper's ``stale_queued`` publishes it after its grace
        period (and so it does when this process dies between the release's commit and the publish)."""
        context = self._context
        released = await context.store.release_parked(self._lanes.depths(), limit=self._batch)
        if not released:
            return 0
        outcomes = await asyncio.gather(
            *(
                publish_then_mark(context.publisher, context.topology, announcement(record), mark=None)
                for record in released
            ),
            return_exceptions=True,
        )
        published = [r for r, outcome in zip(released, outcomes, strict=True) if outcome is None]
        failed = [o for o in outcomes if o is not None]
        for outcome in failed:
            if not isinstance(outcome, TaskyardError):
                raise outcome  # a bug, not the broker: the loop logs it with its traceback
        if failed:
            log.warning(
                "%d released task(s) not published (%s): the reaper publishes them later",
                len(failed),
                failed[0],
            )
        if published:
            try:
                await context.store.mark_published_many([r.id for r in published])
            except StoreUnavailable:
                log.warning(
                    "%d released task(s) published but not marked: announced once more later", len(published)
                )
        for record in published:
            if record.specialist in context.specialists:
                metrics.PARKED_RELEASED.labels(record.specialist).inc()
        log.debug("feeder: released %d parked task(s), published %d", len(released), len(published))
        return len(published)

"""The heartbeat: renew the leases of every task this worker runs, and stop the runs it must stop.

One ``store.heartbeat`` call every ``lease_seconds / 3`` renews them all. A task that is no longer held (the
reaper or another worker took it over after this worker stalled) is stopped without recording anything; a
task whose cancellation was requested is stopped and recorded cancelled. The second is the fallback of the
control message, which normally cancels within a moment.
"""

from __future__ import annotations

import logging

from taskyard_common.periodic import PeriodicTask
from taskyard_worker.context import WorkerContext
from taskyard_worker.flights import StopReason

log = logging.getLogger(__name__)


class Heartbeat:
    def __init__(self, ctx: WorkerContext) -> None:
        self._store = ctx.store
        self._flights = ctx.flights
        self._owner = ctx.owner
        self._lease_seconds = ctx.settings.lease_seconds
        # A failed beat (the store away) is logged by the loop and the next one runs on schedule: a lease
        # lasts three intervals, and one that ran out meanwhile is reported lost by the first beat through.
        self._loop = PeriodicTask("heartbeat", self._lease_seconds / 3, self.beat, logger=log)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def beat(self) -> None:
        ids = self._flights.leased_ids()
        if not ids:
            return
        held, cancel = await self._store.heartbeat(self._owner, ids, self._lease_seconds)
        for task_id in ids:
            flight = self._flights.get(task_id)
            if flight is None or not flight.leased:
                continue  # finished while the beat was on its way
            if task_id not in held:
                if flight.running and flight.stop(StopReason.LOST_LEASE):
                    log.warning("task %s: this worker no longer holds its lease; stopping it", task_id)
            elif task_id in cancel and flight.stop(StopReason.CANCELLED):
                log.info("task %s: cancellation requested (seen by the heartbeat); stopping it", task_id)

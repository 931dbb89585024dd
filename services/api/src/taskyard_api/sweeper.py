"""Closes the crash window between committing a task and announcing it.

A submission commits its row, publishes, then marks the row published. If the API process dies between the
commit and the confirm, the row would sit in ``pending`` forever; the sweeper re-publishes such rows once
they are older than a grace period. The grace period exceeds the publish timeout (``ServiceSettings``
checks it), so a live request that is still waiting for its confirm, and may yet fail, discard its row and
answer 503, is never overtaken. Several API replicas may sweep the same row at once; the duplicate intake
message is harmless because routing a task is one conditional update that applies only once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from pydantic import ValidationError

from taskyard_api.broker import BrokerLink
from taskyard_common.errors import TaskyardError
from taskyard_common.messages import IntakeMessage, utcnow
from taskyard_common.store import TaskStore
from taskyard_common.topology import INTAKE_ROUTING_KEY, Topology

log = logging.getLogger(__name__)

BATCH_SIZE = 100


class Sweeper:
    def __init__(
        self,
        store: TaskStore,
        broker: BrokerLink,
        topology: Topology,
        *,
        interval_seconds: float,
        grace_seconds: float,
    ) -> None:
        self._store = store
        self._broker = broker
        self._topology = topology
        self._interval = interval_seconds
        self._grace = timedelta(seconds=grace_seconds)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="taskyard-api sweeper")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def sweep_once(self) -> int:
        """Publish one batch of orphaned rows; returns how many were published."""
        if not self._broker.connected:
            return 0
        orphans = await self._store.unpublished(older_than=utcnow() - self._grace, limit=BATCH_SIZE)
        published = 0
        for task in orphans:
            try:
                message = IntakeMessage(
                    task_id=task.id,
                    input=task.input,
                    requested_specialist=task.requested_specialist,
                    metadata=task.metadata,
                )
            except ValidationError as exc:
                # Written by something other than this API's validated submissions: never publishable.
                log.error(
                    "task %s cannot be announced (%d invalid fields); skipping", task.id, exc.error_count()
                )
                continue
            await self._broker.publisher.publish(self._topology.intake_exchange, INTAKE_ROUTING_KEY, message)
            await self._store.mark_published(task.id)
            published += 1
        if published:
            log.info("re-published %d task(s) orphaned between commit and publish", published)
        return published

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep_once()
            except TaskyardError as exc:
                # Broker or database away, or the queue full: the rows stay and the next round retries.
                log.warning("sweep interrupted: %s", exc)
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self._interval)

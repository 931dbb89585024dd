"""Closes the crash window between committing a submission and announcing it.

A submission commits its row, publishes its intake message, then marks the row published. If the API process
dies between the commit and the confirm, the row would sit in ``pending`` forever; the sweeper re-publishes
its intake message (``unpublished``), as it does for a replay of a never-routed task whose intake publish
failed.

Routed tasks whose work message is not known to be published (``stale_queued``: a dead-letter replay whose
publish failed or whose API died, a reclaim whose broker agent died) are not this sweeper's: the broker
agent's reaper owns them, with the lease reclaims whose messages it publishes anyway (one owner, one
grace period: ``TASKYARD_BROKER_REPUBLISH_AFTER_SECONDS``).

A third, smaller duty: idempotency keys (of tasks and of groups) older than their retention are deleted.

Only rows unchanged for a grace period qualify, measured by the database's clock (the one that wrote
``updated_at``): the host's clock may be ahead of it or behind. A row that can never be announced (written
by something other than this API's validated paths) is skipped by this process from then on, so such rows
never fill the batch and starve the others. The grace period exceeds the publish timeout
(``ServiceSettings`` checks it), so a live request that is still waiting for its confirm, and may yet fail,
discard its row and answer 503, is never overtaken. Several API replicas may sweep the same row at once; a
duplicate intake message is harmless because routing a task is one conditional update that applies only
once.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from uuid import UUID

from pydantic import ValidationError

from taskyard_api.bus import BusLink
from taskyard_common.announce import announce
from taskyard_common.errors import NotAnnounceable
from taskyard_common.periodic import PeriodicTask
from taskyard_common.store import TaskRecord, TaskStore
from taskyard_common.topology import Topology

log = logging.getLogger(__name__)

BATCH_SIZE = 100
# Rows this process found it can never announce, excluded from its queries (bounded; oldest forgotten).
MAX_UNANNOUNCEABLE = 10_000


class Sweeper:
    def __init__(
        self,
        store: TaskStore,
        bus: BusLink,
        topology: Topology,
        *,
        interval_seconds: float,
        grace_seconds: float,
        idempotency_retention_seconds: float = 86400.0,
    ) -> None:
        self._store = store
        self._bus = bus
        self._topology = topology
        self._grace = timedelta(seconds=grace_seconds)
        self._retention = timedelta(seconds=idempotency_retention_seconds)
        self._unannounceable: dict[UUID, None] = {}
        # The first round at once: what a crashed predecessor left is announced without waiting an interval.
        # A failed round (RabbitMQ or the database away, the queue full) leaves its rows to the next one.
        self._loop = PeriodicTask(
            "taskyard-api sweeper", interval_seconds, self.round, first_after=0, logger=log
        )

    def start(self) -> None:
        self._loop.start()

    async def close(self) -> None:
        await self._loop.stop()

    async def round(self) -> None:
        await self.expire_keys_once()
        await self.sweep_once()

    async def sweep_once(self) -> int:
        """Announce one batch of unannounced pending tasks; returns how many were published."""
        if not self._bus.connected:
            return 0
        published = 0
        older_than = await self._store.database_now() - self._grace
        skipped = list(self._unannounceable)
        for task in await self._store.unpublished(older_than=older_than, limit=BATCH_SIZE, exclude=skipped):
            if await self._publish(task):
                published += 1
        if published:
            log.info("re-published %d unannounced task(s) orphaned between commit and publish", published)
        return published

    async def expire_keys_once(self) -> int:
        """Delete the idempotency keys older than the retention: they may name a new task again."""
        older_than = await self._store.database_now() - self._retention
        expired = await self._store.expire_idempotency_keys(older_than)
        expired += await self._store.expire_group_idempotency_keys(older_than)
        if expired:
            log.info("forgot %d expired idempotency key(s)", expired)
        return expired

    async def _publish(self, task: TaskRecord) -> bool:
        try:
            await announce(self._bus.publisher, self._topology, task, self._store.mark_published)
        except (ValidationError, NotAnnounceable) as exc:
            # Written by something other than this API's validated paths: never publishable.
            log.error(
                "task %s cannot be announced (%s); skipping it from now on", task.id, type(exc).__name__
            )
            if len(self._unannounceable) >= MAX_UNANNOUNCEABLE:
                del self._unannounceable[next(iter(self._unannounceable))]
            self._unannounceable[task.id] = None
            return False
        return True

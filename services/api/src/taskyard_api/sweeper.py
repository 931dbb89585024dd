"""Closes the crash windows between committing a task and announcing it.

Two duties, both "committed but the broker never confirmed the message":

- a submission commits its row, publishes, then marks the row published. If the API process dies between
  the commit and the confirm, the row would sit in ``pending`` forever; the sweeper re-publishes its intake
  message;
- a dead-letter replay commits the task back to ``queued`` (``published_at`` cleared), publishes its work
  message, then marks it published. If that publish fails (the client got a 503) or the process dies, the
  sweeper re-publishes the work message to the specialist's queue. A queued task merely waiting in a long
  queue is marked published, so it is never announced twice.

A third, smaller duty: idempotency keys older than their retention are deleted.

Only rows unchanged for a grace period qualify. The grace period exceeds the publish timeout
(``ServiceSettings`` checks it), so a live request that is still waiting for its confirm, and may yet fail,
discard its row and answer 503, is never overtaken. Several API replicas may sweep the same row at once; a
duplicate intake message is harmless because routing a task is one conditional update that applies only
once, and a duplicate work message finds the task leased or finished when a worker tries to start it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from pydantic import ValidationError

from taskyard_api.announce import NotAnnounceable, announce
from taskyard_api.broker import BrokerLink
from taskyard_common.errors import TaskyardError, Unroutable
from taskyard_common.messages import TaskStatus, utcnow
from taskyard_common.store import TaskRecord, TaskStore
from taskyard_common.topology import Topology

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
        idempotency_retention_seconds: float = 86400.0,
    ) -> None:
        self._store = store
        self._broker = broker
        self._topology = topology
        self._interval = interval_seconds
        self._grace = timedelta(seconds=grace_seconds)
        self._retention = timedelta(seconds=idempotency_retention_seconds)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="taskyard-api sweeper")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def sweep_once(self) -> int:
        """Publish one batch of each kind of orphan; returns how many were published."""
        if not self._broker.connected:
            return 0
        older_than = utcnow() - self._grace
        published = 0
        for duty, find in (
            ("unannounced", self._store.unpublished),
            ("unpublished queued", self._store.stale_queued),
        ):
            count = 0
            for task in await find(older_than=older_than, limit=BATCH_SIZE):
                if await self._publish(task):
                    count += 1
            if count:
                log.info("re-published %d %s task(s) orphaned between commit and publish", count, duty)
            published += count
        return published

    async def expire_keys_once(self) -> int:
        """Delete the idempotency keys older than the retention: they may name a new task again."""
        expired = await self._store.expire_idempotency_keys(utcnow() - self._retention)
        if expired:
            log.info("forgot %d expired idempotency key(s)", expired)
        return expired

    async def _publish(self, task: TaskRecord) -> bool:
        try:
            await announce(self._broker.publisher, self._topology, task)
        except (ValidationError, NotAnnounceable) as exc:
            # Written by something other than this API's validated paths: never publishable.
            log.error("task %s cannot be announced (%s); skipping", task.id, type(exc).__name__)
            return False
        except Unroutable:
            if task.status is TaskStatus.PENDING:
                raise  # the intake queue is missing: nothing else can be announced either
            # One specialist's queue is missing (deleted, or the specialist left the catalog): try the rest.
            log.error("task %s: no queue for specialist %s; skipping", task.id, task.specialist)
            return False
        await self._store.mark_published(task.id)
        return True

    async def _run(self) -> None:
        while True:
            try:
                await self.expire_keys_once()
                await self.sweep_once()
            except TaskyardError as exc:
                # Broker or database away, or the queue full: the rows stay and the next round retries.
                log.warning("sweep interrupted: %s", exc)
            except Exception:
                log.exception("sweep failed")
            await asyncio.sleep(self._interval)

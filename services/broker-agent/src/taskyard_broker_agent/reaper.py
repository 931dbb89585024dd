"""The reaper: running tasks whose lease expired (their worker died or stalled) run again, or die.

A worker acks a long task's message early and from then on only its lease protects the task, so when the
worker dies nothing in the broker brings the task back: every ``interval`` the reaper finds the expired
leases and ``reclaim``s each task, one conditional update, so several broker-agent replicas may reap at
once and each task is taken by one of them:

- ``queued``: a ``WorkMessage`` rebuilt from the task is published to its specialist (``attempt`` stays the
  task's: a lost lease is not a charged attempt), then ``mark_published``;
- ``dead_lettered``: its leases expired more than the delivery limit allows (a task that kills its worker
  every time): the store writes its ``dead_letters`` row (reason ``delivery_limit``, queue ``lease``) in
  the same transaction, so the dead-letter API lists it.

A lease that expired while the database was away is not a dead worker's: the workers' heartbeats could not
renew anything either. So after the reaper lost the database (a round failed on it, or no round got through
for longer than ``reaper_recovery_grace_seconds`` plus the interval) it reclaims nothing until the database
has answered for ``reaper_recovery_grace_seconds``: long enough for every live worker's next heartbeat, which
renews a lease it still holds even after it ran out. Without this, an outage longer than a lease handed
healthy early-settled tasks to a second worker. An agent that starts reclaims at once (nothing says it
lost the database).

Reclaim commits before the publish. A publish that fails is retried in the next rounds from memory; an
agent that dies between the two leaves a ``queued`` task whose ``published_at`` is NULL, which
``stale_queued`` finds after ``republish_after`` and which is then published again. Duplicates are harmless:
a worker's ``start`` is conditional.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import timedelta
from uuid import UUID

from taskyard_broker_agent.context import AgentContext
from taskyard_common import metrics
from taskyard_common.announce import publish_then_mark
from taskyard_common.errors import NotAnnounceable, StoreUnavailable, TaskyardError, Unroutable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import WorkMessage
from taskyard_common.periodic import PeriodicTask
from taskyard_common.store import TaskRecord

log = logging.getLogger(__name__)

BATCH_SIZE = 100
# How long a stale task that could not be re-published (never routed, its specialist's queue missing) is
# left out of the reaper's queries (at least ``republish_after``).
SKIP_SECONDS = 60.0


def work_message(task: TaskRecord) -> WorkMessage | None:
    """The work message of a routed task, rebuilt from the store; None if it was never routed."""
    try:
        return WorkMessage.from_record(task)
    except NotAnnounceable:
        return None


@dataclass
class Sweep:
    """What one round did (for logs and tests)."""

    requeued: list[UUID] = field(default_factory=list)
    dead_lettered: list[UUID] = field(default_factory=list)
    republished: list[UUID] = field(default_factory=list)
    unsent: int = 0
    groups_settled: int = 0
    # Expired leases left alone this round: the database came back too recently (see the module's doc).
    held_back: int = 0


class Reaper:
    def __init__(self, context: AgentContext, *, batch_size: int = BATCH_SIZE) -> None:
        settings = context.settings
        self._store = context.store
        self._publisher = context.publisher
        self._topology = context.topology
        self._context = context
        # A lease may expire as often as a message may be delivered; then the task is dead-lettered.
        self._max_expirations = settings.amqp.delivery_limit
        self._republish_after = timedelta(seconds=settings.broker.republish_after_seconds)
        self._batch = batch_size
        self._grace = settings.broker.reaper_recovery_grace_seconds
        # No round got through for this long: the database was away (rounds hung rather than failed).
        self._gap = settings.broker.reaper_interval_seconds + self._grace
        # Loop time since which the database has answered every round (None: it failed the last one), and
        # when it last answered. From the start: an agent that just started reclaims at once.
        self._answering_since: float | None = float("-inf")
        self._last_answer: float | None = None
        # Requeued tasks whose publish failed: retried each round until one succeeds, or until
        # ``stale_queued`` would find them anyway.
        self._unsent: dict[UUID, tuple[WorkMessage, float]] = {}
        # Stale tasks it could not re-publish (never routed, no queue for the specialist): left out of its
        # queries until then (loop time), so they never fill the batch and starve the others.
        self._skipped: dict[UUID, float] = {}
        # A failed round (the database or the broker away) is logged by the loop; the next one tries again.
        self._loop = PeriodicTask(
            "reaper", settings.broker.reaper_interval_seconds, self._round, first_after=0, logger=log
        )

    @property
    def running(self) -> bool:
        """Whether its loop runs (a condition of the agent's readiness)."""
        return self._loop.running

    def start(self) -> None:
        self._loop.start()

    async def stop(self, grace_seconds: float) -> None:
        """Let the current round finish (bounded), then stop."""
        await self._loop.stop(grace_seconds)

    async def _round(self) -> None:
        done = await self.sweep()
        if done.held_back:
            log.info(
                "reaper: %d expired lease(s) left to their workers' heartbeats: the database is back since"
                " less than %gs",
                done.held_back,
                self._grace,
            )
        if done.requeued or done.dead_lettered or done.republished:
            log.info(
                "reaper: %d requeued, %d dead-lettered, %d re-published, %d waiting to be sent",
                len(done.requeued),
                len(done.dead_lettered),
                len(done.republished),
                done.unsent,
            )

    async def sweep(self) -> Sweep:
        """One round: retry failed publishes, reclaim expired leases, re-publish stale requeued tasks, settle
        overdue groups."""
        try:
            return await self._sweep()
        except StoreUnavailable:
            self._answering_since = None
            raise

    async def _sweep(self) -> Sweep:
        done = Sweep()
        await self._retry_unsent(done)
        expired = await self._store.expired_leases(limit=self._batch)
        if self._watched_long_enough():
            for task in expired:
                await self._reclaim(task, done)
        else:
            done.held_back = len(expired)
        # By the database's clock, which wrote updated_at: the host's may be ahead of it or behind.
        older_than = await self._store.database_now() - self._republish_after
        now = asyncio.get_running_loop().time()
        self._skipped = {task_id: until for task_id, until in self._skipped.items() if until > now}
        exclude = [*self._unsent, *self._skipped]
        for task in await self._store.stale_queued(older_than=older_than, limit=self._batch, exclude=exclude):
            work = work_message(task)
            failure = await self._publish(work) if work is not None else NotAnnounceable("never routed")
            if failure is None:
                done.republished.append(task.id)
            elif isinstance(failure, Unroutable | NotAnnounceable):
                # Not a blip (the broker away fails every publish alike): try it again only after a while.
                self._skipped[task.id] = now + max(SKIP_SECONDS, self._republish_after.total_seconds())
        # Groups whose last child ended in a process that died before settling them (idempotent).
        for group_id in await self._store.unsettled_groups(limit=self._batch):
            await self._store.settle_group(group_id)
            done.groups_settled += 1
        done.unsent = len(self._unsent)
        return done

    def _watched_long_enough(self) -> bool:
        """The database just answered: has it answered long enough since it was last away to tell a dead
        worker's lease from one whose renewals the outage stopped?"""
        now = asyncio.get_running_loop().time()
        if self._answering_since is None or (
            self._last_answer is not None and now - self._last_answer > self._gap
        ):
            self._answering_since = now
        self._last_answer = now
        return now - self._answering_since >= self._grace

    async def _reclaim(self, task: TaskRecord, done: Sweep) -> None:
        work = work_message(task)
        kept = work.model_dump(mode="json") if work is not None else {"task_id": str(task.id)}
        outcome = await self._store.reclaim(task.id, self._max_expirations, message=kept)
        if outcome is TaskStatus.DEAD_LETTERED:
            metrics.LEASES_RECLAIMED.labels("dead_lettered").inc()
            metrics.DEAD_LETTERS.labels("delivery_limit").inc()
            metrics.count_dead_lettered(task.specialist, self._context.specialists)
            log.warning(
                "task %s dead-lettered: its lease expired %d times (reason=delivery_limit queue=lease)",
                task.id,
                task.lease_expirations + 1,
            )
            done.dead_lettered.append(task.id)
        elif outcome is TaskStatus.QUEUED:
            metrics.LEASES_RECLAIMED.labels("requeued").inc()
            log.warning(
                "task %s requeued: the lease of %s expired (%d of %d)",
                task.id,
                task.lease_owner,
                task.lease_expirations + 1,
                self._max_expirations,
            )
            done.requeued.append(task.id)
            if work is None:
                log.error("task %s was running without a routing decision: left queued", task.id)
            elif not await self._send(work):
                self._unsent[task.id] = (work, asyncio.get_running_loop().time())
        # None: another reaper took it, or its worker renewed the lease just in time.

    async def _retry_unsent(self, done: Sweep) -> None:
        now = asyncio.get_running_loop().time()
        for task_id, (work, since) in list(self._unsent.items()):
            if await self._send(work):
                del self._unsent[task_id]
                done.republished.append(task_id)
            elif now - since > self._republish_after.total_seconds():
                # Still queued with published_at NULL: ``stale_queued`` keeps finding it from now on.
                del self._unsent[task_id]

    async def _send(self, work: WorkMessage) -> bool:
        return await self._publish(work) is None

    async def _publish(self, work: WorkMessage) -> TaskyardError | None:
        try:
            await publish_then_mark(self._publisher, self._topology, work, self._store.mark_published)
        except TaskyardError as exc:
            # Back pressure, a broker outage, or no queue for the specialist: try again later.
            log.warning("could not publish task %s to %s: %s", work.task_id, work.specialist, exc)
            return exc
        return None

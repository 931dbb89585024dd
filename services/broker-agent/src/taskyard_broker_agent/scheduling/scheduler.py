"""The scheduler: every ``TASKYARD_BROKER_SCHEDULER_INTERVAL_SECONDS`` it claims the due cron schedules, creates
each due occurrence's task, moves each schedule on, commits, then announces the new tasks.

Exactly one task per occurrence, however many broker agents run it: a claim locks its schedules
(``FOR UPDATE SKIP LOCKED``, so another agent's round skips them instead of waiting) until the commit that
writes the tasks, their occurrence keys and the schedules' next ``next_run_at`` together. A crash before the
commit leaves nothing, and the next round meets the same occurrence again; the occurrence's idempotency key
(``schedule:<id>:<occurrence>``) makes any later meeting of it find its task instead of making a second one.

A task is announced after the commit, like a submission (``publish_then_mark``). An agent that dies, or a
broker that refuses, between the commit and the confirm leaves a pending row with ``published_at`` NULL: the
API's sweeper announces it after its grace period (it sweeps every unannounced pending or scheduled row,
whoever created it). Schedule-created tasks take no rate-limit token: the tenant's rate limit is for requests,
and a schedule's rate is its cron expression, checked when it was created.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from uuid import UUID

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.scheduling.plan import plan_occurrence
from taskyard_common import cron, metrics
from taskyard_common.announce import publish_then_mark
from taskyard_common.errors import TaskyardError
from taskyard_common.messages import IntakeMessage
from taskyard_common.periodic import PeriodicTask
from taskyard_common.store import TaskRecord
from taskyard_common.store.schedule_claims import DueBatch, OccurrenceRefused
from taskyard_common.store.schedule_records import DueSchedule, ScheduleOutcome
from taskyard_common.store.schedules import ScheduleStore

log = logging.getLogger(__name__)

# How long an occurrence's key keeps its task: an occurrence met again within this long finds it. The API's
# sweeper deletes keys after its own retention (TASKYARD_API_IDEMPOTENCY_RETENTION_SECONDS).
OCCURRENCE_KEY_RETENTION_SECONDS = 86400.0


@dataclass
class Round:
    """What one round did (for logs and tests)."""

    due: int = 0
    created: list[UUID] = field(default_factory=list)
    skipped: int = 0
    failed: int = 0
    unannounced: int = 0


class Scheduler:
    def __init__(self, context: AgentContext, schedules: ScheduleStore) -> None:
        settings = context.settings.scheduler
        self._store = context.store
        self._schedules = schedules
        self._publisher = context.publisher
        self._topology = context.topology
        self._batch = settings.batch_size
        # A failed round (the database or the broker away) is logged by the loop; the next one tries again.
        self._loop = PeriodicTask(
            "scheduler", settings.interval_seconds, self._round, first_after=0, logger=log
        )

    @property
    def running(self) -> bool:
        return self._loop.running

    def start(self) -> None:
        self._loop.start()

    async def stop(self, grace_seconds: float) -> None:
        await self._loop.stop(grace_seconds)

    async def _round(self) -> None:
        done = await self.run_once()
        if done.due:
            log.info(
                "scheduler: %d due, %d task(s) created, %d skipped, %d failed, %d left to the sweeper",
                done.due,
                len(done.created),
                done.skipped,
                done.failed,
                done.unannounced,
            )

    async def run_once(self) -> Round:
        """Claim a batch of due schedules, handle each, commit; then announce what was created. A batch
        that was full is followed at once by the next one."""
        done = Round()
        created: list[TaskRecord] = []
        while True:
            async with self._schedules.claim_due(self._batch) as batch:
                if done.due == 0:
                    # The first batch holds the most overdue occurrence (claims go oldest first).
                    late = [(batch.now - s.next_run_at).total_seconds() for s in batch.schedules]
                    metrics.SCHEDULER_LAG.set(max([0.0, *late]))
                for due in batch.schedules:
                    record = await self._handle(batch, due, done)
                    if record is not None:
                        created.append(record)
                full = len(batch.schedules) >= self._batch
            if not full:
                break
        for record in created:
            if not await self._announce(record):
                done.unannounced += 1
        return done

    async def _handle(self, batch: DueBatch, due: DueSchedule, done: Round) -> TaskRecord | None:
        plan = plan_occurrence(due, batch.now)
        done.due += 1
        metrics.SCHEDULES_DUE.inc()
        if plan.missed:
            metrics.SCHEDULE_OCCURRENCES_SKIPPED.labels("missed").inc(plan.missed)
            log.info("schedule %s: %d missed occurrence(s) collapsed into one", due.id, plan.missed)
        outcome, task_id, record = plan.outcome, None, None
        if plan.task is not None:
            try:
                made = await batch.create_task(
                    plan.task,
                    key=plan.key,
                    request_hash=plan.request_hash,
                    retention_seconds=OCCURRENCE_KEY_RETENTION_SECONDS,
                    schedule_id=due.id,
                    occurrence=cron.occurrence_text(plan.occurrence),
                )
            except OccurrenceRefused as exc:
                plan = replace(plan, outcome=ScheduleOutcome.FAILED, task=None, reason=str(exc))
                outcome = plan.outcome
            else:
                task_id, record = made.task_id, made.record
                if record is not None:
                    metrics.SCHEDULE_TASKS_CREATED.inc()
                    done.created.append(record.id)
                else:
                    metrics.SCHEDULE_OCCURRENCES_SKIPPED.labels("existing").inc()
        if outcome is ScheduleOutcome.SKIPPED_OVERLAP:
            metrics.SCHEDULE_OCCURRENCES_SKIPPED.labels("overlap").inc()
            done.skipped += 1
        elif outcome is ScheduleOutcome.FAILED:
            metrics.SCHEDULE_OCCURRENCES_SKIPPED.labels("failed").inc()
            done.failed += 1
            log.error("schedule %s: occurrence %s failed: %s", due.id, plan.occurrence, plan.reason)
        await batch.advance(
            due.id,
            next_run_at=plan.next_run_at,
            last_run_at=plan.occurrence,
            last_task_id=task_id,
            outcome=outcome,
        )
        return record

    async def _announce(self, record: TaskRecord) -> bool:
        try:
            await publish_then_mark(
                self._publisher, self._topology, IntakeMessage.from_record(record), self._store.mark_published
            )
        except TaskyardError as exc:
            # Committed and unannounced: the API's sweeper publishes it after its grace period.
            log.warning("schedule task %s not announced (%s); the sweeper will", record.id, exc)
            return False
        return True

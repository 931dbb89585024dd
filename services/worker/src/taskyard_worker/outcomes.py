"""Recording how an attempt ended: completed, failed, retry scheduled, cancelled, handed back, or nothing at
all (lease lost).

``usage`` here is what the attempt used beyond its recorded steps (each recorded step added its own): the
store adds it to the task's total, so every LLM call counts once however often the task is interrupted.

Order of a retry or a hand-back: publish the next message (confirmed), then record it in the store, then
the consume helper acks. A crash in between leaves a duplicate message at worst, never a lost task: the
store's conditional start drops the duplicate.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from taskyard_common.announce import announce
from taskyard_common.errors import PermanentError, StoreUnavailable, TaskyardError, TransientError
from taskyard_common.ids import uuid7
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage
from taskyard_common.metrics import TASK_HAND_BACKS, TASK_RETRIES, TASKS_DELEGATED, TASKS_FINISHED
from taskyard_common.retry import backoff_seconds, publish_delayed
from taskyard_common.store import NewTask, TaskRecord
from taskyard_common.task_errors import TaskError, TaskErrorType, task_error
from taskyard_common.topology import work_target
from taskyard_worker.context import WorkerContext
from taskyard_worker.crashes import crash_headers
from taskyard_worker.flights import Flight, Source, StopReason
from taskyard_worker.retries import plan_retry
from taskyard_worker.run_state import AgentResult
from taskyard_worker.tools.delegate import Delegating

log = logging.getLogger(__name__)

# Waits between the tries of recording a finished run's answer while the store is away.
_COMPLETE_RETRY_BASE_SECONDS = 0.5
_COMPLETE_RETRY_MAX_SECONDS = 5.0


def error_record(exc: PermanentError) -> TaskError:
    """The ``error`` stored on a failed task: a stable type and a human message (never the input)."""
    return task_error(exc.kind, str(exc))


class OutcomeRecorder:
    def __init__(self, ctx: WorkerContext) -> None:
        self._ctx = ctx

    async def complete(self, flight: Flight, result: AgentResult, usage: Usage, summary: str) -> None:
        """Record the answer; while the store is away, keep trying for ``complete_retry_seconds`` (the
        answer is in hand: losing it would cost an LLM call). Raises ``StoreUnavailable`` after that: the
        attempt is deferred, and the next one completes from the checkpointed answer."""
        output = {"output": result.output, "steps": result.steps, "tool_calls": result.tool_calls}
        if result.data is not None:
            output["data"] = result.data
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self._ctx.settings.complete_retry_seconds
        tries = 0
        while True:
            try:
                stored = await self._ctx.store.complete(flight.task_id, output, usage, self._ctx.owner)
                break
            except StoreUnavailable:
                tries += 1
                wait = backoff_seconds(tries, _COMPLETE_RETRY_BASE_SECONDS, _COMPLETE_RETRY_MAX_SECONDS)
                if loop.time() + wait > give_up:
                    raise
                log.warning(
                    "task %s: answer not recorded yet (store unavailable); trying again", flight.task_id
                )
                self._ctx.count("complete_retried")
                await asyncio.sleep(wait)
        self.finished(flight, stored, TaskStatus.COMPLETED, summary)

    async def fail(self, flight: Flight, exc: PermanentError, usage: Usage, summary: str) -> None:
        stored = await self._ctx.store.fail(flight.task_id, error_record(exc), usage, self._ctx.owner)
        self.finished(flight, stored, TaskStatus.FAILED, summary)

    def finished(self, flight: Flight, stored: bool, status: TaskStatus, summary: str) -> None:
        task_id = flight.task_id
        if not stored:
            # This worker lost the lease meanwhile (another delivery or the reaper has the task): the
            # transition did not apply and is not counted.
            log.warning("task %s: %s, but the lease was lost; not recorded", task_id, status)
            self._ctx.count("not_recorded")
            return
        TASKS_FINISHED.labels(self._ctx.specialist, status.value).inc()
        self._ctx.count(status.value)
        log.info("task %s: %s (%s)", task_id, status, summary)

    async def stopped(self, flight: Flight, usage: Usage, summary: str) -> None:
        """The run was cancelled from outside: record why."""
        task_id = flight.task_id
        reason = flight.stop_reason
        if reason is StopReason.SHUTDOWN:
            await self.hand_back(flight)
        elif reason is StopReason.CANCELLED:
            stored = await self._ctx.store.cancel_running(task_id, self._ctx.owner, usage)
            self.finished(flight, stored, TaskStatus.CANCELLED, summary)
        else:
            self.lost_lease(flight, summary)

    def lost_lease(self, flight: Flight, summary: str) -> None:
        log.warning("task %s: lease lost; run stopped, nothing recorded (%s)", flight.task_id, summary)
        self._ctx.count("lost_lease")

    async def hand_back(self, flight: Flight) -> None:
        """Shutdown: the same message (same attempt) back where it came from, then the lease released
        (queued, not charged); the helper then acks the original. No reject-with-requeue: that would count
        a delivery toward the dead-letter limit of a task that did nothing wrong. The next attempt resumes
        from the task's checkpoints."""
        message = flight.message
        exchange = (
            self._ctx.topology.tasks_exchange
            if flight.source is Source.MAIN
            else self._ctx.topology.quarantine_exchange
        )
        try:
            key = (
                self._ctx.topology.work_routing_key(
                    self._ctx.specialist, self._ctx.publisher.level(message.priority)
                )
                if flight.source is Source.MAIN
                else self._ctx.specialist
            )
            await self._ctx.publisher.publish(exchange, key, message, headers=crash_headers(flight.crashes))
        except TaskyardError as exc:
            # Keep the lease: an unsettled message is requeued when the channel closes, a settled one is
            # taken back by the reaper once the lease runs out. Releasing now could lose a settled task.
            raise TransientError(f"could not hand task {message.task_id} back: {exc}") from exc
        try:
            await self._ctx.store.release(message.task_id, self._ctx.owner)
        except StoreUnavailable:
            log.warning("task %s: handed back, but the lease could not be released", message.task_id)
        TASK_HAND_BACKS.labels(self._ctx.specialist).inc()
        log.info(
            "task %s: handed back to the queue (attempt %d, not charged)", message.task_id, message.attempt
        )
        self._ctx.count("handed_back")

    async def delegate(self, flight: Flight, record: TaskRecord, exc: Delegating) -> None:
        """Park the task (``waiting``) and create its children in one transaction, then announce them; the
        helper then acks the task's message: it holds nothing until its last child ends."""
        children = [
            NewTask(
                id=uuid7(),
                tenant=record.tenant,
                input=request.task,
                metadata=record.metadata,
                requested_specialist=request.specialist,
                instructions=request.instructions,
                parent_id=record.id,
                delegation={"parent_id": str(record.id), "call_id": request.call_id, "step": exc.step},
                depth=record.depth + 1,
                # Delegated work is part of the parent's: it waits at the parent's priority.
                priority=record.priority,
            )
            for request in exc.requests
        ]
        created = await self._ctx.store.delegate(flight.task_id, self._ctx.owner, children)
        if created is None:
            self.lost_lease(flight, "while delegating")
            return
        for child in created:
            try:
                await announce(self._ctx.publisher, self._ctx.topology, child, self._ctx.store.mark_published)
            except TaskyardError as publish_exc:
                # Committed, so not lost: the API's sweeper announces a pending task left unmarked.
                log.warning(
                    "task %s: delegated task %s not announced yet: %s", flight.task_id, child.id, publish_exc
                )
        TASKS_DELEGATED.labels(self._ctx.specialist).inc(len(created))
        log.info("task %s: waiting for %d delegated task(s)", flight.task_id, len(created))
        self._ctx.count("delegated")

    async def retry(
        self, flight: Flight, exc: BaseException, usage: Usage, record: TaskRecord, summary: str
    ) -> None:
        message = flight.message
        task_id = message.task_id
        error = str(exc) or type(exc).__name__
        # The store's count wins over a stale duplicate message that carries an older attempt number.
        attempt = max(message.attempt, record.attempts)
        plan = plan_retry(exc, attempt, self._ctx.spec, record.attempt_log)
        if plan is None:
            failure = task_error(
                TaskErrorType.RETRIES_EXHAUSTED, f"{attempt} attempts failed; the last: {error}"
            )
            stored = await self._ctx.store.fail(task_id, failure, usage, self._ctx.owner)
            self.finished(flight, stored, TaskStatus.FAILED, summary)
            return
        following = message.model_copy(update={"attempt": plan.next_attempt})
        try:
            tier = await publish_delayed(
                self._ctx.publisher,
                self._ctx.topology,
                work_target(self._ctx.specialist, self._ctx.publisher.level(following.priority)),
                following,
                plan.delay_seconds,
            )
        except TaskyardError as publish_exc:
            raise TransientError(
                f"could not schedule the retry of task {task_id}: {publish_exc}"
            ) from publish_exc
        now = datetime.now(UTC)
        entry: dict[str, Any] = {
            "attempt": attempt,
            "error": error,
            "reason": plan.reason,
            "delay_seconds": tier,
            "charged": plan.charged,
            "at": now.isoformat(),
        }
        try:
            scheduled = await self._ctx.store.schedule_retry(
                task_id,
                self._ctx.owner,
                entry=entry,
                next_attempt_at=now + timedelta(seconds=tier),
                usage=usage,
            )
        except StoreUnavailable:
            # The next message is on its way; it finds the lease and waits for it to run out.
            log.warning("task %s: retry published but not recorded: the store is unavailable", task_id)
            scheduled = False
        TASK_RETRIES.labels(self._ctx.specialist, plan.reason).inc()
        self._ctx.count("retry_scheduled")
        log.info(
            "task %s: attempt %d failed (%s); retry in %ds, %s%s (%s)",
            task_id,
            attempt,
            error,
            tier,
            "charged" if plan.charged else "not charged",
            "" if scheduled else ", not recorded",
            summary,
        )

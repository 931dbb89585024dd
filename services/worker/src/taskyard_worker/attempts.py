"""Running a started task and recording how its attempt ended: completed, failed, retry scheduled,
cancelled, handed back, or nothing at all (lease lost).

Order of a retry: publish the next attempt's message (confirmed), then record ``retrying`` in the store, then
the helper acks. A crash in between leaves a duplicate message at worst, never a lost task: the store's
conditional start drops the duplicate.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import aiormq

from taskyard_common.errors import PermanentError, StoreUnavailable, TaskyardError, TransientError
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage, WorkMessage
from taskyard_common.metrics import (
    LLM_TOKENS,
    TASK_DURATION,
    TASK_QUEUE_WAIT,
    TASK_RETRIES,
    TASKS_FINISHED,
    TASKS_IN_FLIGHT,
)
from taskyard_common.retry import publish_delayed
from taskyard_common.store import TaskRecord
from taskyard_common.task_errors import TaskError, TaskErrorType, task_error
from taskyard_common.topology import work_target
from taskyard_worker.context import WorkerContext
from taskyard_worker.flights import Flight, Source, StopReason
from taskyard_worker.retries import plan_retry
from taskyard_worker.runtime import AgentResult, RunTrace

log = logging.getLogger(__name__)


def error_record(exc: PermanentError) -> TaskError:
    """The ``error`` stored on a failed task: a stable type and a human message (never the input)."""
    return task_error(exc.kind, str(exc))


def queue_wait_seconds(record: TaskRecord, message: WorkMessage) -> float:
    """How long this attempt waited to start: since the task was routed (the message's ``sent_at`` when the
    store has no routing time), or since its last retry was due, whichever is later. The start and routing
    times both come from the database's clock; never negative."""
    since = record.routed_at or message.sent_at
    if record.attempt_log:
        last = record.attempt_log[-1]
        try:
            due = datetime.fromisoformat(last["at"]) + timedelta(seconds=float(last["delay_seconds"]))
        except (KeyError, TypeError, ValueError):
            due = None
        if due is not None and due > since:
            since = due
    started = record.started_at or datetime.now(UTC)
    return max(0.0, (started - since).total_seconds())


def _retrieve(task: asyncio.Task[Any]) -> None:
    # A run abandoned by a cancelled delivery must not log "exception was never retrieved".
    if not task.cancelled():
        task.exception()


class AttemptRunner:
    """Runs the attempt of a task this worker started and records how it ended."""

    def __init__(self, ctx: WorkerContext) -> None:
        self._ctx = ctx

    async def run(self, flight: Flight, record: TaskRecord) -> None:
        """Run the started task of ``flight`` (this worker holds its lease) and record the outcome."""
        message = flight.message
        log.info("task %s: started (attempt %d)", message.task_id, record.attempts)
        TASK_QUEUE_WAIT.labels(self._ctx.specialist).observe(queue_wait_seconds(record, message))
        with TASKS_IN_FLIGHT.labels(self._ctx.specialist).track_inprogress():
            await self._run(flight, record)

    async def _run(self, flight: Flight, record: TaskRecord) -> None:
        message = flight.message
        trace = RunTrace()
        started = time.monotonic()
        run = asyncio.create_task(
            self._ctx.agent.run(message.input, trace, timeout_seconds=message.timeout_seconds)
        )
        run.add_done_callback(_retrieve)
        flight.run = run
        if flight.stop_reason is not None:
            run.cancel()  # stopped before it began: a cancel raced the start
        try:
            await self._wait(flight, run)
        except asyncio.CancelledError:
            # The flight itself was cancelled: the process goes away without a graceful stop. Stop the run
            # and record nothing; the unacked message comes back, or (once settled) the reaper takes it back.
            run.cancel()
            raise
        finally:
            # Every attempt counts, whatever its end: the time and the tokens were spent all the same.
            TASK_DURATION.labels(self._ctx.specialist).observe(time.monotonic() - started)
            LLM_TOKENS.labels(self._ctx.specialist, "prompt").inc(trace.usage.prompt_tokens)
            LLM_TOKENS.labels(self._ctx.specialist, "completion").inc(trace.usage.completion_tokens)
        summary = f"{time.monotonic() - started:.2f}s, steps={trace.steps}, tokens={trace.usage.total_tokens}"
        # Usage adds up over the attempts: the store holds what the earlier ones used.
        usage = record.usage + trace.usage
        if run.cancelled():
            await self._stopped(flight, usage, summary)
            return
        exc = run.exception()
        if exc is not None and not isinstance(exc, Exception):
            raise exc
        try:
            if exc is None:
                await self._complete(flight, run.result(), usage, summary)
                return
            if isinstance(exc, PermanentError):
                stored = await self._ctx.store.fail(
                    message.task_id, error_record(exc), usage, self._ctx.owner
                )
                self._finished(flight, stored, TaskStatus.FAILED, summary)
                return
        except StoreUnavailable as store_exc:
            # The outcome could not be recorded: the attempt failed transiently after all.
            exc = store_exc
        if not isinstance(exc, TaskyardError):
            log.warning("task %s: unexpected error; retrying it", message.task_id, exc_info=exc)
        await self._retry(flight, exc, usage, record, summary)

    async def _wait(self, flight: Flight, run: asyncio.Task[Any]) -> None:
        if not flight.settled:
            done, _ = await asyncio.wait({run}, timeout=self._ctx.settings.settle_after_seconds)
            if not done:
                await self._settle_early(flight)
        if not run.done():
            await asyncio.wait({run})

    async def _settle_early(self, flight: Flight) -> None:
        """Ack a long task's message while it keeps running: the lease, the heartbeat and the reaper protect
        it from now on, and RabbitMQ's consumer timeout can no longer close the channel under it.

        The store learns it first: acked but not marked, a dead worker's task would be no one's to reclaim.
        """
        try:
            if not await self._ctx.store.settle(flight.message.task_id, self._ctx.owner):
                return  # the lease is gone: the run is being stopped, nothing to settle early
        except StoreUnavailable:
            log.warning(
                "task %s: could not mark the message settled; keeping it unacked", flight.message.task_id
            )
            return
        try:
            await flight.incoming.ack()
        except (RuntimeError, aiormq.exceptions.AMQPError) as exc:
            # The channel is gone: the broker redelivers the message, which finds the lease and waits.
            log.warning("task %s: could not ack early: %s", flight.message.task_id, type(exc).__name__)
            return
        log.info(
            "task %s: still running after %gs; message acked early",
            flight.message.task_id,
            self._ctx.settings.settle_after_seconds,
        )
        self._ctx.count("settled_early")

    async def _complete(self, flight: Flight, result: AgentResult, usage: Usage, summary: str) -> None:
        output = {"output": result.output, "steps": result.steps, "tool_calls": result.tool_calls}
        stored = await self._ctx.store.complete(flight.message.task_id, output, usage, self._ctx.owner)
        self._finished(flight, stored, TaskStatus.COMPLETED, summary)

    def _finished(self, flight: Flight, stored: bool, status: TaskStatus, summary: str) -> None:
        task_id = flight.message.task_id
        if not stored:
            # This worker lost the lease meanwhile (another delivery or the reaper has the task): the
            # transition did not apply and is not counted.
            log.warning("task %s: %s, but the lease was lost; not recorded", task_id, status)
            self._ctx.count("not_recorded")
            return
        TASKS_FINISHED.labels(self._ctx.specialist, status.value).inc()
        self._ctx.count(status.value)
        log.info("task %s: %s (%s)", task_id, status, summary)

    async def _stopped(self, flight: Flight, usage: Usage, summary: str) -> None:
        task_id = flight.message.task_id
        reason = flight.stop_reason
        if reason is StopReason.SHUTDOWN:
            await self._hand_back(flight)
        elif reason is StopReason.CANCELLED:
            stored = await self._ctx.store.cancel_running(task_id, self._ctx.owner, usage)
            self._finished(flight, stored, TaskStatus.CANCELLED, summary)
        else:
            log.warning("task %s: lease lost; run stopped, nothing recorded (%s)", task_id, summary)
            self._ctx.count("lost_lease")

    async def _hand_back(self, flight: Flight) -> None:
        """Shutdown after the grace period: the same message (same attempt) back where it came from, then
        the lease released (queued, not charged); the helper then acks the original. No reject-with-requeue:
        that would count a delivery toward the dead-letter limit of a task that did nothing wrong."""
        message = flight.message
        exchange = (
            self._ctx.topology.tasks_exchange
            if flight.source is Source.MAIN
            else self._ctx.topology.quarantine_exchange
        )
        try:
            await self._ctx.publisher.publish(exchange, self._ctx.specialist, message)
        except TaskyardError as exc:
            # Keep the lease: an unsettled message is requeued when the channel closes, a settled one is
            # taken back by the reaper once the lease runs out. Releasing now could lose a settled task.
            raise TransientError(f"could not hand task {message.task_id} back: {exc}") from exc
        try:
            await self._ctx.store.release(message.task_id, self._ctx.owner)
        except StoreUnavailable:
            log.warning("task %s: handed back, but the lease could not be released", message.task_id)
        log.info(
            "task %s: handed back to the queue (attempt %d, not charged)", message.task_id, message.attempt
        )
        self._ctx.count("handed_back")

    async def _retry(
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
            self._finished(flight, stored, TaskStatus.FAILED, summary)
            return
        following = message.model_copy(update={"attempt": plan.next_attempt})
        try:
            tier = await publish_delayed(
                self._ctx.publisher,
                self._ctx.topology,
                work_target(self._ctx.specialist),
                following,
                plan.delay_seconds,
            )
        except TaskyardError as publish_exc:
            raise TransientError(
                f"could not schedule the retry of task {task_id}: {publish_exc}"
            ) from publish_exc
        now = datetime.now(UTC)
        entry = {
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

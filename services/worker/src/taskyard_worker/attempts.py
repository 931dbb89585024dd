"""Running the attempt of a started task: its checkpoints loaded, the agent run under the lease, the
message settled early when the run is long, and the end handed to ``OutcomeRecorder`` (outcomes.py).

A task with checkpoints continues from them (unless its specialist says ``resume: false``, when they are
dropped and the run starts over); the attempt history then says from which step.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import aiormq

from taskyard_common.errors import PermanentError, StoreUnavailable, TaskyardError
from taskyard_common.messages import WorkMessage
from taskyard_common.metrics import (
    LLM_TOKENS,
    TASK_DURATION,
    TASK_EARLY_SETTLES,
    TASK_QUEUE_WAIT,
    TASK_RESUMES,
    TASKS_IN_FLIGHT,
)
from taskyard_common.store import Step, TaskRecord
from taskyard_worker.checkpoints import LeaseLost, RunCheckpoint
from taskyard_worker.context import WorkerContext
from taskyard_worker.flights import Flight
from taskyard_worker.llm_calls import CostCap
from taskyard_worker.outcomes import OutcomeRecorder
from taskyard_worker.run_state import AgentResult, HandBackAfterStep, RunTrace
from taskyard_worker.tokens import TokenStream
from taskyard_worker.tools.delegate import DELEGATE, Delegating, DelegationLimits

log = logging.getLogger(__name__)


def queue_wait_seconds(record: TaskRecord, message: WorkMessage) -> float:
    """How long this attempt waited to start: since the task was routed (the message's ``sent_at`` when the
    store has no routing time), or since its last retry was due, whichever is later. The start and routing
    times both come from the database's clock; never negative."""
    since = record.routed_at or message.sent_at
    # The last retry's entry; a refused start (``start_deferred``) left the task waiting all the same.
    retries = [entry for entry in record.attempt_log if "delay_seconds" in entry]
    if retries:
        last = retries[-1]
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
        self._outcomes = OutcomeRecorder(ctx)

    async def run(self, flight: Flight, record: TaskRecord) -> None:
        """Run the started task of ``flight`` (this worker holds its lease) and record the outcome."""
        message = flight.message
        log.info("task %s: started (attempt %d)", message.task_id, record.attempts)
        wait = queue_wait_seconds(record, message)
        TASK_QUEUE_WAIT.labels(self._ctx.specialist, message.priority.value).observe(wait)
        with TASKS_IN_FLIGHT.labels(self._ctx.specialist).track_inprogress():
            await self._run(flight, record)

    async def _run(self, flight: Flight, record: TaskRecord) -> None:
        trace = RunTrace()
        started = time.monotonic()
        run = asyncio.create_task(self._attempt(flight, record, trace))
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
        # What no checkpoint holds: the outcome adds it to the task's usage.
        usage = trace.unrecorded
        if run.cancelled():
            await self._outcomes.stopped(flight, usage, summary)
            return
        exc = run.exception()
        if exc is not None and not isinstance(exc, Exception):
            raise exc
        await self._note_resume(flight, record, trace)
        try:
            if exc is None:
                await self._outcomes.complete(flight, run.result(), usage, summary)
                return
            if isinstance(exc, HandBackAfterStep):
                await self._outcomes.hand_back(flight)
                return
            if isinstance(exc, Delegating):
                await self._outcomes.delegate(flight, record, exc)
                return
            if isinstance(exc, LeaseLost):
                self._outcomes.lost_lease(flight, summary)
                return
            if isinstance(exc, PermanentError):
                await self._outcomes.fail(flight, exc, usage, summary)
                return
        except StoreUnavailable as store_exc:
            # The outcome could not be recorded: the attempt failed transiently after all (uncharged: the
            # next attempt resumes from the checkpoints).
            exc = store_exc
        if not isinstance(exc, TaskyardError):
            log.warning("task %s: unexpected error; retrying it", flight.task_id, exc_info=exc)
        await self._outcomes.retry(flight, exc, usage, record, summary)

    async def _attempt(self, flight: Flight, record: TaskRecord, trace: RunTrace) -> AgentResult:
        """Load the checkpoints, then run the agent from them (streaming its text, if the specialist says so)."""
        ctx = self._ctx
        steps: list[Step] = []
        recorded_bytes = record.checkpoint_bytes
        if recorded_bytes:
            if ctx.spec.resume:
                steps = await ctx.store.steps(flight.task_id)
            else:
                await ctx.store.discard_steps(flight.task_id)
                recorded_bytes = 0
        checkpoint = None
        if ctx.settings.checkpoint_max_bytes > 0:
            checkpoint = RunCheckpoint(
                ctx.steps,
                flight.task_id,
                recorded_bytes=recorded_bytes,
                max_bytes=ctx.settings.checkpoint_max_bytes,
            )
        tokens = None
        if ctx.spec.stream:
            tokens = TokenStream(
                ctx.store, flight.task_id, ctx.owner, flush_seconds=ctx.settings.token_flush_seconds
            )
        try:
            return await ctx.agent.run(
                flight.message.input,
                trace,
                timeout_seconds=flight.message.timeout_seconds,
                steps=steps,
                checkpoint=checkpoint,
                stop_after_step=flight.stop_after_step,
                tokens=tokens,
                instructions=record.instructions,
                delegation=await self._delegation_limits(record),
                cost_cap=await self._cost_cap(record),
            )
        finally:
            if tokens is not None:
                tokens.close()

    async def _cost_cap(self, record: TaskRecord) -> CostCap | None:
        """The tenant's ``max_cost_per_task`` and what the task cost before this attempt (None: no limit)."""
        budget = await self._ctx.budgets.get(record.tenant)
        if budget.max_cost_per_task is None:
            return None
        return CostCap(limit=budget.max_cost_per_task, spent=record.cost)

    async def _delegation_limits(self, record: TaskRecord) -> DelegationLimits | None:
        """What the task may still delegate (None: its specialist does not delegate)."""
        if DELEGATE not in self._ctx.spec.tools:
            return None
        settings = self._ctx.settings
        return DelegationLimits(
            depth=record.depth,
            max_depth=settings.max_delegation_depth,
            children=len(await self._ctx.store.children(record.id)),
            max_children=settings.max_delegated_tasks,
        )

    async def _note_resume(self, flight: Flight, record: TaskRecord, trace: RunTrace) -> None:
        """A resumed attempt says so in the task's history (best effort: the outcome matters more)."""
        if trace.resumed_from_step is None:
            return
        TASK_RESUMES.labels(self._ctx.specialist).inc()
        entry = {
            "event": "resumed",
            "attempt": max(flight.message.attempt, record.attempts),
            "resumed_from_step": trace.resumed_from_step,
            "at": datetime.now(UTC).isoformat(),
        }
        log.info("task %s: resumed after step %d", flight.task_id, trace.resumed_from_step)
        try:
            await self._ctx.store.append_attempt_log(flight.task_id, self._ctx.owner, entry)
        except StoreUnavailable:
            log.warning("task %s: the resume could not be noted in its history", flight.task_id)

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
            if not await self._ctx.store.settle(flight.task_id, self._ctx.owner):
                return  # the lease is gone: the run is being stopped, nothing to settle early
        except StoreUnavailable:
            log.warning("task %s: could not mark the message settled; keeping it unacked", flight.task_id)
            return
        try:
            await flight.incoming.ack()
        except (RuntimeError, aiormq.exceptions.AMQPError) as exc:
            # The channel is gone: the broker redelivers the message, which finds the lease and waits.
            log.warning("task %s: could not ack early: %s", flight.task_id, type(exc).__name__)
            return
        TASK_EARLY_SETTLES.labels(self._ctx.specialist).inc()
        log.info(
            "task %s: still running after %gs; message acked early",
            flight.task_id,
            self._ctx.settings.settle_after_seconds,
        )
        self._ctx.count("settled_early")

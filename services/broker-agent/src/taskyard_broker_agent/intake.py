"""The intake handler: one ``IntakeMessage`` in, one routing decision recorded, one ``WorkMessage`` out.

Idempotent under redelivery, because the store is the source of truth:

- the decision is recorded (pending → queued) BEFORE the work message is published, so a worker never sees
  a task that is still pending;
- a redelivery after a crash between recording and publishing finds the task queued and publishes the
  STORED decision again, without routing a second time (the answer could differ, and it costs an LLM call);
- a task that is already running or finished (cancelled included), or that the API discarded, is
  acknowledged without a publish.

Returning acknowledges (the consume helper settles). A transient failure never holds or requeues the
message: it is published again through a delay queue with ``attempt + 1`` and acknowledged, so waiting
costs no delivery of the intake queue's limit; after ``max_attempts`` the task fails with
``routing_failed``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from aio_pika.abc import AbstractIncomingMessage

from taskyard_broker_agent.context import AgentContext
from taskyard_common import metrics
from taskyard_common.announce import publish_then_mark
from taskyard_common.errors import PermanentError, TaskyardError
from taskyard_common.lifecycle import ROUTING_UNFINISHED, TaskStatus
from taskyard_common.messages import (
    IntakeMessage,
    RoutingDecision,
    RoutingMethod,
    Usage,
    WorkMessage,
)
from taskyard_common.retry import backoff_seconds, publish_delayed
from taskyard_common.store import TaskRecord
from taskyard_common.task_errors import TaskErrorType, task_error
from taskyard_common.topology import INTAKE_TARGET

log = logging.getLogger(__name__)

EXPLICIT_REASON = "requested by the client"
_ERROR_DETAIL_MAX = 500


def deadline_passed(deadline: datetime | None, now: datetime | None = None) -> bool:
    if deadline is None:
        return False
    if deadline.tzinfo is None:  # a client may send a naive timestamp: taskyard means UTC
        deadline = deadline.replace(tzinfo=UTC)
    return deadline <= (now or datetime.now(UTC))


def as_utc(moment: datetime | None) -> datetime | None:
    """A naive timestamp from a client means UTC (as in ``deadline_passed``)."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment


def describe_error(exc: BaseException) -> str:
    """Safe to store and log: taskyard's own errors say what failed; anything else only by its type."""
    if isinstance(exc, TaskyardError):
        return f"{type(exc).__name__}: {exc}"[:_ERROR_DETAIL_MAX]
    return type(exc).__name__


class IntakeHandler:
    def __init__(self, context: AgentContext) -> None:
        self._catalog = context.catalog
        self._store = context.store
        self._publisher = context.publisher
        self._router = context.router
        self._topology = context.topology
        broker = context.settings.broker
        self._retry_base = broker.retry_base_seconds
        self._retry_max = broker.retry_max_seconds
        self._max_attempts = broker.max_attempts

    async def __call__(self, message: IntakeMessage, delivery: AbstractIncomingMessage) -> None:
        try:
            await self.handle(message)
        except PermanentError:
            raise  # the consume helper dead-letters it
        except Exception as exc:
            await self._retry_later(message, exc)

    async def _retry_later(self, message: IntakeMessage, exc: Exception) -> None:
        """Route again later, through a delay queue; fail the task once the attempts are used up.

        If this publish (or the final ``fail``) raises as well, the exception reaches the consume helper,
        which requeues the message: the intake queue's delivery limit bounds that, then the dead-letter
        consumer records the task.
        """
        detail = describe_error(exc)
        if message.attempt >= self._max_attempts:
            await self._give_up(message, detail)
            return
        delay = backoff_seconds(message.attempt, self._retry_base, self._retry_max)
        again = message.model_copy(update={"attempt": message.attempt + 1})
        tier = await publish_delayed(self._publisher, self._topology, INTAKE_TARGET, again, delay)
        metrics.INTAKE_RETRIES.inc()
        log.warning(
            "routing task %s failed (attempt %d of %d: %s); next attempt in %d s",
            message.task_id,
            message.attempt,
            self._max_attempts,
            detail,
            tier,
            # Expected failures stay one line; anything else keeps its traceback.
            exc_info=not isinstance(exc, TaskyardError),
        )

    async def _give_up(self, message: IntakeMessage, detail: str) -> None:
        task = await self._store.get(message.task_id)
        if task is None or task.status not in ROUTING_UNFINISHED:
            # Discarded, finished, or a worker has it after all (a publish whose confirm timed out may
            # still have reached the queue): nothing to fail.
            return
        error = task_error(
            TaskErrorType.ROUTING_FAILED,
            f"routing failed {message.attempt} times; last error: {detail}",
            attempts=message.attempt,
        )
        if await self._store.fail(message.task_id, error, Usage()):
            log.error(
                "failed task %s: routing failed %d times (%s)", message.task_id, message.attempt, detail
            )

    async def handle(self, message: IntakeMessage) -> None:
        requested = message.requested_specialist
        if requested is not None and self._catalog.get(requested) is not None:
            # Nothing to decide, so nothing to protect by reading the task first: one conditional statement
            # records the decision, and only when it does not apply is the task read to see why.
            started = time.perf_counter()
            decision = RoutingDecision(
                method=RoutingMethod.EXPLICIT, specialist=requested, reason=EXPLICIT_REASON, confidence=1.0
            )
            metrics.ROUTING_DURATION.labels(decision.method.value).observe(time.perf_counter() - started)
            if not await self._record(message, decision):
                await self._not_routed(message)
            return
        task = await self._store.get(message.task_id)
        if task is None or task.status is not TaskStatus.PENDING:
            # Checked before routing, so a redelivery never pays for a second LLM call.
            await self._resume(message, task)
            return
        if deadline_passed(task.deadline or message.deadline):
            await self._expire(message)
            return
        started = time.perf_counter()
        decision = await self._decide(message)
        if decision is None:
            return
        # Labelled by the method that decided: an LLM answer that fell back to the rules counts as rules.
        metrics.ROUTING_DURATION.labels(decision.method.value).observe(time.perf_counter() - started)
        if not await self._record(message, decision):
            await self._not_routed(message)

    async def _record(self, message: IntakeMessage, decision: RoutingDecision) -> bool:
        """Record the decision (pending → queued), then publish the work message; False (nothing published)
        when the task is not pending any more or its deadline passed."""
        routed = await self._store.route(message.task_id, decision, as_utc(message.deadline))
        if routed is None:
            return False
        metrics.ROUTING_DECISIONS.labels(decision.method.value, decision.specialist).inc()
        # Never the input or the reason (the model may quote the request): ids and labels only.
        log.info(
            "routed task %s: method=%s specialist=%s confidence=%.2f",
            message.task_id,
            decision.method.value,
            decision.specialist,
            decision.confidence,
        )
        await self._publish(message, decision, routed.deadline, routed.timeout_seconds)
        return True

    async def _not_routed(self, message: IntakeMessage) -> None:
        """The decision did not apply: another delivery got there first, the task was cancelled or
        discarded, or its deadline passed. Follow the store."""
        task = await self._store.get(message.task_id)
        if task is not None and task.status is TaskStatus.PENDING:
            # Still pending, so the deadline refused it (by the database's clock).
            await self._expire(message)
            return
        await self._resume(message, task)

    async def _decide(self, message: IntakeMessage) -> RoutingDecision | None:
        """The decision, or None when the task was failed instead (an unknown requested specialist)."""
        requested = message.requested_specialist
        if requested is None:
            return await self._router.route(message.input)
        # (A requested specialist of the catalog never gets here: ``handle`` records it at once.)
        # The API validated the name against its own catalog; this broker's catalog differs (a rollout in
        # progress). Retrying cannot help, and silently routing elsewhere would ignore the client.
        error = task_error(
            TaskErrorType.UNKNOWN_SPECIALIST, f"specialist {requested!r} is not in the broker agent's catalog"
        )
        await self._store.fail(message.task_id, error, Usage())
        log.warning("failed task %s: requested specialist %s not in the catalog", message.task_id, requested)
        return None

    async def _expire(self, message: IntakeMessage) -> None:
        if await self._store.expire(message.task_id, "the task's deadline passed before it was routed"):
            log.info("failed task %s: its deadline passed before routing", message.task_id)

    async def _resume(self, message: IntakeMessage, task: TaskRecord | None) -> None:
        if task is None:
            # The API discards a task whose intake publish it could not confirm, and told the client so.
            log.warning("dropping intake message for unknown task %s (discarded by the API)", message.task_id)
            return
        if task.status.terminal:
            log.info("ignoring intake message for task %s: already %s", task.id, task.status.value)
            return
        if task.status is TaskStatus.QUEUED and task.routing is not None:
            if deadline_passed(task.deadline or message.deadline):
                await self._expire(message)
                return
            log.info(
                "re-publishing task %s with its stored decision: method=%s specialist=%s",
                task.id,
                task.routing.method.value,
                task.routing.specialist,
            )
            await self._publish(message, task.routing, task.deadline, task.timeout_seconds)
            return
        log.info("ignoring duplicate intake message for task %s (status %s)", task.id, task.status.value)

    async def _publish(
        self,
        message: IntakeMessage,
        decision: RoutingDecision,
        deadline: datetime | None,
        timeout_seconds: float | None,
    ) -> None:
        work = WorkMessage(
            task_id=message.task_id,
            traceparent=message.traceparent,
            specialist=decision.specialist,
            input=message.input,
            routing=decision,
            metadata=message.metadata,
            # The message's limits, else the task's (an intake message re-sent by the API's sweeper may
            # not carry them).
            deadline=message.deadline or deadline,
            timeout_seconds=message.timeout_seconds or timeout_seconds,
        )
        # Confirmed and mandatory: the handler returns (and the intake message is acked) only once the
        # specialist queue holds the message; no mark: the intake message's redelivery recovers (see
        # taskyard_common.announce). A transient failure goes through the delay path above. ``Unroutable``
        # (the specialist queue was deleted) dead-letters the intake message; the dead-letter consumer
        # records the task as dead_lettered, and a replay once the queue exists again sends it.
        await publish_then_mark(self._publisher, self._topology, work, mark=None)

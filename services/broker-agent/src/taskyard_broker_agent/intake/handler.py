"""The intake handler: one ``IntakeMessage`` in, one routing decision recorded, one ``WorkMessage`` out.

What to do with a message is ``decisions.decide_intake``'s answer; this module carries it out. The
decision is recorded (pending → queued) BEFORE the work message is published (or, when the tenant's lane
for the specialist is full, the task is parked in that same statement and nothing is published: see
``lanes.py``), so a worker never sees a task that is still pending, and the task is read BEFORE routing, so
a redelivery never pays for a second LLM call.
A task not due yet (``not_before`` ahead: ``scheduled``) is not routed: its message goes back through the delay
queues, uncharged, and is acknowledged (``Delay``), so a scheduled task holds no message and no slot.

Returning acknowledges (the consume helper settles). A transient failure never holds or requeues the
message: it is published again through a delay queue with ``attempt + 1`` and acknowledged, so waiting
costs no delivery of the intake queue's limit; after ``max_attempts`` the task fails with
``routing_failed``.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import assert_never

from aio_pika.abc import AbstractIncomingMessage

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.intake.decisions import (
    Delay,
    DropUnknown,
    Expire,
    FailUnknownSpecialist,
    IgnoreDuplicate,
    IgnoreFinished,
    IntakeAction,
    Record,
    Republish,
    Route,
    as_utc,
    decide_intake,
    explicit_decision,
    not_due,
)
from taskyard_broker_agent.lanes import Lanes
from taskyard_common import metrics
from taskyard_common.amqp import Publisher
from taskyard_common.announce import announce, publish_then_mark
from taskyard_common.errors import PermanentError, TaskyardError
from taskyard_common.ids import uuid7
from taskyard_common.lifecycle import ROUTING_UNFINISHED
from taskyard_common.messages import IntakeMessage, RoutingDecision, WorkMessage
from taskyard_common.retry import backoff_seconds, publish_delayed
from taskyard_common.store import NewTask, RoutedTask, TaskRecord
from taskyard_common.store.parts import part_instructions
from taskyard_common.task_errors import TaskErrorType, task_error
from taskyard_common.topology import intake_target

log = logging.getLogger(__name__)

_ERROR_DETAIL_MAX = 500


def describe_error(exc: BaseException) -> str:
    """Safe to store and log: taskyard's own errors say what failed; anything else only by its type."""
    if isinstance(exc, TaskyardError):
        return f"{type(exc).__name__}: {exc}"[:_ERROR_DETAIL_MAX]
    return type(exc).__name__


def delay_target(publisher: Publisher, message: IntakeMessage) -> str:
    """Where a delayed intake message comes back to (a retry, or a task not due yet): its level's queue."""
    return intake_target(publisher.level(message.priority))


class IntakeHandler:
    def __init__(self, context: AgentContext, lanes: Lanes | None = None) -> None:
        """``lanes``: the tenants' lane depths (None: nothing is parked at routing)."""
        self._context = context
        self._lanes = lanes
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

    async def handle(self, message: IntakeMessage) -> None:
        started = time.perf_counter()
        requested = message.requested_specialist
        if requested is not None and self._context.catalog.get(requested) is None:
            # The API may know a new specialist before this process's next look at the catalog source: look
            # now, rather than fail the task as unknown.
            await self._context.live.refresh()
        explicit = explicit_decision(message, self._context.catalog)
        if explicit is not None and not not_due(message, datetime.now(UTC)):
            # Nothing to decide, so nothing to protect by reading the task first: one conditional statement
            # records the decision, and only when it does not apply is the task read to see why.
            metrics.ROUTING_DURATION.labels(explicit.method.value).observe(time.perf_counter() - started)
            await self._carry_out(message, Record(explicit))
            return
        task = await self._store.get(message.task_id)
        await self._carry_out(message, decide_intake(message, task, self._context.catalog, datetime.now(UTC)))

    async def _carry_out(self, message: IntakeMessage, action: IntakeAction) -> None:
        task_id = message.task_id
        match action:
            case Route(tenant, split):
                started = time.perf_counter()
                decision = await self._router.route(message.input, tenant, multi=split is not None)
                # Labelled by the method that decided: an LLM answer that fell back to the rules counts as
                # rules.
                metrics.ROUTING_DURATION.labels(decision.method.value).observe(time.perf_counter() - started)
                if decision.parts and split is not None:
                    await self._split(message, split, decision)
                else:
                    await self._record(message, decision)
            case Record(decision):
                await self._record(message, decision)
            case Republish(decision, deadline, timeout_seconds, tenant, priority):
                log.info(
                    "re-publishing task %s with its stored decision: method=%s specialist=%s",
                    task_id,
                    decision.method.value,
                    decision.specialist,
                )
                await self._publish(
                    message, decision, RoutedTask(deadline, timeout_seconds, tenant, priority)
                )
            case Expire():
                if await self._store.expire(task_id, "the task's deadline passed before it was routed"):
                    log.info("failed task %s: its deadline passed before routing", task_id)
            case Delay(seconds, not_before):
                # Uncharged: the same attempt comes back, carrying not_before for its next look.
                again = message.model_copy(update={"not_before": not_before})
                await publish_delayed(
                    self._publisher, self._topology, delay_target(self._publisher, message), again, seconds
                )
                metrics.INTAKE_DELAYED.inc()
                log.debug("task %s not due until %s: back in %d s", task_id, not_before.isoformat(), seconds)
            case FailUnknownSpecialist(specialist):
                error = task_error(
                    TaskErrorType.UNKNOWN_SPECIALIST,
                    f"specialist {specialist!r} is not in the broker agent's catalog",
                )
                await self._store.fail_unstarted(task_id, error)
                log.warning("failed task %s: requested specialist %s not in the catalog", task_id, specialist)
            case DropUnknown():
                log.warning("dropping intake message for unknown task %s (discarded by the API)", task_id)
            case IgnoreFinished(status):
                log.info("ignoring intake message for task %s: already %s", task_id, status.value)
            case IgnoreDuplicate(status):
                log.info("ignoring duplicate intake message for task %s (status %s)", task_id, status.value)
            case _:
                assert_never(action)

    async def _record(self, message: IntakeMessage, decision: RoutingDecision) -> None:
        """Record the decision (pending → queued), then publish the work message. When the store refuses
        (another delivery got there first, the task was cancelled or discarded, or its deadline passed),
        read the task and follow it."""
        deadline = as_utc(message.deadline) if message.deadline is not None else None
        depth = self._lanes.depth(decision.specialist) if self._lanes is not None else None
        routed = await self._store.route(message.task_id, decision, deadline, lane_depth=depth)
        if routed is None:
            await self._refused(message)
            return
        metrics.ROUTING_DECISIONS.labels(decision.method.value, decision.specialist).inc()
        if routed.parked:
            # Its tenant's lane is full: the feeder publishes it when there is room (lanes.py). Nothing to
            # publish now; the intake message is acked, and a redelivery of it finds the task parked.
            metrics.TASKS_PARKED.labels(decision.specialist).inc()
            log.debug("routed task %s to %s: parked", message.task_id, decision.specialist)
            return
        # Never the input or the reason (the model may quote the request): ids and labels only.
        log.info(
            "routed task %s: method=%s specialist=%s confidence=%.2f",
            message.task_id,
            decision.method.value,
            decision.specialist,
            decision.confidence,
        )
        await self._publish(message, decision, routed)

    async def _split(self, message: IntakeMessage, task: TaskRecord, decision: RoutingDecision) -> None:
        """A request of distinct jobs: one child task per part, in a group whose combine step is this task
        (it waits, holding nothing, then the catalog's combiner answers from the parts' outcomes). The
        children are announced here; one whose announcement is lost stays pending and unpublished, for the
        API's sweeper."""
        group_id = uuid7()
        deadline = task.deadline or (as_utc(message.deadline) if message.deadline is not None else None)
        parts = [
            NewTask(
                id=uuid7(),
                tenant=task.tenant,
                input=task.input,
                metadata=task.metadata,
                requested_specialist=part.specialist,
                deadline=deadline,
                timeout_seconds=task.timeout_seconds,
                instructions=part_instructions(part.job),
                group_id=group_id,
                group_role="child",
                priority=task.priority,
            )
            for part in decision.parts
        ]
        combined = decision.model_copy(update={"specialist": self._context.catalog.combiner})
        children = await self._store.route_parts(message.task_id, combined, group_id, parts, deadline)
        if children is None:
            await self._refused(message)
            return
        metrics.ROUTING_DECISIONS.labels(combined.method.value, combined.specialist).inc()
        metrics.ROUTING_PARTS.labels(combined.method.value).observe(len(children))
        log.info(
            "split task %s into %d parts (group %s): method=%s specialists=%s",
            message.task_id,
            len(children),
            group_id,
            combined.method.value,
            ",".join(p.specialist for p in decision.parts),
        )
        for child in children:
            await announce(self._publisher, self._topology, child, self._store.mark_published)

    async def _refused(self, message: IntakeMessage) -> None:
        """The store refused to record a decision: read the task and follow it."""
        task = await self._store.get(message.task_id)
        now = datetime.now(UTC)
        await self._carry_out(
            message, decide_intake(message, task, self._context.catalog, now, route_refused=True)
        )

    async def _publish(self, message: IntakeMessage, decision: RoutingDecision, routed: RoutedTask) -> None:
        work = WorkMessage(
            task_id=message.task_id,
            traceparent=message.traceparent,
            specialist=decision.specialist,
            input=message.input,
            routing=decision,
            metadata=message.metadata,
            tenant=routed.tenant,
            # The task's priority (the stored one: an intake message written before priorities has none).
            priority=routed.priority,
            # The message's limits, else the task's (an intake message re-sent by the API's sweeper may
            # not carry them).
            deadline=message.deadline or routed.deadline,
            timeout_seconds=message.timeout_seconds or routed.timeout_seconds,
        )
        # Confirmed and mandatory: the handler returns (and the intake message is acked) only once the
        # specialist queue holds the message; no mark: the intake message's redelivery recovers (see
        # taskyard_common.announce). A transient failure goes through the delay path below. ``Unroutable``
        # (the specialist queue was deleted) dead-letters the intake message; the dead-letter consumer
        # records the task as dead_lettered, and a replay once the queue exists again sends it.
        await publish_then_mark(self._publisher, self._topology, work, mark=None)

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
        tier = await publish_delayed(
            self._publisher, self._topology, delay_target(self._publisher, message), again, delay
        )
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
        # Conditional in the statement: a worker that started the task since the read above keeps it.
        if await self._store.fail_unstarted(message.task_id, error):
            log.error(
                "failed task %s: routing failed %d times (%s)", message.task_id, message.attempt, detail
            )

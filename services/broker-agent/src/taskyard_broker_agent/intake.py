"""The intake handler: one ``IntakeMessage`` in, one routing decision recorded, one ``WorkMessage`` out.

Idempotent under redelivery, because the store is the source of truth:

- the decision is recorded (pending → queued) BEFORE the work message is published, so a worker never sees
  a task that is still pending;
- a redelivery after a crash between recording and publishing finds the task queued and publishes the
  STORED decision again, without routing a second time (the answer could differ, and it costs an LLM call);
- a task that is already running or finished, or that the API discarded, is acknowledged without a publish.

Returning acknowledges (the consume helper settles); a raised ``TransientError`` requeues.
"""

from __future__ import annotations

import asyncio
import logging

from aio_pika.abc import AbstractIncomingMessage

from taskyard_broker_agent.router import Router
from taskyard_common import metrics
from taskyard_common.amqp import Publisher
from taskyard_common.catalog import Catalog
from taskyard_common.errors import PermanentError
from taskyard_common.messages import (
    IntakeMessage,
    RoutingDecision,
    RoutingMethod,
    TaskStatus,
    Usage,
    WorkMessage,
)
from taskyard_common.store import TaskRecord, TaskStore
from taskyard_common.topology import Topology

log = logging.getLogger(__name__)

EXPLICIT_REASON = "requested by the client"


def retry_delay(deliveries_before: int, base_seconds: float, max_seconds: float) -> float:
    """Exponential backoff by the number of earlier deliveries: base, 2 x base, 4 x base, ... up to max."""
    return min(max_seconds, base_seconds * 2 ** min(deliveries_before, 30))


def deliveries_before(delivery: AbstractIncomingMessage) -> int:
    """How often the broker delivered this message before (``x-delivery-count``, absent the first time;
    RabbitMQ 4.3 renamed it ``x-acquired-count``)."""
    headers = delivery.headers or {}
    for name in ("x-delivery-count", "x-acquired-count"):
        value = headers.get(name)
        if isinstance(value, int):
            return value
    return 0


class IntakeHandler:
    def __init__(
        self,
        catalog: Catalog,
        store: TaskStore,
        publisher: Publisher,
        router: Router,
        topology: Topology,
        *,
        retry_base_seconds: float = 1.0,
        retry_max_seconds: float = 30.0,
    ) -> None:
        self._catalog = catalog
        self._store = store
        self._publisher = publisher
        self._router = router
        self._topology = topology
        self._retry_base = retry_base_seconds
        self._retry_max = retry_max_seconds

    async def __call__(self, message: IntakeMessage, delivery: AbstractIncomingMessage) -> None:
        try:
            await self.handle(message)
        except PermanentError:
            raise
        except Exception:
            # The consume helper requeues at once, and the queue dead-letters after a few deliveries: without
            # a pause, a database blip or a full specialist queue would exhaust them in milliseconds. Holding
            # the message unacked for a while is the delayed retry (a shutdown cancels the pause).
            await asyncio.sleep(retry_delay(deliveries_before(delivery), self._retry_base, self._retry_max))
            raise

    async def handle(self, message: IntakeMessage) -> None:
        task = await self._store.get(message.task_id)
        if task is None or task.status is not TaskStatus.PENDING:
            # Checked before routing, so a redelivery never pays for a second LLM call.
            await self._resume(message, task)
            return
        decision = await self._decide(message)
        if decision is None:
            return
        if not await self._store.record_routing(message.task_id, decision):
            # Another delivery of the same message got there first: follow what it recorded.
            await self._resume(message, await self._store.get(message.task_id))
            return
        metrics.ROUTING_DECISIONS.labels(decision.method.value, decision.specialist).inc()
        # Never the input or the reason (the model may quote the request): ids and labels only.
        log.info(
            "routed task %s: method=%s specialist=%s confidence=%.2f",
            message.task_id,
            decision.method.value,
            decision.specialist,
            decision.confidence,
        )
        await self._publish(message, decision)

    async def _decide(self, message: IntakeMessage) -> RoutingDecision | None:
        """The decision, or None when the task was failed instead (an unknown requested specialist)."""
        requested = message.requested_specialist
        if requested is None:
            return await self._router.route(message.input)
        if self._catalog.get(requested) is not None:
            return RoutingDecision(
                method=RoutingMethod.EXPLICIT, specialist=requested, reason=EXPLICIT_REASON, confidence=1.0
            )
        # The API validated the name against its own catalog; this broker's catalog differs (a rollout in
        # progress). Retrying cannot help, and silently routing elsewhere would ignore the client.
        error = {
            "type": "unknown_specialist",
            "message": f"specialist {requested!r} is not in the broker agent's catalog",
        }
        await self._store.fail(message.task_id, error, Usage())
        log.warning("failed task %s: requested specialist %s not in the catalog", message.task_id, requested)
        return None

    async def _resume(self, message: IntakeMessage, task: TaskRecord | None) -> None:
        if task is None:
            # The API discards a task whose intake publish it could not confirm, and told the client so.
            log.warning("dropping intake message for unknown task %s (discarded by the API)", message.task_id)
            return
        if task.status is TaskStatus.QUEUED and task.routing is not None:
            log.info(
                "re-publishing task %s with its stored decision: method=%s specialist=%s",
                task.id,
                task.routing.method.value,
                task.routing.specialist,
            )
            await self._publish(message, task.routing)
            return
        log.info("ignoring duplicate intake message for task %s (status %s)", task.id, task.status.value)

    async def _publish(self, message: IntakeMessage, decision: RoutingDecision) -> None:
        work = WorkMessage(
            task_id=message.task_id,
            traceparent=message.traceparent,
            specialist=decision.specialist,
            input=message.input,
            routing=decision,
            metadata=message.metadata,
        )
        # Confirmed and mandatory: the handler returns (and the intake message is acked) only once the
        # specialist queue holds the message. Failures raise; transient ones requeue the intake message.
        # ``Unroutable`` (the specialist queue was deleted) dead-letters it while the task stays queued:
        # once the queue is back, replaying the dead letter re-publishes the stored decision.
        await self._publisher.publish(self._topology.tasks_exchange, decision.specialist, work)

"""Queue depth, consumers and oldest task age of every taskyard queue, for dashboards and alerts.

The broker agent is the one component that always runs (never scaled to zero), so it samples the queues:
a passive declare per queue on a short-lived channel answers the ready-message and consumer counts. A
queue that is missing or a broker that is unreachable leaves the last values and is retried next round.

RabbitMQ does not expose a message's age over AMQP (a passive declare answers counts only, and peeking at
the head would need a get and a requeue, which counts as a delivery in a quorum queue), so the age of the
oldest waiting task comes from the task store instead: one grouped query per round (``oldest_waiting``).
So do the workflow gauges (groups and chains in progress, waiting parents): any process starts and ends
workflows, and only the store knows them all (``workflow_counts``).
"""

from __future__ import annotations

import asyncio
import logging

import aio_pika
import aiormq

from taskyard_broker_agent.context import AgentContext
from taskyard_common import metrics
from taskyard_common.errors import StoreUnavailable
from taskyard_common.periodic import PeriodicTask

log = logging.getLogger(__name__)


class QueueMetrics:
    def __init__(
        self,
        context: AgentContext,
        connection: aio_pika.abc.AbstractConnection,
        *,
        interval_seconds: float = 15.0,
    ) -> None:
        """Samples every queue of the catalog's specialists (work, quarantine), the intake and the
        dead-letter queue on ``connection``; the oldest-task age of the intake and work queues."""
        self._topology = context.topology
        self._connection = connection
        self._store = context.store
        self._intake_queue = context.topology.intake_queue
        self._specialist_queues: dict[str, str] = {}
        self._queues: list[str] = []
        self._loop = PeriodicTask("queue-metrics", interval_seconds, self.sample, first_after=0, logger=log)
        self.use_names(context.catalog.names)

    def use_names(self, names: list[str]) -> None:
        """Sample the queues of these specialists from the next round on (the catalog changed); the series
        of queues no longer sampled are removed rather than left at their last value."""
        topology = self._topology
        before = set(self._queues) | {self._intake_queue, *self._specialist_queues.values()}
        self._specialist_queues = {name: topology.specialist_queue(name) for name in names}
        self._queues = [
            *topology.work_queue_names(names),
            *(topology.quarantine_queue(name) for name in names),
            topology.dead_letter_queue,
        ]
        for name in self._queues:
            metrics.QUEUE_MESSAGES_READY.labels(name)
            metrics.QUEUE_CONSUMERS.labels(name)
        for name in (self._intake_queue, *self._specialist_queues.values()):
            metrics.QUEUE_OLDEST_TASK_AGE.labels(name)
        after = set(self._queues) | {self._intake_queue, *self._specialist_queues.values()}
        for name in before - after:
            for gauge in (
                metrics.QUEUE_MESSAGES_READY,
                metrics.QUEUE_CONSUMERS,
                metrics.QUEUE_OLDEST_TASK_AGE,
            ):
                try:
                    gauge.remove(name)
                except KeyError:
                    pass

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        """Cancel the round in progress: a sample is worth nothing once the agent stops."""
        await self._loop.stop()

    async def sample(self) -> None:
        """One round: a passive declare per queue (a missing queue closes its channel, so one per queue)."""
        for name in self._queues:
            _raise_if_cancelling()
            try:
                async with asyncio.timeout(5):
                    channel = await self._connection.channel()
                    try:
                        queue = await channel.declare_queue(name, passive=True)
                        result = queue.declaration_result
                        metrics.QUEUE_MESSAGES_READY.labels(name).set(result.message_count or 0)
                        metrics.QUEUE_CONSUMERS.labels(name).set(result.consumer_count or 0)
                    finally:
                        if not channel.is_closed:
                            await channel.close()
            except (
                TimeoutError,
                aiormq.exceptions.AMQPError,
                aio_pika.exceptions.AMQPException,
                RuntimeError,
            ) as exc:
                log.debug("queue metrics: %s: %s", name, exc)
        _raise_if_cancelling()
        await self.sample_ages()
        _raise_if_cancelling()
        await self.sample_workflows()

    async def sample_ages(self) -> None:
        """One query for every queue's oldest waiting task; a queue with none waiting reads 0."""
        try:
            async with asyncio.timeout(5):
                ages = await self._store.oldest_waiting()
        except (TimeoutError, StoreUnavailable) as exc:
            log.debug("queue metrics: oldest task ages: %s", exc)
            return
        metrics.QUEUE_OLDEST_TASK_AGE.labels(self._intake_queue).set(ages.pending_seconds or 0.0)
        for specialist, queue in self._specialist_queues.items():
            metrics.QUEUE_OLDEST_TASK_AGE.labels(queue).set(ages.queued_seconds.get(specialist, 0.0))

    async def sample_workflows(self) -> None:
        """One query for the workflow gauges; a failed one leaves the last values."""
        try:
            async with asyncio.timeout(5):
                counts = await self._store.workflow_counts()
        except (TimeoutError, StoreUnavailable) as exc:
            log.debug("queue metrics: workflows: %s", exc)
            return
        metrics.WORKFLOWS_IN_PROGRESS.labels("group").set(counts.groups)
        metrics.WORKFLOWS_IN_PROGRESS.labels("chain").set(counts.chains)
        metrics.WAITING_PARENTS.labels("delegation").set(counts.waiting_delegation)
        metrics.WAITING_PARENTS.labels("multi_route").set(counts.waiting_parts)


def _raise_if_cancelling() -> None:
    """Re-raise a cancellation of the current task that a library swallowed.

    ``stop`` cancels the round, but the cancellation can arrive inside a channel open, declare or close,
    where aiormq / aio-pika may turn it into one of the errors ``sample`` tolerates (the channel "closed"),
    or ``asyncio.timeout`` into a TimeoutError. The request is still pending on the task, so the round ends
    here instead of sampling every other queue while ``stop`` waits for it.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError

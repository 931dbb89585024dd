"""The dead-letter consumer: every message the broker gave up on becomes a dead-lettered task in the store.

``<prefix>.dead-letters`` receives what the work queues dead-letter: a rejected message (an invalid body, a
permanent error), one redelivered past the queue's delivery limit, one that expired or overflowed. For each,
the task becomes ``dead_lettered`` and its ``dead_letters`` row keeps the message for a replay
(``/v1/dead-letters``); see ``parsing`` for how a message is read.

The dead-letter queue is the end of the line: an unlimited delivery limit (see
``topology.dead_letter_queue_arguments``), no delay route back to it. When the
database is unreachable a dead letter is therefore held for a pause that doubles per redelivery, then
requeued, instead of spinning through redeliveries (the prefetch bounds how many wait).
"""

from __future__ import annotations

import asyncio
import logging

import aiormq
from aio_pika.abc import AbstractIncomingMessage
from pydantic import ValidationError

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.dead_letters.parsing import DeadLetter, parse_dead_letter
from taskyard_broker_agent.dead_letters.returns import (
    carried_headers,
    may_return,
    may_return_some,
    returns_of,
)
from taskyard_common import metrics
from taskyard_common.announce import destination
from taskyard_common.errors import TaskyardError
from taskyard_common.messages import WorkMessage

log = logging.getLogger(__name__)


def deliveries_before(delivery: AbstractIncomingMessage) -> int:
    """How often the broker delivered this message before (``x-delivery-count``; RabbitMQ 4.3 renamed it
    ``x-acquired-count``)."""
    headers = delivery.headers or {}
    for name in ("x-delivery-count", "x-acquired-count"):
        value = headers.get(name)
        if isinstance(value, int):
            return value
    return 0


def retry_pause(deliveries: int, base_seconds: float, max_seconds: float) -> float:
    """base, 2 x base, 4 x base, ... up to max: the pause before a dead letter is requeued."""
    return min(max_seconds, base_seconds * 2.0 ** min(deliveries, 30))


async def _settle(delivery: AbstractIncomingMessage, *, ack: bool) -> None:
    try:
        if ack:
            await delivery.ack()
        else:
            await delivery.reject(requeue=True)
    except (RuntimeError, aiormq.exceptions.AMQPError) as exc:
        # The channel went away: the broker redelivers the message, nothing is lost.
        log.warning("could not settle dead letter %s: %s", delivery.message_id, type(exc).__name__)


class DeadLetterConsumer:
    def __init__(self, context: AgentContext) -> None:
        self._store = context.store
        self._topology = context.topology
        self._publisher = context.publisher
        self._context = context
        self._retry_base = context.settings.broker.retry_base_seconds
        self._retry_max = context.settings.broker.retry_max_seconds

    async def on_message(self, delivery: AbstractIncomingMessage) -> None:
        """Record, then ack; on a failure hold the message for a while, then requeue it."""
        try:
            await self.handle(delivery)
        except asyncio.CancelledError:
            await _settle(delivery, ack=False)  # shutdown: hand it back
            raise
        except Exception as exc:
            pause = retry_pause(deliveries_before(delivery), self._retry_base, self._retry_max)
            log.warning(
                "could not record dead letter %s (%s); requeueing it in %.1f s",
                delivery.message_id,
                f"{type(exc).__name__}: {exc}" if isinstance(exc, TaskyardError) else type(exc).__name__,
                pause,
                exc_info=not isinstance(exc, TaskyardError),
            )
            try:
                await asyncio.sleep(pause)
            finally:
                await _settle(delivery, ack=False)
        else:
            await _settle(delivery, ack=True)

    async def _returned(self, letter: DeadLetter, delivery: AbstractIncomingMessage) -> bool:
        """Send a work message that died of its workers' crashes back to its queue (``returns.py``); True
        when it went. A failed publish raises: the letter is requeued."""
        returns = returns_of(delivery.headers)
        if letter.task_id is None or not may_return_some(letter.reason, returns):
            return False  # not a candidate whatever its task's state: no store read
        record = await self._store.get(letter.task_id)
        if record is None or not may_return(letter.reason, record.status, returns, record.lease_expires_at):
            return False
        try:
            message = WorkMessage.model_validate(letter.message)
        except ValidationError:
            return False
        exchange, routing_key = destination(self._topology, message, native=self._publisher.native_priorities)
        await self._publisher.publish(
            exchange, routing_key, message, headers=carried_headers(delivery.headers)
        )
        metrics.DEAD_LETTERS_RETURNED.inc()
        log.warning(
            "task %s (%s): its message was dead-lettered past the delivery limit in %s (workers died holding"
            " it); sent back to its work queue (return %d)",
            letter.task_id,
            record.status,
            letter.queue,
            returns + 1,
        )
        return True

    async def handle(self, delivery: AbstractIncomingMessage) -> None:
        letter = parse_dead_letter(delivery.body, delivery.headers, delivery.message_id, self._topology)
        if letter.task_id is None:
            metrics.DEAD_LETTERS.labels(letter.reason).inc()
            log.warning(
                "dropping a dead letter that names no task (reason=%s queue=%s)", letter.reason, letter.queue
            )
            return
        if await self._returned(letter, delivery):
            return
        recorded = await self._store.dead_letter(
            letter.task_id,
            reason=letter.reason,
            queue=letter.queue,
            deaths=letter.deaths,
            message=letter.message,
            specialist=letter.specialist,
        )
        metrics.DEAD_LETTERS.labels(letter.reason).inc()
        if recorded:
            metrics.count_dead_lettered(letter.specialist, self._context.specialists)
            log.warning(
                "task %s dead-lettered: reason=%s queue=%s specialist=%s",
                letter.task_id,
                letter.reason,
                letter.queue,
                letter.specialist,
            )
        else:
            # A stray duplicate of a task that already finished (or one the API discarded): counted only.
            log.info(
                "ignoring dead letter of task %s (reason=%s queue=%s): task unknown or already finished",
                letter.task_id,
                letter.reason,
                letter.queue,
            )

"""Connections, confirmed publishing and the one consume helper that maps the error taxonomy to settlements."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aio_pika
import aiormq
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)

from taskyard_common import metrics
from taskyard_common.broker_version import server_version
from taskyard_common.errors import (
    BrokerUnavailable,
    PermanentError,
    PublishRejected,
    TransientError,
    Unroutable,
)
from taskyard_common.messages import Envelope, Priority, decode, encode
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import AMQP_PRIORITY, native_priorities, queue_level

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Envelope)
Handler = Callable[[M, AbstractIncomingMessage], Awaitable[None]]


async def connect(settings: AmqpSettings, name: str) -> AbstractRobustConnection:
    """A robust connection: after a broker restart it reconnects, redeclares and resumes consumers."""
    try:
        return await aio_pika.connect_robust(
            settings.url.get_secret_value(),
            client_properties={"connection_name": name},
            timeout=settings.connect_timeout_seconds,
        )
    except (TimeoutError, OSError, aiormq.exceptions.AMQPError) as exc:
        # The URL holds credentials: never echo it.
        raise BrokerUnavailable(f"cannot connect to RabbitMQ: {type(exc).__name__}") from exc


def outgoing(message: Envelope, headers: dict[str, int] | None = None) -> aio_pika.Message:
    """The AMQP message of ``message``: persistent JSON, its task id as message id and, for a task's
    messages, its priority as the AMQP property (which a ≥ 4.0 quorum queue delivers by); ``headers``: more
    AMQP headers (what the delivery, not the task, carries: a worker's crash count)."""
    priority = getattr(message, "priority", None)
    return aio_pika.Message(
        body=encode(message),
        content_type="application/json",
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=str(message.task_id),
        type=getattr(message, "kind", None),
        headers={"schema_version": message.schema_version, **(headers or {})},
        priority=AMQP_PRIORITY[priority] if isinstance(priority, Priority) else None,
    )


class Publisher:
    """Publishes persistent JSON messages on one confirm channel; a publish returns only once confirmed.

    Publishes are pipelined on the channel (the broker confirms them asynchronously), so many requests can
    share it. Every failure is mapped onto the taxonomy: unreachable or too slow → ``BrokerUnavailable``,
    nacked (queue full) → ``PublishRejected``, returned (no route) → ``Unroutable``.
    """

    def __init__(
        self,
        channel: AbstractChannel,
        settings: AmqpSettings,
        connection: AbstractConnection | None = None,
    ) -> None:
        self._channel = channel
        self._settings = settings
        self._connection = connection
        self._exchanges: dict[str, AbstractExchange] = {}
        self._renewed_at: float | None = None
        # Whether the broker orders quorum-queue messages by priority (≥ 4.0): then routing sends high and
        # normal to one queue (``queue_level``). Read once: a reconnect reaches the same broker version.
        self.native_priorities = connection is not None and native_priorities(server_version(connection))

    def level(self, priority: Priority) -> Priority:
        """The level whose queue a message of ``priority`` is published to, on this broker."""
        return queue_level(priority, native=self.native_priorities)

    @classmethod
    async def open(cls, connection: AbstractRobustConnection, settings: AmqpSettings) -> Publisher:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        return cls(channel, settings, connection)

    async def _restored(self) -> None:
        """After a reconnect the robust connection reopens its channels one at a time, and a consumer on a
        channel reopened first may already be handling (and publishing for) a message: wait for this
        channel rather than fail at once. While the connection itself is down, fail at once as before."""
        if (
            self._channel.is_closed
            and isinstance(self._channel, AbstractRobustChannel)
            and self._connection is not None
            and not self._connection.is_closed
            and self._connection.connected.is_set()
        ):
            await self._channel.ready()

    async def _exchange(self, name: str) -> AbstractExchange:
        exchange = self._exchanges.get(name)
        if exchange is None:
            exchange = await self._channel.get_exchange(name, ensure=False)
            self._exchanges[name] = exchange
        return exchange

    async def publish(
        self, exchange: str, routing_key: str, message: Envelope, *, headers: dict[str, int] | None = None
    ) -> None:
        body = outgoing(message, headers)
        channel = self._channel
        try:
            target = await self._exchange(exchange)
            async with asyncio.timeout(self._settings.publish_timeout_seconds):
                await self._restored()
                await target.publish(body, routing_key=routing_key, mandatory=True)
        except aiormq.exceptions.PublishError as exc:
            raise Unroutable(f"no queue bound to {exchange!r} for routing key {routing_key!r}") from exc
        except aiormq.exceptions.DeliveryError as exc:
            await self._renew(channel)
            raise PublishRejected(f"broker refused the message for {exchange!r}: queue full") from exc
        except (TimeoutError, OSError, RuntimeError, aiormq.exceptions.AMQPError) as exc:
            # RuntimeError covers aiormq's ChannelInvalidStateError while the connection is down.
            if isinstance(exc, TimeoutError):
                await self._renew(channel)
            raise BrokerUnavailable(f"publish to {exchange!r} not confirmed: {type(exc).__name__}") from exc

    async def _renew(self, failed: AbstractChannel) -> None:
        """A new channel in place of ``failed``, after a publish on it was refused or not confirmed in time,
        at most every ``channel_renew_seconds``; only while the connection is up.

        A channel publishes to a quorum queue through the leader it registered with. Seen on RabbitMQ 3.10
        (chaos row 3): a channel that the robust connection reopened a moment before a new leader was
        elected had every publish to that queue refused for ten minutes, until the run ended, while a new
        channel would have been served. A queue that is really full refuses on the new channel too: the
        cost is a channel every few seconds while it stays full."""
        connection = self._connection
        if failed is not self._channel or connection is None or connection.is_closed:
            return
        if isinstance(connection, AbstractRobustConnection) and not connection.connected.is_set():
            return
        now = time.monotonic()
        if self._renewed_at is not None and now - self._renewed_at < self._settings.channel_renew_seconds:
            return
        self._renewed_at = now
        try:
            async with asyncio.timeout(self._settings.publish_timeout_seconds):
                channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        except (TimeoutError, OSError, RuntimeError, aiormq.exceptions.AMQPError) as exc:
            log.warning("publisher: no new channel after a failed publish: %s", type(exc).__name__)
            return
        self._channel, self._exchanges = channel, {}
        log.warning("publisher: a publish was refused or not confirmed: publishing on a new channel")
        try:
            async with asyncio.timeout(self._settings.publish_timeout_seconds):
                await failed.close()
        except (TimeoutError, OSError, RuntimeError, aiormq.exceptions.AMQPError) as exc:
            log.debug("publisher: closing the old channel: %s", type(exc).__name__)

    async def close(self) -> None:
        if not self._channel.is_closed:
            await self._channel.close()


async def _settle(message: AbstractIncomingMessage, *, ack: bool, requeue: bool = False) -> None:
    if message.processed:
        # The handler settled it already (e.g. a worker acks a long task early). A second ack or reject
        # would be refused (MessageProcessError; on the wire an unknown delivery tag closes the channel).
        return
    try:
        if ack:
            await message.ack()
        else:
            await message.reject(requeue=requeue)
    except (RuntimeError, aiormq.exceptions.AMQPError) as exc:
        # The channel went away: the broker redelivers the message, nothing is lost.
        log.warning("could not settle message %s: %s", message.message_id, type(exc).__name__)


def _settled_by_handler(message: AbstractIncomingMessage, exc: Exception) -> bool:
    """True (and logged) when the handler failed after settling the message itself: nothing to settle."""
    if not message.processed:
        return False
    log.warning(
        "handler failed after settling message %s itself: %s: %s", message.message_id, type(exc).__name__, exc
    )
    return True


async def consume(
    queue: AbstractQueue, model: type[M], handler: Handler[M], *, consumer_tag: str | None = None
) -> str:
    """Consume ``queue``; each delivery runs as its own asyncio task (aiormq spawns one per message).

    Returning acks; ``PermanentError`` rejects without requeue, so the queue dead-letters it with reason
    ``rejected``; anything else rejects with requeue and counts toward the queue's delivery limit, so a
    message that always fails ends in the dead-letter queue instead of looping forever.

    A handler may settle the message itself before it returns (``message.processed`` is then true), e.g. to
    ack a long-running delivery early; the helper then leaves it alone whatever the handler's outcome.
    """

    async def on_message(message: AbstractIncomingMessage) -> None:
        try:
            decoded = decode(model, message.body)
            await handler(decoded, message)
        except PermanentError as exc:
            if _settled_by_handler(message, exc):
                return
            log.warning("dead-lettering message %s: %s", message.message_id, exc)
            metrics.MESSAGES_DEAD_LETTERED.labels(queue.name).inc()
            await _settle(message, ack=False)
        except asyncio.CancelledError:
            # Shutdown while in flight: hand the message back for another consumer.
            await _settle(message, ack=False, requeue=True)
            raise
        except Exception as exc:
            if _settled_by_handler(message, exc):
                return
            # Unexpected errors keep their traceback in the log; expected transient ones stay one line.
            log.warning(
                "requeueing message %s after %s: %s",
                message.message_id,
                type(exc).__name__,
                exc,
                exc_info=not isinstance(exc, TransientError),
            )
            await _settle(message, ack=False, requeue=True)
        else:
            await _settle(message, ack=True)

    return await queue.consume(on_message, consumer_tag=consumer_tag)

"""Wake-ups for whoever watches a task: "task <id> has new events", on the events exchange.

The event log itself is in the store (every transition writes its event in the same statement). A wake-up
only says where to look, so it is cheap and may be lost: fire-and-forget, transient, no confirm, no
``mandatory`` (a task nobody watches has no binding, and the exchange drops its wake-ups at no cost). A
watcher reads the store after a wake-up, and on its own every few seconds, so a lost wake-up only delays.
Wake-ups of the tasks changed in one turn of the event loop go out together, one per task.
"""

from __future__ import annotations

import asyncio
import logging
from uuid import UUID

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractExchange

log = logging.getLogger(__name__)


class EventNotifier:
    def __init__(self, channel: AbstractChannel, exchange: AbstractExchange) -> None:
        self._channel = channel
        self._exchange = exchange
        self._pending: set[UUID] = set()
        self._flushing: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, channel: AbstractChannel, exchange_name: str) -> EventNotifier:
        """On a channel of its own, without publisher confirms."""
        exchange = await channel.get_exchange(exchange_name, ensure=False)
        return cls(channel, exchange)

    def notify(self, task_id: UUID) -> None:
        """Wake the watchers of ``task_id`` soon; never blocks, never raises."""
        self._pending.add(task_id)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # the changes of this turn go together
        pending, self._pending = self._pending, set()
        for task_id in pending:
            try:
                await self._exchange.publish(
                    aio_pika.Message(b"", delivery_mode=aio_pika.DeliveryMode.NOT_PERSISTENT),
                    routing_key=str(task_id),
                )
            except (RuntimeError, OSError, aiormq.exceptions.AMQPError) as exc:
                # The broker is away: watchers fall back on reading the store every few seconds.
                log.debug("wake-up for task %s not sent: %s", task_id, type(exc).__name__)
                return

    async def close(self) -> None:
        if self._flushing is not None and not self._flushing.done():
            await asyncio.wait({self._flushing}, timeout=1)
        if not self._channel.is_closed:
            await self._channel.close()

"""Queue depth and consumers of every taskyard queue, for dashboards and alerts.

The broker agent is the one component that always runs (never scaled to zero), so it samples the queues:
a passive declare per queue on a short-lived channel answers the ready-message and consumer counts. A
queue that is missing or a broker that is unreachable leaves the last values and is retried next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import aio_pika
import aiormq

from taskyard_common import metrics

log = logging.getLogger(__name__)


class QueueMetrics:
    def __init__(
        self,
        connection: aio_pika.abc.AbstractConnection,
        queues: Sequence[str],
        interval_seconds: float = 15.0,
    ) -> None:
        self._connection = connection
        self._queues = list(queues)
        self._interval = interval_seconds
        self._task: asyncio.Task[None] | None = None
        for name in self._queues:
            metrics.QUEUE_MESSAGES_READY.labels(name)
            metrics.QUEUE_CONSUMERS.labels(name)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="queue-metrics")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def sample(self) -> None:
        """One round: a passive declare per queue (a missing queue closes its channel, so one per queue)."""
        for name in self._queues:
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

    async def _run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self._interval)

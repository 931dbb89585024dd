"""How many workers consume each specialist's queues, counted every few seconds for the lanes (``lanes.py``).

A lane's depth follows its specialist's fleet, so a count that lags holds every tenant to fewer messages than
the workers have slots: the agent counts once at its start, usually before its workers consume (it then
sees one), and a scale-out adds workers between two counts. The queue gauges' round (``queue_metrics.py``,
every 15 s) used to be that count: in the first 15 s after a start three workers ran at one worker's
throughput, the lane refilled by the feeder every quarter second. This count asks only the specialists'
level queues, one passive declare each on one channel, every ``TASKYARD_BROKER_LANE_FLEET_SECONDS``.
"""

from __future__ import annotations

import asyncio
import logging

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.lanes import Lanes
from taskyard_common.periodic import PeriodicTask

log = logging.getLogger(__name__)

_AMQP_ERRORS = (TimeoutError, aiormq.exceptions.AMQPError, aio_pika.exceptions.AMQPException, RuntimeError)


class FleetCounter:
    """Tells ``lanes`` each specialist's workers (the most consumers on any of its level queues) every
    ``interval_seconds``, the first round at once."""

    def __init__(
        self, context: AgentContext, connection: AbstractConnection, lanes: Lanes, interval_seconds: float
    ) -> None:
        self._context = context
        self._connection = connection
        self._lanes = lanes
        self._channel: AbstractChannel | None = None
        self._loop = PeriodicTask("fleet", interval_seconds, self.count, first_after=0, logger=log)

    def start(self) -> None:
        self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()
        channel, self._channel = self._channel, None
        if channel is not None and not channel.is_closed:
            try:
                await channel.close()
            except _AMQP_ERRORS as exc:
                log.debug("fleet: closing its channel: %s", exc)

    async def count(self) -> dict[str, int]:
        """One round; a specialist whose queues could not be asked keeps its last count (``saw_workers``)."""
        workers: dict[str, int] = {}
        topology = self._context.topology
        for name in self._context.catalog.names:
            for queue in topology.specialist_queues(name):
                consumers = await self._consumers(queue)
                if consumers is not None:
                    workers[name] = max(workers.get(name, 0), consumers)
        self._lanes.saw_workers(workers)
        return workers

    async def _consumers(self, queue: str) -> int | None:
        try:
            async with asyncio.timeout(5):
                if self._channel is None or self._channel.is_closed:
                    # A missing queue closes the channel it was asked on: the next question opens another.
                    self._channel = await self._connection.channel()
                # The protocol's own declare: a robust channel answers a passive declare of a queue it has
                # declared before from its cache, the counts of that first answer.
                underlay = await self._channel.get_underlay_channel()
                declared = await underlay.queue_declare(queue, passive=True)
        except _AMQP_ERRORS as exc:
            log.debug("fleet: %s: %s", queue, exc)
            return None
        return declared.consumer_count or 0

"""The test's own side of the broker, shared by the broker-agent and worker integration tests.

One plain connection, a channel for passive reads and a confirm publisher (the services' own ``Publisher``,
so a test's publish is confirmed before it goes on). Each suite subclasses it for what only it needs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Self

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractConnection

from taskyard_common.amqp import Publisher
from taskyard_common.announce import destination
from taskyard_common.messages import WorkMessage
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology, declare


class Bus:
    def __init__(
        self,
        connection: AbstractConnection,
        channel: AbstractChannel,
        publisher: Publisher,
        topology: Topology,
    ) -> None:
        self.connection = connection
        self.channel = channel
        self.publisher = publisher
        self.topology = topology

    @classmethod
    @asynccontextmanager
    async def open(
        cls, settings: AmqpSettings, name: str, *, declare_for: Sequence[str] | None = None
    ) -> AsyncIterator[Self]:
        """A bus on a connection of its own; ``declare_for`` declares the topology for those specialists
        first (for tests that run no service that would)."""
        connection = await aio_pika.connect(
            settings.url.get_secret_value(), client_properties={"connection_name": f"test {name}"}
        )
        try:
            channel = await connection.channel()
            topology = Topology(settings.prefix)
            if declare_for is not None:
                await declare(channel, topology, declare_for, settings)
            publisher = await Publisher.open(connection, settings)
            yield cls(connection, channel, publisher, topology)
            await publisher.close()
        finally:
            await connection.close()

    async def send_work(self, work: WorkMessage) -> None:
        """Publish a work message as the broker agent would (confirmed), to its priority's queue."""
        native = self.publisher.native_priorities
        await self.publisher.publish(*destination(self.topology, work, native=native), work)

    async def depth(self, queue: str) -> int:
        """Ready messages in ``queue`` (not the ones a consumer holds unacked)."""
        declared = await self.channel.declare_queue(queue, passive=True)
        count = declared.declaration_result.message_count
        assert count is not None
        return count

    async def consumers(self, queue: str) -> int | None:
        """How many consumers ``queue`` has; None when it does not exist."""
        # On a channel of its own: a passive declare of a missing queue closes its channel (404).
        channel = await self.connection.channel()
        try:
            declared = await channel.declare_queue(queue, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return None
        await channel.close()
        return declared.declaration_result.consumer_count

"""The API's link to RabbitMQ, which must never keep the API from starting nor hold a request hostage.

A background task connects with capped exponential backoff, declares the whole topology once and opens the
confirm channel. Until then, and whenever the connection is down, ``publisher`` raises ``BrokerUnavailable``
at once, so a submission answers 503 immediately instead of waiting. After the first success, aio-pika's
robust connection reconnects (and reopens the channel) by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from uuid import UUID

import aiormq
from aio_pika.abc import AbstractRobustConnection

from taskyard_common.amqp import Publisher, connect
from taskyard_common.errors import BrokerUnavailable, TopologyMismatch
from taskyard_common.event_bus import EventNotifier
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology, declare

log = logging.getLogger(__name__)

CONNECTION_NAME = "taskyard-api"
_FIRST_RETRY_SECONDS = 0.5


class BusLink:
    def __init__(
        self,
        settings: AmqpSettings,
        topology: Topology,
        specialists: Sequence[str],
        *,
        retry_max_seconds: float = 30.0,
        name: str = CONNECTION_NAME,
    ) -> None:
        self._settings = settings
        self._topology = topology
        self._specialists = list(specialists)
        self._retry_max = retry_max_seconds
        self._name = name
        self._connection: AbstractRobustConnection | None = None
        self._publisher: Publisher | None = None
        self._notifier: EventNotifier | None = None
        self._task: asyncio.Task[None] | None = None
        self._established = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._establish(), name="taskyard-api bus link")

    @property
    def connected(self) -> bool:
        return self._publisher is not None and self._connection_up()

    def _connection_up(self) -> bool:
        connection = self._connection
        return connection is not None and not connection.is_closed and connection.connected.is_set()

    @property
    def publisher(self) -> Publisher:
        """The confirm-channel publisher; raises ``BrokerUnavailable`` at once while disconnected."""
        publisher = self._publisher
        if publisher is None or not self._connection_up():
            raise BrokerUnavailable("not connected to RabbitMQ")
        return publisher

    async def _establish(self) -> None:
        delay = _FIRST_RETRY_SECONDS
        attempt = 0
        while True:
            attempt += 1
            try:
                await self._connect_once()
            except TopologyMismatch as exc:
                # Needs an operator; keep the API up (not ready) and keep checking at the slowest pace.
                log.error("cannot declare the topology: %s", exc)
                delay = self._retry_max
            except BrokerUnavailable as exc:
                log.warning("RabbitMQ not reachable (attempt %d): %s; retrying in %.1fs", attempt, exc, delay)
            except Exception:
                # Whatever it was, giving up would leave the API unready for good: log it and retry.
                log.exception("unexpected error connecting to RabbitMQ (attempt %d)", attempt)
            else:
                log.info("connected to RabbitMQ after %d attempt(s); topology declared", attempt)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self._retry_max)

    async def _connect_once(self) -> None:
        connection = await connect(self._settings, self._name)
        try:
            # Declare on a throwaway channel: a refused declaration closes the channel it was made on.
            channel = await connection.channel()
            await declare(channel, self._topology, self._specialists, self._settings)
            await channel.close()
            publisher = await Publisher.open(connection, self._settings)
            notifier = await EventNotifier.open(await connection.channel(), self._topology.events_exchange)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await connection.close()
            if isinstance(exc, (OSError, TimeoutError, RuntimeError, aiormq.exceptions.AMQPError)):
                raise BrokerUnavailable(f"setting up the channel failed: {type(exc).__name__}") from exc
            raise
        self._connection, self._publisher, self._notifier = connection, publisher, notifier
        self._established.set()

    async def established(self) -> AbstractRobustConnection:
        """The connection, once the first attempt succeeded (it reconnects by itself afterwards); for what
        needs a channel of its own, as the watcher of task events does."""
        await self._established.wait()
        connection = self._connection
        if connection is None:
            raise BrokerUnavailable("the RabbitMQ link is closed")
        return connection

    def notify(self, task_id: UUID) -> None:
        """Wake whoever watches ``task_id`` (its event log grew); dropped while disconnected (watchers also
        read the store every few seconds)."""
        if self._notifier is not None and self.connected:
            self._notifier.notify(task_id)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        publisher, connection, notifier = self._publisher, self._connection, self._notifier
        self._publisher = self._connection = self._notifier = None
        if notifier is not None:
            with contextlib.suppress(Exception):
                await notifier.close()
        if publisher is not None:
            with contextlib.suppress(Exception):
                await publisher.close()
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

"""The API process's watcher: wakes the event streams and long-polls of a task when the task changes.

Whoever changes a task publishes a wake-up on the events exchange, routing key the task id
(``taskyard_common.event_bus``). This process has one exclusive, auto-delete queue there, bound to a task id
while at least one stream or long-poll here watches that task and unbound when the last one leaves, so the
exchange drops the wake-ups of every other task. A wake-up only says "look again": the waiter reads the store.

Writers publish a task's wake-ups only while it is marked watched (``watched_until``): the poll below marks
every watched task (renewing the mark when half of it is left), and the check of a new binding marks it at
once. Wake-ups can be lost (RabbitMQ away, a publisher that lost its connection), so every
``TASKYARD_API_WATCH_POLL_SECONDS`` the watcher also reads the version (``event_seq``, ``updated_at``) of every
watched task in one query and wakes the waiters that have not seen it yet: a lost wake-up only delays, and an
idle waiter costs no query of its own. A new binding is checked the same way at once, for a change made
before it was in place. RabbitMQ never holds up the start or a request: the queue and its bindings are
set up in the background (through the API's link, re-established by it after a reconnect), and meanwhile the
poll alone wakes the waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from datetime import datetime
from uuid import UUID

import aiormq
from aio_pika.abc import (
    AbstractChannel,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)

from taskyard_api.bus import BusLink
from taskyard_common.errors import BrokerUnavailable, StoreUnavailable
from taskyard_common.store import TaskStore

log = logging.getLogger(__name__)

# A broker that stops answering must not freeze the binding of every other task: give up and retry.
_BROKER_TIMEOUT_SECONDS = 5.0
_RETRY_SECONDS = 1.0
# Versions read per query: bounds one statement however many tasks this process watches.
_POLL_CHUNK = 1000
# A watched task is marked so (``watched_until``) for at least this long, renewed by the polls: its
# writers publish wake-ups only while it is marked.
_MARK_SECONDS = 60.0
_BROKER_ERRORS = (OSError, TimeoutError, RuntimeError, BrokerUnavailable, aiormq.exceptions.AMQPError)

Version = tuple[int, datetime]


class Watch:
    """One stream's or long-poll's interest in one task. The waiter calls ``rearm`` before it reads the
    store, ``saw`` with what it read, and ``wait``: a change after the read is not missed."""

    __slots__ = ("_woken", "closing", "gone", "seen_at", "seen_seq", "task_id")

    def __init__(self, task_id: UUID) -> None:
        self.task_id = task_id
        self._woken = asyncio.Event()
        # The API is stopping: answer now.
        self.closing = False
        # The task no longer exists.
        self.gone = False
        # The version the waiter has seen: the last event's number (None: nothing yet), and for a waiter of
        # the whole document its updated_at (None: only events matter).
        self.seen_seq: int | None = None
        self.seen_at: datetime | None = None

    def saw(self, event_seq: int, updated_at: datetime | None = None) -> None:
        self.seen_seq, self.seen_at = event_seq, updated_at

    def behind(self, version: Version) -> bool:
        """Whether the task at ``version`` holds something this waiter has not seen."""
        event_seq, updated_at = version
        if self.seen_seq is None or event_seq > self.seen_seq:
            return True
        return self.seen_at is not None and updated_at != self.seen_at

    def wake(self) -> None:
        self._woken.set()

    def close(self) -> None:
        self.closing = True
        self._woken.set()

    def rearm(self) -> None:
        if not self.closing:
            self._woken.clear()

    async def wait(self, timeout: float) -> bool:
        """Until woken (True) or ``timeout`` seconds passed (False)."""
        if self._woken.is_set():
            return True
        if timeout <= 0:
            return False
        try:
            async with asyncio.timeout(timeout):
                await self._woken.wait()
        except TimeoutError:
            return False
        return True


class Watcher:
    def __init__(self, store: TaskStore, bus: BusLink, exchange: str, *, poll_seconds: float) -> None:
        self._store = store
        self._bus = bus
        self._exchange = exchange
        self._poll_seconds = poll_seconds
        # Several polls' worth: a mark never runs out between two renewals.
        self._mark_seconds = max(_MARK_SECONDS, 4 * poll_seconds)
        self._watches: dict[UUID, set[Watch]] = {}
        # The task ids bound to the queue (as far as the broker said so).
        self._bound: set[UUID] = set()
        self._resync = asyncio.Event()
        self._recheck = False
        self._channel: AbstractChannel | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._keep_bindings(), name="taskyard-api watcher bindings"),
            asyncio.create_task(self._poll(), name="taskyard-api watcher poll"),
        ]

    @property
    def watched(self) -> int:
        """How many tasks at least one stream or long-poll of this process watches."""
        return len(self._watches)

    def bound(self, task_id: UUID) -> bool:
        """Whether wake-ups for ``task_id`` reach this process now."""
        return task_id in self._bound

    @contextlib.contextmanager
    def watch(self, task_id: UUID) -> Iterator[Watch]:
        """Watch ``task_id`` for the length of the block; entering and leaving never wait (the binding
        follows in the background). Its exit is synchronous, so a stream's cleanup cannot be interrupted."""
        watch = Watch(task_id)
        if self._closing:
            watch.close()
        watches = self._watches.get(task_id)
        if watches is None:
            watches = self._watches[task_id] = set()
            self._resync.set()
        watches.add(watch)
        try:
            yield watch
        finally:
            watches.discard(watch)
            if not watches and self._watches.get(task_id) is watches:
                del self._watches[task_id]
                self._resync.set()

    def _wake(self, task_id: UUID) -> None:
        for watch in self._watches.get(task_id, ()):
            watch.wake()

    def drain(self) -> None:
        """End every stream and long-poll now, and any later one at once: the API is stopping."""
        self._closing = True
        self._resync.set()
        for watches in self._watches.values():
            for watch in watches:
                watch.close()

    async def close(self) -> None:
        self.drain()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # aiormq may turn the cancellation of a call in flight into the error of the channel it then
            # closes: the rounds also stop on ``_closing``, and are waited for only so long.
            await asyncio.wait(self._tasks, timeout=_BROKER_TIMEOUT_SECONDS)
        channel, self._channel = self._channel, None
        if channel is not None and not channel.is_closed:
            # Closing the channel cancels the consumer: the auto-delete queue goes with it.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(_BROKER_TIMEOUT_SECONDS):
                    await channel.close()

    # --- wake-ups from RabbitMQ ------------------------------------------------------------------------

    async def _keep_bindings(self) -> None:
        queue = await self._open(await self._bus.established())
        while queue is not None and not self._closing:
            await self._resync.wait()
            self._resync.clear()
            try:
                await self._sync_bindings(queue)
                if self._recheck:
                    self._recheck = False
                    await self._check(list(self._watches))
            except Exception as exc:
                if self._closing:
                    return
                if isinstance(exc, _BROKER_ERRORS):
                    # Disconnected or refused: the poll covers the gap; try again shortly.
                    log.debug("task wake-up bindings not updated (%s); retrying", type(exc).__name__)
                else:
                    log.exception("unexpected error updating the task wake-up bindings; retrying")
                await asyncio.sleep(_RETRY_SECONDS)
                self._resync.set()

    async def _open(self, connection: AbstractRobustConnection) -> AbstractQueue | None:
        """The queue, consumed; on the robust connection its channel, queue, bindings and consumer are
        restored after a reconnect."""
        while not self._closing:
            channel: AbstractChannel | None = None
            try:
                async with asyncio.timeout(_BROKER_TIMEOUT_SECONDS):
                    channel = await connection.channel()
                    queue = await channel.declare_queue(exclusive=True, auto_delete=True)
                    await queue.consume(self._on_wake_up, no_ack=True)
            except _BROKER_ERRORS as exc:
                log.warning(
                    "cannot set up the queue of task wake-ups (%s); streams and long-polls poll meanwhile",
                    type(exc).__name__,
                )
                if channel is not None:
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(_BROKER_TIMEOUT_SECONDS):
                            await channel.close()
                await asyncio.sleep(_RETRY_SECONDS)
                continue
            connection.reconnect_callbacks.add(self._on_reconnect)
            self._channel = channel
            return queue
        return None

    async def _sync_bindings(self, queue: AbstractQueue) -> None:
        added: list[UUID] = []
        try:
            for task_id in [t for t in self._watches if t not in self._bound]:
                await queue.bind(self._exchange, routing_key=str(task_id), timeout=_BROKER_TIMEOUT_SECONDS)
                self._bound.add(task_id)
                added.append(task_id)
        finally:
            if not self._closing:
                # A change made before a binding was in place sent its wake-up nowhere: look once more.
                await self._check(added)
        for task_id in [t for t in self._bound if t not in self._watches]:
            await queue.unbind(self._exchange, routing_key=str(task_id), timeout=_BROKER_TIMEOUT_SECONDS)
            self._bound.discard(task_id)

    async def _on_wake_up(self, message: AbstractIncomingMessage) -> None:
        try:
            task_id = UUID(message.routing_key or "")
        except ValueError:
            return
        self._wake(task_id)

    def _on_reconnect(self, _connection: AbstractRobustConnection | None, /) -> None:
        # Wake-ups sent while disconnected are lost: every watched task is checked again (with the bindings
        # that failed meanwhile, made now).
        self._recheck = True
        self._resync.set()

    # --- the poll: what wake-ups missed ----------------------------------------------------------------

    async def _poll(self) -> None:
        while not self._closing:
            await asyncio.sleep(self._poll_seconds)
            try:
                await self._check(list(self._watches))
            except Exception:
                # Whatever it was, a watcher that stops polling would leave lost wake-ups lost for good.
                log.exception("unexpected error checking the watched tasks")

    async def _check(self, task_ids: list[UUID]) -> None:
        """Read the versions of ``task_ids`` and wake the waiters behind them (the store away: no one)."""
        for start in range(0, len(task_ids), _POLL_CHUNK):
            chunk = task_ids[start : start + _POLL_CHUNK]
            try:
                # Marked watched too (the writers of a task publish wake-ups only while it is).
                versions = await self._store.versions(chunk, watch_seconds=self._mark_seconds)
            except StoreUnavailable as exc:
                log.debug("watched tasks not checked: %s", exc)
                return
            self._compare(chunk, versions)

    def _compare(self, task_ids: list[UUID], versions: dict[UUID, Version]) -> None:
        for task_id in task_ids:
            version = versions.get(task_id)
            for watch in self._watches.get(task_id, ()):
                if version is None:
                    watch.gone = True
                    watch.wake()
                elif watch.behind(version):
                    watch.wake()

"""Concurrent submissions stored together: one INSERT, one commit, for all that arrive while one is running.

Under load the database spends its time per statement and per commit rather than per row, and the API as
much on each round trip, so a submission queues its row and waits; at most ``parallel`` inserts run at
once, each taking everything queued (up to ``max_batch`` rows) when it starts. A lone request is inserted
at once: the batches only grow when requests arrive faster than an insert completes, so no latency is
added to wait for company.

Each request still gets its own committed row before it publishes, and a 202 only after RabbitMQ confirmed
that publish. A batch that fails for a reason other than the database being away (which refuses them all,
503) is retried row by row, so one bad row can only fail its own request. A request that gave up (client
gone) before its batch started is left out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from taskyard_common.errors import StoreUnavailable
from taskyard_common.store import NewTask, TaskRecord

log = logging.getLogger(__name__)

MAX_BATCH = 200
PARALLEL = 2


class CreatesTasks(Protocol):
    async def create(self, task: NewTask) -> TaskRecord: ...

    async def create_many(self, tasks: Sequence[NewTask]) -> list[TaskRecord]: ...


class TaskInserter:
    def __init__(self, store: CreatesTasks, *, max_batch: int = MAX_BATCH, parallel: int = PARALLEL) -> None:
        self._store = store
        self._max_batch = max_batch
        self._parallel = parallel
        self._queue: list[tuple[NewTask, asyncio.Future[TaskRecord]]] = []
        self._active = 0  # drains under way
        self._tasks: set[asyncio.Task[None]] = set()

    async def create(self, task: NewTask) -> TaskRecord:
        """Store ``task`` (committed when this returns); raises what ``create`` raises."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[TaskRecord] = loop.create_future()
        self._queue.append((task, future))
        if self._active < self._parallel:
            # A task of its own, not the caller's: a caller cancelled mid-insert must not strand the others.
            self._active += 1
            drain = loop.create_task(self._drain(), name="taskyard-api inserts")
            self._tasks.add(drain)
            drain.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self) -> None:
        try:
            while self._queue:
                batch = [(t, f) for t, f in self._queue[: self._max_batch] if not f.done()]
                del self._queue[: self._max_batch]
                try:
                    await self._insert(batch)
                except BaseException as exc:
                    # Cancelled at shutdown, or a bug: no request may be left waiting for ever.
                    failure = exc if isinstance(exc, Exception) else StoreUnavailable("insert interrupted")
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(failure)
                    raise
        finally:
            # Counted down with no await after the queue was seen empty: a request queued from now on
            # starts a drain of its own (a done-callback would run too late and strand it).
            self._active -= 1

    async def _insert(self, batch: list[tuple[NewTask, asyncio.Future[TaskRecord]]]) -> None:
        if not batch:
            return
        try:
            if len(batch) == 1:
                records = [await self._store.create(batch[0][0])]
            else:
                records = await self._store.create_many([task for task, _ in batch])
        except StoreUnavailable as exc:
            for _, future in batch:
                _fail(future, exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch[0][1], exc)
                return
            log.warning("inserting %d tasks at once failed (%s); one by one instead", len(batch), exc)
            for item in batch:
                await self._insert([item])
            return
        for (_, future), record in zip(batch, records, strict=True):
            if not future.done():
                future.set_result(record)

    async def close(self) -> None:
        """Let the inserts under way finish (their requests are waiting for them)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _fail(future: asyncio.Future[TaskRecord], exc: Exception) -> None:
    """Hand a failure to one waiting request; a shared "unavailable" gets a copy each, so that tracebacks
    of different requests do not mix."""
    if future.done():
        return
    if isinstance(exc, StoreUnavailable):
        copy = StoreUnavailable(str(exc))
        copy.__cause__ = exc.__cause__
        exc = copy
    future.set_exception(exc)

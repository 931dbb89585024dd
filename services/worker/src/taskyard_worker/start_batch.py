"""Starting tasks in batches: the deliveries that arrive together take their leases in one statement.

A worker gets its deliveries in bursts (a full prefetch when it starts, a wave of new tasks as a wave ends):
one ``start`` per delivery would cost a database round trip each, where one statement can start the whole
burst. Each ``start`` waits one turn of the event loop for the others of
its burst, then ``store.start_many`` starts all of them together. A task that statement does not start (a
duplicate, cancelled, past its deadline, leased elsewhere, locked by another transaction) takes
``store.start``'s own path, which tells why; so every outcome is the one ``store.start`` alone would give.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any
from uuid import UUID

from taskyard_common.store import StartOutcome, StartResult, TaskRecord, TaskStore

# At most this many tasks per statement: bounds one statement's locks and size.
MAX_BATCH = 200


class StartBatcher:
    def __init__(self, store: TaskStore, *, owner: str, lease_seconds: float) -> None:
        self._store = store
        self._owner = owner
        self._lease_seconds = lease_seconds
        # Task id → (attempt, the future its ``start`` waits on), for the batch being gathered.
        self._waiting: dict[UUID, tuple[int, asyncio.Future[TaskRecord | None]]] = {}
        self._flushing: set[asyncio.Task[None]] = set()

    async def start(self, task_id: UUID, attempt: int, *, capped: bool = False) -> StartResult:
        """``capped``: the task's tenant has a cap, which the batch statement never starts: ``store.start``
        alone, without the batch."""
        if not capped:
            record = await self._batched(task_id, attempt)
            if record is not None:
                return StartResult(StartOutcome.STARTED, record)
        return await self._store.start(
            task_id, owner=self._owner, lease_seconds=self._lease_seconds, attempt=attempt, capped=capped
        )

    async def _batched(self, task_id: UUID, attempt: int) -> TaskRecord | None:
        if task_id in self._waiting:
            return None  # the same task twice in one batch: this one takes the single path
        future: asyncio.Future[TaskRecord | None] = asyncio.get_running_loop().create_future()
        self._waiting[task_id] = (attempt, future)
        if len(self._waiting) == 1:
            self._spawn(self._flush())
        elif len(self._waiting) >= MAX_BATCH:
            self._spawn(self._start(self._take()))
        return await future

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._flushing.add(task)  # a reference, so the task is not collected mid-flight
        task.add_done_callback(self._flushing.discard)

    def _take(self) -> dict[UUID, tuple[int, asyncio.Future[TaskRecord | None]]]:
        batch, self._waiting = self._waiting, {}
        return batch

    async def _flush(self) -> None:
        # One turn of the loop: the deliveries that arrived with this one register meanwhile.
        await asyncio.sleep(0)
        await self._start(self._take())

    async def _start(self, batch: dict[UUID, tuple[int, asyncio.Future[TaskRecord | None]]]) -> None:
        if not batch:
            return  # taken by a full batch meanwhile
        try:
            started = await self._store.start_many(
                {task_id: attempt for task_id, (attempt, _) in batch.items()},
                owner=self._owner,
                lease_seconds=self._lease_seconds,
            )
        except Exception as exc:
            for _, future in batch.values():
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _, future in batch.values():
                future.cancel()
            raise
        for task_id, (_, future) in batch.items():
            if not future.done():
                future.set_result(started.get(task_id))

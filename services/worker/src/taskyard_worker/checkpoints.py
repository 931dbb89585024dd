"""Step checkpoints from the worker's side: each run records its steps, the worker writes them in batches.

``StepWriter`` gathers the steps that the worker's concurrent runs complete in one turn of the event loop
and records them in one statement (as ``StartBatcher`` does for starts), so hundreds of runs in flight cost
one round trip per wave of steps, not one per step. ``RunCheckpoint`` is one run's view of it: it bounds
the task's checkpoints to ``checkpoint_max_bytes`` (past that, the run goes on without recording more: an
interruption then costs the steps since) and keeps going when the store is away (the run is worth more
than its checkpoint). Whether a step was recorded matters to the caller: a recorded step's token usage is
in the store, an unrecorded one's is added by the attempt's outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any
from uuid import UUID

from taskyard_common.errors import StoreUnavailable, TaskyardError
from taskyard_common.messages import Usage
from taskyard_common.store import Step, TaskStore
from taskyard_common.store.steps import step_bytes

log = logging.getLogger(__name__)

MAX_BATCH = 500


class LeaseLost(TaskyardError):
    """The store refused a checkpoint: this worker no longer holds the task's lease. Stop the run and record
    nothing (another worker, or the reaper, has the task)."""


class StepWriter:
    def __init__(self, store: TaskStore, *, owner: str) -> None:
        self._store = store
        self._owner = owner
        self._waiting: list[tuple[Step, asyncio.Future[bool]]] = []
        self._flushing: set[asyncio.Task[None]] = set()

    async def record(self, step: Step) -> bool:
        """Record ``step`` with the others of this turn; True when the task is still held (the step is
        recorded, or was already). Raises ``StoreUnavailable``."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((step, future))
        if len(self._waiting) == 1:
            self._spawn(self._flush())
        elif len(self._waiting) >= MAX_BATCH:
            self._spawn(self._write(self._take()))
        return await future

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self._flushing.add(task)  # a reference, so the task is not collected mid-flight
        task.add_done_callback(self._flushing.discard)

    def _take(self) -> list[tuple[Step, asyncio.Future[bool]]]:
        batch, self._waiting = self._waiting, []
        return batch

    async def _flush(self) -> None:
        # One turn of the loop: the steps the other runs completed meanwhile join this batch.
        await asyncio.sleep(0)
        await self._write(self._take())

    async def _write(self, batch: list[tuple[Step, asyncio.Future[bool]]]) -> None:
        if not batch:
            return
        try:
            held = await self._store.record_steps([step for step, _ in batch], owner=self._owner)
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _, future in batch:
                future.cancel()
            raise
        for step, future in batch:
            if not future.done():
                future.set_result(step.task_id in held)


class RunCheckpoint:
    """The checkpoints of one attempt of one task."""

    def __init__(self, writer: StepWriter, task_id: UUID, *, recorded_bytes: int, max_bytes: int) -> None:
        self.task_id = task_id
        self._writer = writer
        self._bytes = recorded_bytes
        self._max_bytes = max_bytes
        self._full = False

    async def record(
        self,
        step: int,
        message: dict[str, Any],
        *,
        call_id: str = "",
        usage: Usage | None = None,
        ok: bool | None = None,
        name: str | None = None,
        latency_ms: float | None = None,
    ) -> bool:
        """Checkpoint one entry of step ``step``; True when it is in the store (its usage with it, and its
        event: ``llm_call`` with ``latency_ms``, ``tool_call`` with the tool's ``name``). Raises
        ``LeaseLost`` when the task is no longer this worker's."""
        entry = Step(
            task_id=self.task_id,
            step=step,
            call_id=call_id,
            message=message,
            usage=usage,
            ok=ok,
            name=name,
            latency_ms=latency_ms,
        )
        size = step_bytes(entry)
        if self._full or self._bytes + size > self._max_bytes:
            if not self._full:
                log.warning(
                    "task %s: checkpoints reached %d bytes; the rest of this attempt is not checkpointed",
                    self.task_id,
                    self._bytes,
                )
            self._full = True
            return False
        try:
            held = await self._writer.record(entry)
        except StoreUnavailable as exc:
            log.warning("task %s: step %d not checkpointed: %s", self.task_id, step, exc)
            return False
        if not held:
            raise LeaseLost(f"task {self.task_id}: the lease is gone; step {step} not recorded")
        self._bytes += size
        return True

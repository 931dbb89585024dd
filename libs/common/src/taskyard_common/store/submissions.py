"""Submissions: the ``create`` transition (→ pending), and the marks of the announce path around it.

A submission commits its row before its intake message is published; ``mark_published`` records the
broker's confirm afterwards, and ``discard_unpublished`` deletes a row whose publish failed (the client was
told it was not stored). See ``taskyard_common.announce`` for who recovers a row left unmarked.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from taskyard_common.store._pg import (
    INSERT_TASK,
    INSERT_TASKS,
    PoolStore,
    insert_args,
    insert_arrays,
    to_record,
)
from taskyard_common.store.records import NewTask, TaskRecord


class SubmissionQueries(PoolStore):
    async def create(self, task: NewTask) -> TaskRecord:
        row = await self._fetchrow(INSERT_TASK, *insert_args(task))
        if row is None:  # an INSERT ... RETURNING always returns its row
            raise RuntimeError(f"task {task.id} was not inserted")
        self._changed(task.id, watched=False)  # born a moment ago: nobody watches it yet
        return to_record(row)

    async def create_many(self, tasks: Sequence[NewTask]) -> list[TaskRecord]:
        """``create`` for many tasks in one statement (the API coalesces concurrent submissions), committed
        together; the records in the order of ``tasks``."""
        rows = await self._fetch(INSERT_TASKS, *insert_arrays(tasks))
        by_id = {row["id"]: to_record(row) for row in rows}
        return [by_id[t.id] for t in tasks]

    async def mark_published(self, task_id: UUID) -> None:
        await self._fetchrow(
            "UPDATE tasks SET published_at = clock_timestamp() WHERE id = $1 AND published_at IS NULL",
            task_id,
        )

    async def mark_published_many(self, task_ids: Sequence[UUID]) -> int:
        """``mark_published`` for many tasks in one statement (the API's write-behind); how many changed.
        The rows are locked in id order first, as the worker's statements over many tasks lock them
        (heartbeat, step checkpoints): updated in scan order, a batch whose tasks are already running
        deadlocked with a worker's checkpoint batch, and PostgreSQL failed the worker's statement."""
        rows = await self._fetch(
            "WITH locked AS (SELECT id FROM tasks WHERE id = ANY($1::uuid[]) AND published_at IS NULL"
            " ORDER BY id FOR NO KEY UPDATE)"
            " UPDATE tasks SET published_at = clock_timestamp() FROM locked"
            " WHERE tasks.id = locked.id AND tasks.published_at IS NULL RETURNING tasks.id",
            list(task_ids),
        )
        return len(rows)

    async def discard_unpublished(self, task_id: UUID) -> bool:
        row = await self._fetchrow(
            "DELETE FROM tasks WHERE id = $1 AND status IN ('pending', 'scheduled') AND published_at IS NULL"
            " RETURNING id",
            task_id,
        )
        return row is not None

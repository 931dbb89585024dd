"""The scheduler's side of the schedules table: claim the due schedules, create each occurrence's task,
move each schedule on, all in one transaction.

``claim_due`` locks up to ``limit`` due schedules (``FOR UPDATE SKIP LOCKED``: two schedulers never hold the
same schedule, neither waits for the other) and holds them until the batch commits, with the tasks it
created and the schedules' new ``next_run_at``: a crash before the commit leaves nothing behind, and the next
claim handles the same occurrence again. Each occurrence's task is also written under its idempotency key
(``cron.occurrence_key``, the same claim as ``POST /v1/tasks``'s keys, in the same transaction), so an
occurrence met again for any other reason (``next_run_at`` set back by hand, a schedule restored from a
backup) finds its task instead of making a second one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import asyncpg

from taskyard_common.errors import PermanentError, StoreUnavailable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store._pg import (
    UNAVAILABLE,
    Connection,
    PoolStore,
    insert_args,
    insert_task,
    to_record,
)
from taskyard_common.store.idempotency import CLAIM_KEY, EXISTING_KEY
from taskyard_common.store.records import NewTask, TaskRecord
from taskyard_common.store.schedule_records import DueSchedule, Overlap, ScheduleOutcome

# $1 the claim's instant (the database's clock), $2 limit. The oldest due first.
_DUE = (
    "SELECT s.id, s.tenant, s.cron, s.timezone, s.task, s.overlap, s.next_run_at, s.last_task_id,"
    " t.status AS last_task_status"
    " FROM schedules s LEFT JOIN tasks t ON t.id = s.last_task_id"
    " WHERE NOT s.paused AND s.next_run_at <= $1"
    " ORDER BY s.next_run_at LIMIT $2 FOR UPDATE OF s SKIP LOCKED"
)
# An occurrence's task: accepted with the schedule and the occurrence in its event ($18, $19).
_INSERT_OCCURRENCE_TASK = insert_task(
    " || jsonb_build_object('schedule_id', $18::uuid, 'occurrence', $19::text)"
)
# A skipped or failed occurrence keeps pointing at the last task there is ($4 NULL).
_ADVANCE = (
    "UPDATE schedules SET next_run_at = $2, last_run_at = $3, last_task_id = COALESCE($4, last_task_id),"
    " last_outcome = $5, updated_at = clock_timestamp() WHERE id = $1"
)


class OccurrenceRefused(PermanentError):
    """The database refused an occurrence's task (a value it cannot hold): that occurrence fails, the rest
    of the batch goes on."""


@dataclass(frozen=True)
class OccurrenceTask:
    """What creating an occurrence's task found."""

    # False: its key already named a task (``task_id``; ``record`` None: nothing new to announce).
    created: bool
    task_id: UUID | None
    record: TaskRecord | None


class DueBatch:
    """The schedules one claim holds, on the claim's connection; committed when the claim's block ends."""

    def __init__(self, conn: Connection, schedules: list[DueSchedule], now: datetime) -> None:
        self._conn = conn
        self.schedules = schedules
        # The database's clock at the claim: the same "now" for every scheduler.
        self.now = now

    async def create_task(
        self,
        task: NewTask,
        *,
        key: str,
        request_hash: str,
        retention_seconds: float,
        schedule_id: UUID,
        occurrence: str,
    ) -> OccurrenceTask:
        """Claim ``key`` and insert ``task`` under a savepoint of their own; when the key already names a
        task, insert nothing and say which. Raises ``OccurrenceRefused`` when the database refuses the
        task (the savepoint is rolled back, the batch goes on), ``StoreUnavailable`` when it is away."""
        try:
            async with self._conn.transaction():
                claimed = await self._conn.fetchrow(
                    CLAIM_KEY, task.tenant, key, request_hash, task.id, float(retention_seconds)
                )
                if claimed is None:
                    existing = await self._conn.fetchrow(EXISTING_KEY, task.tenant, key)
                    task_id = existing["task_id"] if existing is not None else None
                    return OccurrenceTask(created=False, task_id=task_id, record=None)
                row = await self._conn.fetchrow(
                    _INSERT_OCCURRENCE_TASK, *insert_args(task), schedule_id, occurrence
                )
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc
        except asyncpg.PostgresError as exc:
            raise OccurrenceRefused(f"task refused by the database: {type(exc).__name__}") from exc
        assert row is not None  # an INSERT ... RETURNING always returns its row
        return OccurrenceTask(created=True, task_id=task.id, record=to_record(row))

    async def advance(
        self,
        schedule_id: UUID,
        *,
        next_run_at: datetime | None,
        last_run_at: datetime,
        last_task_id: UUID | None,
        outcome: ScheduleOutcome,
    ) -> None:
        await self._conn.execute(_ADVANCE, schedule_id, next_run_at, last_run_at, last_task_id, outcome.value)


def _due(row: asyncpg.Record) -> DueSchedule:
    data = dict(row)
    data["overlap"] = Overlap(data["overlap"])
    status = data["last_task_status"]
    data["last_task_status"] = TaskStatus(status) if status is not None else None
    return DueSchedule.model_validate(data)


class ScheduleClaims(PoolStore):
    @contextlib.asynccontextmanager
    async def claim_due(self, limit: int) -> AsyncIterator[DueBatch]:
        """Lock up to ``limit`` due schedules (none another claim holds) until the block ends; the block's
        writes commit together when it ends, and roll back if it raises."""
        async with self._transaction() as conn:
            now = await conn.fetchval("SELECT clock_timestamp()")
            rows = await conn.fetch(_DUE, now, limit)
            yield DueBatch(conn, [_due(r) for r in rows], now)

"""Cron schedules: what the API reads and changes (create, read, list, pause, resume, delete), every query
scoped to one tenant; the scheduler's claim of due schedules is ``schedule_claims.ScheduleClaims``.

A change the API makes to a schedule that a scheduler holds (``FOR UPDATE``) waits for the scheduler's
commit, so pausing or deleting never races an occurrence half-handled: it applies before or after it.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from uuid import UUID

import asyncpg

from taskyard_common.store._pg import PoolStore
from taskyard_common.store.schedule_claims import ScheduleClaims
from taskyard_common.store.schedule_records import NewSchedule, Overlap, ScheduleRecord

SCHEDULE_COLUMNS = (
    "id, tenant, cron, timezone, task, overlap, paused, next_run_at, last_run_at, last_task_id,"
    " last_outcome, metadata, created_at, updated_at"
)
_INSERT = (
    "INSERT INTO schedules (id, tenant, cron, timezone, task, overlap, metadata, next_run_at)"
    f" VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {SCHEDULE_COLUMNS}"
)
# Paused: no occurrence is due (next_run_at NULL) until a resume computes the next one from then.
_PAUSE = (
    "UPDATE schedules SET paused = true, next_run_at = NULL, updated_at = clock_timestamp()"
    f" WHERE id = $1 AND tenant = $2 RETURNING {SCHEDULE_COLUMNS}"
)
# Only a paused schedule takes the new next_run_at: resuming a running one changes nothing.
_RESUME = (
    "UPDATE schedules SET next_run_at = CASE WHEN paused THEN $3 ELSE next_run_at END, paused = false,"
    " updated_at = CASE WHEN paused THEN clock_timestamp() ELSE updated_at END"
    f" WHERE id = $1 AND tenant = $2 RETURNING {SCHEDULE_COLUMNS}"
)


def to_schedule(row: asyncpg.Record) -> ScheduleRecord:
    data = dict(row)
    data["overlap"] = Overlap(data["overlap"])
    return ScheduleRecord.model_validate(data)


class ScheduleStore(ScheduleClaims, PoolStore):
    """On the task store's pool (``ScheduleStore(store.pool, acquire_timeout=...)``)."""

    async def create(self, schedule: NewSchedule) -> ScheduleRecord:
        row = await self._fetchrow(
            _INSERT,
            schedule.id,
            schedule.tenant,
            schedule.cron,
            schedule.timezone,
            schedule.task.model_dump(mode="json"),
            schedule.overlap.value,
            schedule.metadata,
            schedule.next_run_at,
        )
        if row is None:  # an INSERT ... RETURNING always returns its row
            raise RuntimeError(f"schedule {schedule.id} was not inserted")
        return to_schedule(row)

    async def get(self, schedule_id: UUID, tenant: str) -> ScheduleRecord | None:
        row = await self._fetchrow(
            f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = $1 AND tenant = $2", schedule_id, tenant
        )
        return to_schedule(row) if row is not None else None

    async def list(
        self, tenant: str, *, limit: int, after: tuple[datetime, UUID] | None
    ) -> builtins.list[ScheduleRecord]:
        """Newest first, from after ``after`` (the ``(created_at, id)`` of the last one seen)."""
        if after is None:
            rows = await self._fetch(
                f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE tenant = $1"
                " ORDER BY created_at DESC, id DESC LIMIT $2",
                tenant,
                limit,
            )
        else:
            rows = await self._fetch(
                f"SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE tenant = $1 AND (created_at, id) < ($2, $3)"
                " ORDER BY created_at DESC, id DESC LIMIT $4",
                tenant,
                after[0],
                after[1],
                limit,
            )
        return [to_schedule(r) for r in rows]

    async def pause(self, schedule_id: UUID, tenant: str) -> ScheduleRecord | None:
        """No occurrence runs until resumed (idempotent); None when there is no such schedule."""
        row = await self._fetchrow(_PAUSE, schedule_id, tenant)
        return to_schedule(row) if row is not None else None

    async def resume(
        self, schedule_id: UUID, tenant: str, next_run_at: datetime | None
    ) -> ScheduleRecord | None:
        """Run again from ``next_run_at`` (the first occurrence after now: those missed while paused are
        not run); a schedule that is not paused is left as it is. None when there is no such schedule."""
        row = await self._fetchrow(_RESUME, schedule_id, tenant, next_run_at)
        return to_schedule(row) if row is not None else None

    async def delete(self, schedule_id: UUID, tenant: str) -> bool:
        """The tasks it created stay; False when there is no such schedule."""
        row = await self._fetchrow(
            "DELETE FROM schedules WHERE id = $1 AND tenant = $2 RETURNING id", schedule_id, tenant
        )
        return row is not None

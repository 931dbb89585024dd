"""Dead letters: what the broker gave up on, kept until an operator replays or discards it.

The transitions into and out of ``dead_lettered`` (``dead_letter``, ``reclaim``, ``replay``) are in
``transitions.py``; here are the reads of the open dead letters and closing one without a replay.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store._pg import PoolStore
from taskyard_common.store.records import DeadLetterRecord

_DL_COLUMNS = (
    "d.task_id, d.specialist, d.reason, d.queue, d.deaths, d.message, d.recorded_at, t.status AS task_status,"
    " t.tenant"
)


# The open dead letter of a task ($1 task_id, $2 specialist, $3 reason, $4 queue, $5 deaths, $6 message); a
# task dead-lettered again after a replay reopens its row. Shared with the reaper's ``reclaim``.
UPSERT_DEAD_LETTER = (
    "INSERT INTO dead_letters (task_id, specialist, reason, queue, deaths, message)"
    " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (task_id) DO UPDATE SET"
    " specialist = EXCLUDED.specialist, reason = EXCLUDED.reason, queue = EXCLUDED.queue,"
    " deaths = EXCLUDED.deaths, message = EXCLUDED.message,"
    " recorded_at = clock_timestamp(), discarded_at = NULL"
)


def _dead_letter(row: asyncpg.Record) -> DeadLetterRecord:
    data = dict(row)
    data["task_status"] = TaskStatus(data["task_status"])
    return DeadLetterRecord.model_validate(data)


class DeadLetterQueries(PoolStore):
    async def list_dead_letters(
        self,
        *,
        specialist: str | None,
        reason: str | None,
        limit: int,
        after: tuple[datetime, UUID] | None,
        tenant: str | None = None,
    ) -> list[DeadLetterRecord]:
        clauses: list[str] = ["d.discarded_at IS NULL"]
        args: list[Any] = []
        if tenant is not None:
            args.append(tenant)
            clauses.append(f"t.tenant = ${len(args)}")
        if specialist is not None:
            args.append(specialist)
            clauses.append(f"d.specialist = ${len(args)}")
        if reason is not None:
            args.append(reason)
            clauses.append(f"d.reason = ${len(args)}")
        if after is not None:
            args.extend(after)
            clauses.append(f"(d.recorded_at, d.task_id) < (${len(args) - 1}, ${len(args)})")
        args.append(limit)
        rows = await self._fetch(
            f"SELECT {_DL_COLUMNS} FROM dead_letters d JOIN tasks t ON t.id = d.task_id"
            f" WHERE {' AND '.join(clauses)} ORDER BY d.recorded_at DESC, d.task_id DESC LIMIT ${len(args)}",
            *args,
        )
        return [_dead_letter(r) for r in rows]

    async def get_dead_letter(self, task_id: UUID) -> DeadLetterRecord | None:
        row = await self._fetchrow(
            f"SELECT {_DL_COLUMNS} FROM dead_letters d JOIN tasks t ON t.id = d.task_id"
            " WHERE d.task_id = $1 AND d.discarded_at IS NULL",
            task_id,
        )
        return _dead_letter(row) if row else None

    async def discard_dead_letter(self, task_id: UUID) -> bool:
        row = await self._fetchrow(
            "UPDATE dead_letters SET discarded_at = clock_timestamp()"
            " WHERE task_id = $1 AND discarded_at IS NULL RETURNING task_id",
            task_id,
        )
        return row is not None

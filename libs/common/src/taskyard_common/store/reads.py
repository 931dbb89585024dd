"""Reads of the task table: one task, a tenant's page, and what the recovery loops and metrics look for."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from taskyard_common.lifecycle import NON_TERMINAL, ROUTABLE, WAITING, TaskStatus, sql_in
from taskyard_common.messages import Priority
from taskyard_common.store._pg import COLUMNS, PoolStore, to_record
from taskyard_common.store.records import Cursor, TaskRecord, WaitingAges, WorkflowCounts

# Mark the tasks watched (when less than half the time is left), then read their versions.
# A renewed row's version comes from the UPDATE itself, never from the statement's snapshot: a transition
# that commits between the two would otherwise be missed twice (it saw no mark, so it woke nobody; the
# snapshot predates it, so the watcher saw no change) until the next poll. The UPDATE waits for a
# concurrent transition's row lock and returns the row as it left it; a transition that waits for this one
# sees the mark and publishes its wake-up.
_WATCH = (
    "WITH renewed AS (UPDATE tasks SET watched_until = clock_timestamp() + make_interval(secs => $2)"
    " WHERE id = ANY($1::uuid[]) AND (watched_until IS NULL"
    " OR watched_until < clock_timestamp() + make_interval(secs => $2 / 2))"
    " RETURNING id, event_seq, updated_at)"
    " SELECT id, event_seq, updated_at FROM renewed"
    " UNION ALL SELECT id, event_seq, updated_at FROM tasks"
    " WHERE id = ANY($1::uuid[]) AND id NOT IN (SELECT id FROM renewed)"
)


# The large columns a lean read may leave unread, with what stands in for them: PostgreSQL never reads (nor
# decompresses) the TOASTed value of a column the query does not name.
OMITTABLE = {
    "input": "'\"\"'::jsonb AS input",
    "result": "NULL::jsonb AS result",
    "error": "NULL::jsonb AS error",
    "attempt_log": "'[]'::jsonb AS attempt_log",
    "dead_letter": "NULL::jsonb AS dead_letter",
}


def columns_without(omit: frozenset[str]) -> str:
    """``COLUMNS`` with the ``omit``ted ones (keys of ``OMITTABLE``) replaced by placeholders."""
    return ", ".join(OMITTABLE[c] if c in omit else c for c in (c.strip() for c in COLUMNS.split(",")))


class ReadQueries(PoolStore):
    async def get(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(f"SELECT {COLUMNS} FROM tasks WHERE id = $1", task_id)
        return to_record(row) if row else None

    async def versions(
        self, task_ids: Sequence[UUID], *, watch_seconds: float | None = None
    ) -> dict[UUID, tuple[int, datetime]]:
        """The (event_seq, updated_at) of many tasks; with ``watch_seconds``, also mark them watched for
        that long (renewed once less than half of it is left: a row is rewritten rarely, not every read), so
        their changes publish wake-ups."""
        if watch_seconds is None:
            rows = await self._fetch(
                "SELECT id, event_seq, updated_at FROM tasks WHERE id = ANY($1::uuid[])", list(task_ids)
            )
        else:
            rows = await self._fetch(_WATCH, list(task_ids), watch_seconds)
        return {r["id"]: (r["event_seq"], r["updated_at"]) for r in rows}

    async def list(
        self,
        *,
        status: TaskStatus | None,
        specialist: str | None,
        limit: int,
        after: Cursor | None,
        tenant: str | None = None,
        priority: Priority | None = None,
        omit: frozenset[str] = frozenset(),
    ) -> builtins.list[TaskRecord]:
        clauses: list[str] = []
        args: list[Any] = []
        if priority is not None:
            args.append(priority.value)
            clauses.append(f"priority = ${len(args)}")
        if tenant is not None:
            args.append(tenant)
            clauses.append(f"tenant = ${len(args)}")
        if status is not None:
            args.append(status.value)
            clauses.append(f"status = ${len(args)}")
        if specialist is not None:
            args.append(specialist)
            clauses.append(f"specialist = ${len(args)}")
        if after is not None:
            args.extend(after)
            clauses.append(f"(created_at, id) < (${len(args) - 1}, ${len(args)})")
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        args.append(limit)
        rows = await self._fetch(
            f"SELECT {columns_without(omit) if omit else COLUMNS} FROM tasks {where}"
            f" ORDER BY created_at DESC, id DESC LIMIT ${len(args)}",
            *args,
        )
        return [to_record(r) for r in rows]

    async def database_now(self) -> datetime:
        row = await self._fetchrow("SELECT clock_timestamp() AS now")
        assert row is not None
        now: datetime = row["now"]
        return now

    async def unpublished(
        self, older_than: datetime, limit: int, exclude: Sequence[UUID] = ()
    ) -> builtins.list[TaskRecord]:
        # updated_at, not created_at: a replayed task is old but its intake publish may be in flight.
        rows = await self._fetch(
            f"SELECT {COLUMNS} FROM tasks WHERE published_at IS NULL AND status IN {sql_in(ROUTABLE)}"
            " AND updated_at < $1 AND NOT (id = ANY($3::uuid[])) ORDER BY created_at LIMIT $2",
            older_than,
            limit,
            list(exclude),
        )
        return [to_record(r) for r in rows]

    async def stale_queued(
        self, older_than: datetime, limit: int, exclude: Sequence[UUID] = ()
    ) -> builtins.list[TaskRecord]:
        rows = await self._fetch(
            # Never a parked task: it has no message on purpose (``parking.py``).
            f"SELECT {COLUMNS} FROM tasks WHERE published_at IS NULL AND status = 'queued' AND parked_at IS NULL"
            " AND lease_owner IS NULL AND next_attempt_at IS NULL AND updated_at < $1"
            " AND NOT (id = ANY($3::uuid[])) ORDER BY updated_at LIMIT $2",
            older_than,
            limit,
            list(exclude),
        )
        return [to_record(r) for r in rows]

    async def expired_leases(self, limit: int) -> builtins.list[TaskRecord]:
        rows = await self._fetch(
            f"SELECT {COLUMNS} FROM tasks WHERE status = 'running' AND message_settled"
            " AND lease_expires_at < clock_timestamp() ORDER BY lease_expires_at LIMIT $1",
            limit,
        )
        return [to_record(r) for r in rows]

    async def oldest_waiting(self) -> WaitingAges:
        # updated_at, not created_at or routed_at: a task enters pending or queued again when it is replayed,
        # handed back or reclaimed, and nothing else changes updated_at while it waits. A retrying task waits
        # in the work queue once its delay is over. The status index keeps this cheap.
        rows = await self._fetch(
            "SELECT CASE WHEN status = 'pending' THEN NULL ELSE specialist END AS queue,"
            " extract(epoch FROM clock_timestamp() - min(CASE WHEN status = 'retrying' THEN next_attempt_at"
            " ELSE updated_at END))::float8 AS age"
            f" FROM tasks WHERE status IN {sql_in(WAITING)}"
            " OR (status = 'retrying' AND next_attempt_at <= clock_timestamp())"
            " GROUP BY 1"
        )
        pending: float | None = None
        queued: dict[str, float] = {}
        for row in rows:
            age = max(0.0, float(row["age"]))
            if row["queue"] is None:
                pending = age
            else:
                queued[row["queue"]] = age
        return WaitingAges(pending, queued)

    async def workflow_counts(self) -> WorkflowCounts:
        # The running groups' partial index and the status index keep this to the unfinished rows.
        row = await self._fetchrow(
            "SELECT (SELECT count(*) FROM task_groups WHERE status = 'running')::int AS groups,"
            " (SELECT count(DISTINCT chain_root_id) FROM tasks"
            f" WHERE status IN {sql_in(NON_TERMINAL)} AND chain_root_id IS NOT NULL)::int AS chains,"
            " count(*) FILTER (WHERE group_role IS DISTINCT FROM 'reduce')::int AS delegation,"
            " count(*) FILTER (WHERE group_role = 'reduce')::int AS parts"
            " FROM tasks WHERE status = 'waiting'"
        )
        assert row is not None  # an aggregate always returns its row
        return WorkflowCounts(row["groups"], row["chains"], row["delegation"], row["parts"])

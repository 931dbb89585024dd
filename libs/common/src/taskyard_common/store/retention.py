"""Removing finished tasks with everything attached to them: retention rounds, a client's delete, a tenant's.

What hangs off a task: its events, step checkpoints, webhook deliveries, dead letter and idempotency key
(each with a foreign key to it), and its group once the group is finished and has no task left. They are
deleted explicitly, in the task's transaction, so each table's count is known (the foreign keys' cascades
would remove the same rows, uncounted).

Only a finished task (``TERMINAL``) is ever removed, and only one that no unfinished workflow still needs:
a waiting parent reads its delegated children's outcomes when the last of them ends, and a running group's
reduce step reads its children's results. The rows are locked (``FOR UPDATE SKIP LOCKED`` in batches,
``FOR UPDATE`` for one task) before the status check, so a concurrent replay of a dead letter either
commits first (the task is queued again and stays) or waits and finds it gone.

A retention round takes ``batch_size`` tasks at most per transaction, oldest first: a batch holds its row
locks only for its own few statements and never blocks a submission (submissions insert new rows; no lock
on an old row is ever taken by the submit path).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from taskyard_common.lifecycle import TERMINAL, sql_in
from taskyard_common.store._pg import Connection, PoolStore

# The tables rows are removed from (the bounded label values of the removal counter), children first.
TABLES = (
    "task_events",
    "task_steps",
    "webhook_deliveries",
    "dead_letters",
    "idempotency_keys",
    "tasks",
    "group_idempotency_keys",
    "task_groups",
)

# A task some unfinished workflow still needs (see the module's docstring); ``t`` is the task.
_NEEDED = (
    f"(EXISTS (SELECT 1 FROM tasks p WHERE p.id = t.parent_id AND p.status NOT IN {sql_in(TERMINAL)})"
    " OR EXISTS (SELECT 1 FROM task_groups g WHERE g.id = t.group_id AND g.status = 'running'))"
)
_REMOVABLE = f"t.status IN {sql_in(TERMINAL)} AND NOT {_NEEDED}"

# The removal of a batch of locked task ids ($1): children, then the tasks. One statement, one round trip.
_REMOVE = (
    "WITH e AS (DELETE FROM task_events WHERE task_id = ANY($1::uuid[]) RETURNING 1),"
    " s AS (DELETE FROM task_steps WHERE task_id = ANY($1::uuid[]) RETURNING 1),"
    " w AS (DELETE FROM webhook_deliveries WHERE task_id = ANY($1::uuid[]) RETURNING 1),"
    " d AS (DELETE FROM dead_letters WHERE task_id = ANY($1::uuid[]) RETURNING 1),"
    " k AS (DELETE FROM idempotency_keys WHERE task_id = ANY($1::uuid[]) RETURNING 1),"
    " t AS (DELETE FROM tasks WHERE id = ANY($1::uuid[]) RETURNING group_id)"
    " SELECT (SELECT count(*) FROM e) AS task_events, (SELECT count(*) FROM s) AS task_steps,"
    " (SELECT count(*) FROM w) AS webhook_deliveries, (SELECT count(*) FROM d) AS dead_letters,"
    " (SELECT count(*) FROM k) AS idempotency_keys, (SELECT count(*) FROM t) AS tasks,"
    " (SELECT array_agg(DISTINCT group_id) FROM t WHERE group_id IS NOT NULL) AS groups"
)
# Finished groups ($1) left without a task, with their idempotency keys (a separate statement: it must see
# the tasks' removal).
_REMOVE_GROUPS = (
    "WITH g AS (SELECT id FROM task_groups WHERE id = ANY($1::uuid[]) AND status <> 'running'"
    " AND NOT EXISTS (SELECT 1 FROM tasks WHERE group_id = task_groups.id) FOR UPDATE),"
    " k AS (DELETE FROM group_idempotency_keys WHERE group_id IN (SELECT id FROM g) RETURNING 1),"
    " r AS (DELETE FROM task_groups WHERE id IN (SELECT id FROM g) RETURNING 1)"
    " SELECT (SELECT count(*) FROM k) AS group_idempotency_keys, (SELECT count(*) FROM r) AS task_groups"
)

# A batch past a cutoff, oldest first. created_at < cutoff narrows the index range to the old rows (a task
# finishes after it is created); $1 cutoff, $2 batch size, then the tenant condition's parameters.
_EXPIRED = (
    "SELECT t.id FROM tasks t WHERE t.created_at < $1 AND t.finished_at < $1 AND {tenants} AND "
    + _REMOVABLE
    + " ORDER BY t.created_at LIMIT $2 FOR UPDATE OF t SKIP LOCKED"
)
_TENANT_BATCH = (
    "SELECT t.id FROM tasks t WHERE t.tenant = $1 AND "
    + _REMOVABLE
    + " ORDER BY t.created_at LIMIT $2 FOR UPDATE OF t SKIP LOCKED"
)
_ONE = f"SELECT t.tenant, t.status, {_NEEDED} AS needed FROM tasks t WHERE t.id = $1 FOR UPDATE"


class Deletion(enum.Enum):
    DELETED = "deleted"
    NOT_FOUND = "not_found"
    UNFINISHED = "unfinished"
    # Finished, but an unfinished workflow (its waiting parent, its running group) still reads it.
    NEEDED = "needed"


@dataclass
class Removed:
    """Rows removed, per table (``TABLES``)."""

    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))

    @property
    def tasks(self) -> int:
        return self.rows["tasks"]

    def add(self, other: Removed) -> None:
        for table, count in other.rows.items():
            self.rows[table] += count


@dataclass(frozen=True)
class TaskDeletion:
    outcome: Deletion
    status: str | None = None
    removed: Removed = field(default_factory=Removed)


@dataclass(frozen=True)
class TenantPurge:
    removed: Removed
    # Tasks of the tenant still there: unfinished, or needed by an unfinished workflow.
    remaining: int


class RetentionStore(PoolStore):
    """On the task store's pool (``RetentionStore(store.pool, acquire_timeout=...)``)."""

    async def _remove(self, conn: Connection, ids: Sequence[UUID]) -> Removed:
        done = Removed()
        if not ids:
            return done
        row = await conn.fetchrow(_REMOVE, list(ids))
        assert row is not None
        for table in TABLES[:6]:
            done.rows[table] = int(row[table])
        if row["groups"]:
            groups = await conn.fetchrow(_REMOVE_GROUPS, row["groups"])
            assert groups is not None
            done.rows["group_idempotency_keys"] = int(groups["group_idempotency_keys"])
            done.rows["task_groups"] = int(groups["task_groups"])
        return done

    async def delete_task(self, task_id: UUID, tenant: str | None) -> TaskDeletion:
        """Remove one finished task of ``tenant`` (None: any tenant's) with everything attached."""
        async with self._transaction() as conn:
            row = await conn.fetchrow(_ONE, task_id)
            if row is None or (tenant is not None and row["tenant"] != tenant):
                return TaskDeletion(Deletion.NOT_FOUND)
            if row["status"] not in {s.value for s in TERMINAL}:
                return TaskDeletion(Deletion.UNFINISHED, row["status"])
            if row["needed"]:
                return TaskDeletion(Deletion.NEEDED, row["status"])
            return TaskDeletion(Deletion.DELETED, row["status"], await self._remove(conn, [task_id]))

    async def purge_tenant_batch(self, tenant: str, batch_size: int) -> Removed:
        """One batch of a tenant's removable tasks (oldest first), in its own transaction."""
        async with self._transaction() as conn:
            ids = [r["id"] for r in await conn.fetch(_TENANT_BATCH, tenant, batch_size)]
            return await self._remove(conn, ids)

    async def remaining(self, tenant: str) -> int:
        row = await self._fetchrow("SELECT count(*) AS n FROM tasks WHERE tenant = $1", tenant)
        assert row is not None
        return int(row["n"])

    async def retention_overrides(self) -> dict[str, int]:
        """Tenants with their own retention (days)."""
        rows = await self._fetch(
            "SELECT tenant, retention_days FROM tenant_limits WHERE retention_days IS NOT NULL"
        )
        return {r["tenant"]: int(r["retention_days"]) for r in rows}

    async def set_retention(self, tenant: str, days: int | None) -> None:
        """A tenant's own retention; None: back to the deployment's default."""
        await self._fetchrow(
            "INSERT INTO tenant_limits (tenant, retention_days) VALUES ($1, $2)"
            " ON CONFLICT (tenant) DO UPDATE SET retention_days = EXCLUDED.retention_days,"
            " updated_at = clock_timestamp()",
            tenant,
            days,
        )

    async def expire_batch(
        self, cutoff: datetime, batch_size: int, *, tenant: str | None = None, exclude: Sequence[str] = ()
    ) -> Removed:
        """Remove up to ``batch_size`` tasks finished before ``cutoff`` (of ``tenant``; None: of every
        tenant but those in ``exclude``), in one transaction."""
        which: str | list[str]
        if tenant is not None:
            sql, which = _EXPIRED.format(tenants="t.tenant = $3"), tenant
        else:
            sql, which = _EXPIRED.format(tenants="t.tenant <> ALL($3::text[])"), list(exclude)
        async with self._transaction() as conn:
            ids = [r["id"] for r in await conn.fetch(sql, cutoff, batch_size, which)]
            return await self._remove(conn, ids)

    async def oldest_ages(self) -> dict[str, float | None]:
        """Age in seconds of the oldest row of the tables with a time index (None: empty): ``tasks`` (its
        oldest finished task, what retention removes) and ``idempotency_keys``. The other tables' rows
        go with their task, in its transaction, so they are never older than it."""
        row = await self._fetchrow(
            "SELECT extract(epoch FROM clock_timestamp() - (SELECT created_at FROM tasks"
            f" WHERE status IN {sql_in(TERMINAL)} ORDER BY created_at LIMIT 1))::float8 AS tasks,"
            " extract(epoch FROM clock_timestamp() - (SELECT min(created_at) FROM idempotency_keys))::float8"
            " AS idempotency_keys"
        )
        assert row is not None
        return {"tasks": row["tasks"], "idempotency_keys": row["idempotency_keys"]}

    async def overdue_seconds(self, cutoff: datetime, *, tenant: str | None, exclude: Sequence[str]) -> float:
        """How long past ``cutoff`` the oldest removable task finished (0: none is due): retention keeps up
        while this stays near 0."""
        cond = "t.tenant = $2" if tenant is not None else "t.tenant <> ALL($2::text[])"
        row = await self._fetchrow(
            "SELECT extract(epoch FROM $1 - t.finished_at)::float8 AS late FROM tasks t"
            f" WHERE t.created_at < $1 AND t.finished_at < $1 AND {cond} AND {_REMOVABLE}"
            " ORDER BY t.created_at LIMIT 1",
            cutoff,
            tenant if tenant is not None else list(exclude),
        )
        return max(0.0, float(row["late"])) if row is not None else 0.0


def cutoff_for(now: datetime, days: float) -> datetime:
    return now - timedelta(days=days)

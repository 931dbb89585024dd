"""Workflows in the store: delegation (a running task parks while its child tasks run), cancelling a task's
tree, groups (created whole, read, cancelled), and the links a task document shows (its chain, its parent
and children).

What a task's end sets in motion (the chain's next step, the waiting parent's resumption, the group's
settlement) is in ``follow_ups.py`` and ``groups.py``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from taskyard_common.lifecycle import CANCELLABLE_AT_ONCE, TaskStatus, sql_in
from taskyard_common.messages import Priority
from taskyard_common.store._pg import (
    CLEAR_LEASE,
    INSERT_TASK,
    INSERT_TASKS,
    insert_args,
    insert_arrays,
    to_record,
)
from taskyard_common.store.events import logged
from taskyard_common.store.groups import GROUP_COLUMNS, GroupRecord, GroupSettling
from taskyard_common.store.records import NewTask, TaskRecord

# running (owner) → waiting for ``$3`` children ($4: their ids, for the event).
DELEGATE = logged(
    f"status = 'waiting', waiting_children = $3, {CLEAR_LEASE}, updated_at = clock_timestamp()",
    "WHERE id = $1 AND status = 'running' AND lease_owner = $2",
    event="'delegated'",
    data="jsonb_build_object('children', to_jsonb($4::uuid[]))",
    returning="c.id",
)
# The not yet finished descendants of a task, through delegation, cancelled like the task: those not
# running at once, a running one asked to stop (the caller tells its worker).
CANCEL_DESCENDANTS = (
    "WITH RECURSIVE tree AS (SELECT id FROM tasks WHERE parent_id = $1 AND delegation IS NOT NULL"
    " UNION SELECT t.id FROM tasks t JOIN tree ON t.parent_id = tree.id AND t.delegation IS NOT NULL), "
    + logged(
        "status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
        " cancel_requested_at = COALESCE(cancel_requested_at, clock_timestamp()),"
        " finished_at = CASE WHEN status = 'running' THEN finished_at ELSE clock_timestamp() END,"
        " next_attempt_at = NULL, updated_at = clock_timestamp()",
        f"WHERE id IN (SELECT id FROM tree) AND status IN {sql_in(CANCELLABLE_AT_ONCE | {TaskStatus.RUNNING})}",
        event="CASE WHEN c.status = 'cancelled' THEN 'cancelled' ELSE 'cancel_requested' END",
        returning="c.id, c.status",
    ).removeprefix("WITH ")
)
# The same for a group's children (and its reduce task).
CANCEL_GROUP_TASKS = logged(
    "status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
    " cancel_requested_at = COALESCE(cancel_requested_at, clock_timestamp()),"
    " finished_at = CASE WHEN status = 'running' THEN finished_at ELSE clock_timestamp() END,"
    " next_attempt_at = NULL, updated_at = clock_timestamp()",
    f"WHERE group_id = $1 AND status IN {sql_in(CANCELLABLE_AT_ONCE | {TaskStatus.RUNNING})}",
    event="CASE WHEN c.status = 'cancelled' THEN 'cancelled' ELSE 'cancel_requested' END",
    returning="c.id, c.status",
)
# A linked task as documents show it: its specialist, or the one asked for until it is routed.
_LINK = "id, status, chain_index, COALESCE(specialist, requested_specialist) AS specialist, created_at, finished_at"
# $1 tenant, $2 key, $3 request_hash, $4 group_id, $5 retention in seconds: as a task's key (idempotency.py).
_CLAIM_GROUP = (
    "INSERT INTO group_idempotency_keys AS k (tenant, key, request_hash, group_id) VALUES ($1, $2, $3, $4)"
    " ON CONFLICT (tenant, key) DO UPDATE SET request_hash = EXCLUDED.request_hash,"
    " group_id = EXCLUDED.group_id, created_at = clock_timestamp()"
    " WHERE k.created_at < clock_timestamp() - make_interval(secs => $5)"
    " RETURNING key"
)


_INSERT_GROUP = (
    "INSERT INTO task_groups (id, tenant, total, reduce, metadata, priority) VALUES ($1, $2, $3, $4, $5, $6)"
)


def _group_priority(tasks: Sequence[NewTask]) -> str:
    """A group's priority is its children's (the API gives them one); its reduce step runs at it."""
    return min((t.priority for t in tasks), key=list(Priority).index, default=Priority.NORMAL).value


class WorkflowQueries(GroupSettling):
    async def delegate(
        self, task_id: UUID, owner: str, children: Sequence[NewTask]
    ) -> builtins.list[TaskRecord] | None:
        """running (``owner``) → waiting, and its ``children`` (each naming it in ``parent_id`` and
        ``delegation``) created, in one transaction; None when the lease is gone. The caller announces
        the children (their intake messages), then settles the parent's message."""
        async with self._transaction() as conn:
            parked = await conn.fetchrow(DELEGATE, task_id, owner, len(children), [c.id for c in children])
            if parked is None:
                return None
            records = []
            for child in children:
                row = await conn.fetchrow(INSERT_TASK, *insert_args(child))
                if row is None:  # an INSERT ... RETURNING always returns its row
                    raise RuntimeError(f"child task {child.id} was not inserted")
                records.append(to_record(row))
        self._changed(task_id)
        for record in records:
            self._changed(record.id)
        return records

    async def cancel_descendants(self, task_id: UUID) -> builtins.list[UUID]:
        """Cancel what ``task_id`` delegated, all the way down, and the parts of a multi-routed task;
        returns the running ones (asked to stop: tell their workers)."""
        rows = await self._fetch(CANCEL_DESCENDANTS, task_id)
        for row in rows:
            self._changed(row["id"])
        running = [row["id"] for row in rows if row["status"] == TaskStatus.RUNNING.value]
        # A multi-routed task is its group's reduce step: its parts go with it.
        split = await self._fetchrow(
            "SELECT group_id FROM tasks WHERE id = $1 AND group_role = 'reduce'"
            " AND jsonb_array_length(COALESCE(routing->'parts', '[]'::jsonb)) > 0",
            task_id,
        )
        if split is not None:
            running += await self.cancel_group(split["group_id"])
        return running

    async def children(self, task_id: UUID) -> builtins.list[dict[str, Any]]:
        """The tasks ``task_id`` delegated to, oldest first: {id, status, specialist, ...}."""
        rows = await self._fetch(
            f"SELECT {_LINK} FROM tasks WHERE parent_id = $1 AND delegation IS NOT NULL"
            " ORDER BY created_at, id",
            task_id,
        )
        return [dict(r) for r in rows]

    async def chain(self, root_id: UUID) -> builtins.list[dict[str, Any]]:
        """The steps of the chain that starts with ``root_id`` created so far, in order."""
        rows = await self._fetch(
            f"SELECT {_LINK} FROM tasks WHERE chain_root_id = $1 ORDER BY chain_index", root_id
        )
        return [dict(r) for r in rows]

    async def links(
        self, task_id: UUID, chain_root_id: UUID | None
    ) -> tuple[builtins.list[dict[str, Any]], builtins.list[dict[str, Any]]]:
        """``chain(chain_root_id)`` and ``children(task_id)`` in one query, for a task's document: (the steps
        of its chain so far, none when it is no chain's; the tasks it delegated to)."""
        rows = await self._fetch(
            f"SELECT {_LINK}, delegation IS NOT NULL AS delegated FROM tasks"
            " WHERE (parent_id = $1 AND delegation IS NOT NULL) OR chain_root_id = $2"
            " ORDER BY chain_index NULLS LAST, created_at, id",
            task_id,
            chain_root_id,
        )
        steps: builtins.list[dict[str, Any]] = []
        children: builtins.list[dict[str, Any]] = []
        for row in rows:
            link = dict(row)
            (children if link.pop("delegated") else steps).append(link)
        return steps, children

    # --- groups ----------------------------------------------------------------------------------------

    async def create_group(
        self,
        group_id: UUID,
        *,
        tenant: str,
        tasks: Sequence[NewTask],
        reduce: dict[str, Any] | None,
        metadata: dict[str, str],
    ) -> builtins.list[TaskRecord]:
        """The group and its children (``tasks``, each with ``group_id``), committed together."""
        async with self._transaction() as conn:
            await conn.execute(
                _INSERT_GROUP,
                group_id,
                tenant,
                len(tasks),
                reduce,
                metadata,
                _group_priority(tasks),
            )
            rows = await conn.fetch(INSERT_TASKS, *insert_arrays(tasks))
        by_id = {row["id"]: to_record(row) for row in rows}
        for task_id in by_id:
            self._changed(task_id, watched=False)  # born a moment ago: nobody watches them yet
        return [by_id[t.id] for t in tasks]

    async def create_group_idempotent(
        self,
        group_id: UUID,
        *,
        tenant: str,
        tasks: Sequence[NewTask],
        reduce: dict[str, Any] | None,
        metadata: dict[str, str],
        key: str,
        request_hash: str,
        retention_seconds: float,
    ) -> tuple[bool, str, UUID | None, builtins.list[TaskRecord]]:
        """``create_group`` under an Idempotency-Key, as ``create_idempotent`` does for a task: (created, the
        stored request's hash, the group the key names, the children created)."""
        for _ in range(5):
            async with self._transaction() as conn:
                claimed = await conn.fetchrow(
                    _CLAIM_GROUP, tenant, key, request_hash, group_id, float(retention_seconds)
                )
                if claimed is not None:
                    await conn.execute(
                        _INSERT_GROUP,
                        group_id,
                        tenant,
                        len(tasks),
                        reduce,
                        metadata,
                        _group_priority(tasks),
                    )
                    rows = await conn.fetch(INSERT_TASKS, *insert_arrays(tasks))
                    by_id = {row["id"]: to_record(row) for row in rows}
                    created = [by_id[t.id] for t in tasks]
                    break
                existing = await conn.fetchrow(
                    "SELECT request_hash, group_id FROM group_idempotency_keys WHERE tenant = $1 AND key = $2",
                    tenant,
                    key,
                )
                if existing is not None:
                    return False, existing["request_hash"], existing["group_id"], []
        else:
            raise RuntimeError("group idempotency key could not be claimed after 5 attempts")
        for record in created:
            self._changed(record.id, watched=False)
        return True, request_hash, group_id, created

    async def group_key(
        self, tenant: str, key: str, retention_seconds: float
    ) -> tuple[str, UUID | None] | None:
        """(the request's hash, its group) an Idempotency-Key younger than the retention names, or None: a
        retry is answered without being charged again (a claim still decides who creates the group)."""
        row = await self._fetchrow(
            "SELECT request_hash, group_id FROM group_idempotency_keys WHERE tenant = $1 AND key = $2"
            " AND created_at >= clock_timestamp() - make_interval(secs => $3)",
            tenant,
            key,
            float(retention_seconds),
        )
        return (row["request_hash"], row["group_id"]) if row is not None else None

    async def discard_group(self, group_id: UUID) -> builtins.list[UUID]:
        """Take back a group whose announcement failed: its Idempotency-Key released, its children not yet
        routed deleted (an intake message already sent for one finds no task and is dropped), and the group
        deleted with them. A child the broker agent routed meanwhile (from an early publish) cannot be
        taken back: it is cancelled, and the group is kept, cancelled, for it. Returns the running ones
        (asked to stop: tell their workers)."""
        async with self._transaction() as conn:
            await conn.execute("DELETE FROM group_idempotency_keys WHERE group_id = $1", group_id)
            # A child routed concurrently is locked by its routing until that commits, then skipped here
            # (no longer pending) and found by the statements below.
            await conn.execute("DELETE FROM tasks WHERE group_id = $1 AND status = 'pending'", group_id)
            if not await conn.fetchval("SELECT count(*) FROM tasks WHERE group_id = $1", group_id):
                await conn.execute("DELETE FROM task_groups WHERE id = $1", group_id)
                return []
            await conn.execute(
                "UPDATE task_groups SET cancel_requested_at = COALESCE(cancel_requested_at, clock_timestamp())"
                " WHERE id = $1",
                group_id,
            )
            rows = await conn.fetch(CANCEL_GROUP_TASKS, group_id)
        for row in rows:
            self._changed(row["id"])
        await self.settle_group(group_id)
        return [row["id"] for row in rows if row["status"] == TaskStatus.RUNNING.value]

    async def expire_group_idempotency_keys(self, older_than: datetime) -> int:
        """Delete the groups' idempotency keys created before ``older_than``; returns how many."""
        rows = await self._fetch(
            "DELETE FROM group_idempotency_keys WHERE created_at < $1 RETURNING key", older_than
        )
        return len(rows)

    async def get_group(self, group_id: UUID) -> GroupRecord | None:
        row = await self._fetchrow(f"SELECT {GROUP_COLUMNS} FROM task_groups WHERE id = $1", group_id)
        if row is None:
            return None
        counts = await self._fetch(
            "SELECT status, count(*)::int AS n, count(*) FILTER (WHERE published_at IS NULL)::int AS unannounced"
            " FROM tasks WHERE group_id = $1 AND group_role = 'child' GROUP BY status",
            group_id,
        )
        data = dict(row)
        data["counts"] = {r["status"]: r["n"] for r in counts}
        data["unannounced"] = sum(r["unannounced"] for r in counts if r["status"] == TaskStatus.PENDING.value)
        return GroupRecord.model_validate(data)

    async def group_children(
        self, group_id: UUID, *, limit: int, after: tuple[Any, UUID] | None = None
    ) -> builtins.list[dict[str, Any]]:
        """A page of the group's children, oldest first: {id, status, ...}."""
        args: list[Any] = [group_id, limit]
        where = ""
        if after is not None:
            args.extend(after)
            where = " AND (created_at, id) > ($3, $4)"
        rows = await self._fetch(
            f"SELECT {_LINK} FROM tasks WHERE group_id = $1 AND group_role = 'child'{where}"
            " ORDER BY created_at, id LIMIT $2",
            *args,
        )
        return [dict(r) for r in rows]

    async def cancel_group(self, group_id: UUID) -> builtins.list[UUID]:
        """Cancel the group's unfinished tasks (no reduce step will run); returns the running ones."""
        async with self._transaction() as conn:
            await conn.execute(
                "UPDATE task_groups SET cancel_requested_at = COALESCE(cancel_requested_at, clock_timestamp())"
                " WHERE id = $1",
                group_id,
            )
            rows = await conn.fetch(CANCEL_GROUP_TASKS, group_id)
        for row in rows:
            self._changed(row["id"])
        await self.settle_group(group_id)
        return [row["id"] for row in rows if row["status"] == TaskStatus.RUNNING.value]

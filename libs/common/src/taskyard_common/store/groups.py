"""Groups: a fan-out of tasks submitted together, and the reduce step that runs once after the last of them.

A child's end does not settle its group in the statement that ends the child: the reduce step's input is
every child's outcome, and a statement cannot see consistently what its siblings commit concurrently.
``settle_group`` does it in a transaction of its own instead: it locks the group row (so concurrent
settlements queue), then reads the children with a fresh snapshot; it is idempotent (the reduce task is
created at most once: ``reduce_task_id`` is set under the lock), and it runs after every child's end and
in the broker agent's reaper rounds, so a process that dies between a child's end and its settlement
delays the group, never loses it.
"""

from __future__ import annotations

import builtins
import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from taskyard_common.ids import uuid7
from taskyard_common.lifecycle import NON_TERMINAL, TERMINAL, TaskStatus, sql_in
from taskyard_common.metrics import GROUP_REDUCE_LATENCY
from taskyard_common.store._pg import COLUMNS, INSERT_TASK, Connection, PoolStore, insert_args, to_record
from taskyard_common.store.events import columns_of, logged
from taskyard_common.store.records import NewTask, TaskRecord

log = logging.getLogger(__name__)

DEFAULT_REDUCE_INSTRUCTIONS = (
    "The input lists the results of several tasks done in parallel (each with its id and status, and its "
    "output or error). Combine them into one answer."
)
COMBINE_INSTRUCTIONS = (
    "The request was split into parts, each done by another specialist. Their outcomes follow as JSON (each "
    "with its specialist, its job and status, and its output or error): answer the request by combining them "
    "into one answer."
)
GROUP_COLUMNS = "id, tenant, status, total, reduce, reduce_task_id, metadata, cancel_requested_at, created_at, finished_at"
# Whether any child is not finished (the partial index of migration 0015 answers it from the open ones).
_OPEN_CHILDREN = (
    "SELECT EXISTS (SELECT 1 FROM tasks WHERE group_id = $1 AND group_role = 'child'"
    f" AND status IN {sql_in(NON_TERMINAL)})"
)
_FINISH = "UPDATE task_groups SET status = $2, finished_at = clock_timestamp() WHERE id = $1"
# The same for a group whose reduce step ended, with the time from its last child's end (the fan-in latency).
_FINISH_REDUCED = (
    "UPDATE task_groups g SET status = $2, finished_at = clock_timestamp() WHERE id = $1"
    " RETURNING extract(epoch FROM g.finished_at - (SELECT max(t.finished_at) FROM tasks t"
    " WHERE t.group_id = $1 AND t.group_role = 'child'))::float8"
)
# Groups whose children are all done but that are still running: a settlement that never happened.
_UNSETTLED = (
    "SELECT g.id FROM task_groups g WHERE g.status = 'running' AND NOT EXISTS (SELECT 1 FROM tasks t"
    f" WHERE t.group_id = g.id AND t.group_role = 'child' AND t.status IN {sql_in(NON_TERMINAL)})"
    " AND (g.reduce_task_id IS NULL OR EXISTS (SELECT 1 FROM tasks r WHERE r.id = g.reduce_task_id"
    # A multi-routed task still waiting for parts that are all done is as overdue.
    f" AND r.status IN {sql_in(TERMINAL | {TaskStatus.WAITING})})) ORDER BY g.created_at LIMIT $1"
)

# A multi-routed task (``parts.py``), waiting as its group's reduce step: its parts are done, it is queued
# again with their outcomes ($2: its instructions), unannounced until the caller's publish is confirmed.
RESUME_COMBINE = logged(
    "status = 'queued', instructions = $2, waiting_children = 0, published_at = NULL,"
    " updated_at = clock_timestamp()",
    "WHERE id = $1 AND status = 'waiting' AND group_role = 'reduce'",
    event="'parts_finished'",
    data="jsonb_build_object('group', c.group_id)",
    returning=columns_of("c", COLUMNS),
)


class GroupRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant: str
    status: str
    total: int
    reduce: dict[str, Any] | None
    reduce_task_id: UUID | None
    metadata: dict[str, str]
    cancel_requested_at: datetime | None
    created_at: datetime
    finished_at: datetime | None
    # Children by status.
    counts: dict[str, int] = {}
    # Children still pending whose intake message is not known to be published: a submission still
    # announcing them (or one that died doing so, whose children the API's sweeper announces).
    unannounced: int = 0


def group_status_after(reduce_status: TaskStatus) -> str:
    """A group with a reduce step ends as its reduce task does."""
    if reduce_status is TaskStatus.COMPLETED:
        return "completed"
    if reduce_status is TaskStatus.CANCELLED:
        return "cancelled"
    return "failed"


class GroupSettling(PoolStore):
    """Settling groups, and announcing the tasks a task's end creates (chain steps, resumed parents,
    reduce steps): ``on_follow_up`` is given each one to publish (its row is committed, ``published_at``
    NULL: the API's sweeper or the reaper publishes it if the announcement is lost)."""

    on_follow_up: Callable[[TaskRecord], None] | None = None

    def _announce(self, record: TaskRecord) -> None:
        self._changed(record.id)
        if self.on_follow_up is not None:
            self.on_follow_up(record)

    async def _record(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(f"SELECT {COLUMNS} FROM tasks WHERE id = $1", task_id)
        return to_record(row) if row else None

    async def _after_end(self, row: Any) -> None:
        """What a task's end set in motion (``follow_ups.py``): announce the chain's next step or the
        resumed parent, and settle the group."""
        for key in ("_next", "_resumed"):
            task_id = row[key]
            if task_id is not None and (record := await self._record(task_id)) is not None:
                self._announce(record)
        if row["_group"] is not None:
            await self.settle_group(row["_group"])

    async def settle_group(self, group_id: UUID) -> str | None:
        """Move the group along if its children are all done: create its reduce task (once, announced
        after the commit), or finish it. Returns the group's status afterwards (None: no such group)."""
        status, created = await self._settle(group_id)
        if created is not None:
            self._announce(created)
        return status

    async def settle_groups(self, group_ids: builtins.list[UUID]) -> None:
        for group_id in group_ids:
            await self.settle_group(group_id)

    async def unsettled_groups(self, limit: int = 100) -> builtins.list[UUID]:
        """Groups whose settlement is overdue (a process died between a child's end and it)."""
        return [row["id"] for row in await self._fetch(_UNSETTLED, limit)]

    async def _settle(self, group_id: UUID) -> tuple[str | None, TaskRecord | None]:
        # Most children's ends leave siblings running: answered without the group's lock, so they do not
        # queue behind each other. Safe: this runs after the child's end committed, so the end of the last
        # child, whichever it is, finds none open here (and the locked check below decides).
        row = await self._fetchrow(_OPEN_CHILDREN, group_id)
        if row is not None and row[0]:
            return "running", None  # a group with children not finished is running
        async with self._transaction() as conn:
            group = await conn.fetchrow(
                f"SELECT {GROUP_COLUMNS} FROM task_groups WHERE id = $1 FOR UPDATE", group_id
            )
            if group is None:
                return None, None
            status: str = group["status"]
            if status != "running" or await conn.fetchval(_OPEN_CHILDREN, group_id):
                return status, None
            if group["reduce_task_id"] is not None:
                reduce_status = await conn.fetchval(
                    "SELECT status FROM tasks WHERE id = $1", group["reduce_task_id"]
                )
                if reduce_status in {s.value for s in TERMINAL}:
                    status = group_status_after(TaskStatus(reduce_status))
                    fan_in = await conn.fetchval(_FINISH_REDUCED, group_id, status)
                    if fan_in is not None:
                        # Under the group's lock, once per group: only this settlement finishes it.
                        GROUP_REDUCE_LATENCY.observe(max(0.0, fan_in))
                elif reduce_status == TaskStatus.WAITING.value and group["cancel_requested_at"] is None:
                    # A multi-routed task waiting for its parts, which are all done now.
                    return status, await self._resume_combine(conn, group)
                return status, None
            if group["cancel_requested_at"] is None and group["reduce"] is not None:
                return status, await self._create_reduce(conn, group)
            if group["cancel_requested_at"] is not None:
                status = "cancelled"
            else:
                failed = await conn.fetchval(
                    "SELECT count(*) FROM tasks WHERE group_id = $1 AND group_role = 'child'"
                    " AND status <> 'completed'",
                    group_id,
                )
                status = "failed" if failed else "completed"
            await conn.execute(_FINISH, group_id, status)
            return status, None

    async def _resume_combine(self, conn: Connection, group: Any) -> TaskRecord | None:
        routing = await conn.fetchval("SELECT routing FROM tasks WHERE id = $1", group["reduce_task_id"])
        jobs = {p["specialist"]: p["job"] for p in (routing or {}).get("parts", [])}
        children = await conn.fetch(
            "SELECT id, requested_specialist, status, result->'output' AS output, error FROM tasks"
            " WHERE group_id = $1 AND group_role = 'child' ORDER BY created_at, id",
            group["id"],
        )
        outcomes: list[dict[str, Any]] = []
        for child in children:
            specialist = child["requested_specialist"]
            outcome: dict[str, Any] = {
                "id": str(child["id"]),
                "specialist": specialist,
                "job": jobs.get(specialist),
                "status": child["status"],
            }
            if child["status"] == "completed":
                outcome["output"] = child["output"]
            else:
                outcome["error"] = child["error"]
            outcomes.append(outcome)
        instructions = f"{COMBINE_INSTRUCTIONS}\n\n{json.dumps({'parts': outcomes}, ensure_ascii=False)}"
        row = await conn.fetchrow(RESUME_COMBINE, group["reduce_task_id"], instructions)
        return to_record(row) if row is not None else None

    async def _create_reduce(self, conn: Connection, group: Any) -> TaskRecord:
        children = await conn.fetch(
            "SELECT id, status, result->'output' AS output, error FROM tasks"
            " WHERE group_id = $1 AND group_role = 'child' ORDER BY created_at, id",
            group["id"],
        )
        outcomes: list[dict[str, Any]] = []
        for child in children:
            outcome: dict[str, Any] = {"id": str(child["id"]), "status": child["status"]}
            if child["status"] == "completed":
                outcome["output"] = child["output"]
            else:
                outcome["error"] = child["error"]
            outcomes.append(outcome)
        spec = group["reduce"] or {}
        task = NewTask(
            id=uuid7(),
            tenant=group["tenant"],
            input={"children": outcomes},
            metadata=group["metadata"],
            requested_specialist=spec.get("specialist"),
            instructions=spec.get("instructions") or DEFAULT_REDUCE_INSTRUCTIONS,
            group_id=group["id"],
            group_role="reduce",
        )
        row = await conn.fetchrow(INSERT_TASK, *insert_args(task))
        if row is None:  # an INSERT ... RETURNING always returns its row
            raise RuntimeError(f"reduce task of group {group['id']} was not inserted")
        await conn.execute("UPDATE task_groups SET reduce_task_id = $2 WHERE id = $1", group["id"], task.id)
        return to_record(row)

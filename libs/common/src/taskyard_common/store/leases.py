"""Leases and the transitions around running a task: route, start, heartbeat, retry, hand-back, cancel,
reclaim.

A worker that starts a task takes a lease (owner + expiry) and extends it with a heartbeat while the task
runs. Every transition out of ``running`` is conditional on the lease owner, so a worker that lost its
lease (it stalled, the reaper reclaimed the task, another worker took over) can no longer record anything.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from taskyard_common.messages import TERMINAL_STATUSES, RoutingDecision, TaskStatus, Usage
from taskyard_common.store._pg import CLEAR_LEASE, COLUMNS, PoolStore, to_record
from taskyard_common.store.base import RoutedTask, StartOutcome, StartResult, TaskRecord
from taskyard_common.store.dead_letters import UPSERT_DEAD_LETTER

# The common start, one statement: a queued (or retrying) task, neither cancelled nor past its deadline,
# becomes running under ``owner``'s lease. Anything else (a duplicate, a lease held elsewhere, a cancel, an
# expired deadline, a dead worker's task taken over) takes the locked read in ``start``'s transaction.
_START_FAST = (
    "UPDATE tasks SET status = 'running', attempts = GREATEST(attempts, $3), lease_owner = $2,"
    " message_settled = false,"
    " lease_expires_at = clock_timestamp() + make_interval(secs => $4), next_attempt_at = NULL,"
    " started_at = clock_timestamp(), updated_at = clock_timestamp()"
    " WHERE id = $1 AND status IN ('queued', 'retrying') AND cancel_requested_at IS NULL"
    f" AND (deadline IS NULL OR deadline >= clock_timestamp()) RETURNING {COLUMNS}"
)
# The same for many tasks at once (the deliveries a worker got together), rows locked in id order and rows
# locked by anyone else skipped (they take ``start``'s own path): concurrent batches never deadlock.
_START_MANY = (
    "WITH ready AS (SELECT id FROM tasks WHERE id = ANY($1::uuid[]) AND status IN ('queued', 'retrying')"
    " AND cancel_requested_at IS NULL AND (deadline IS NULL OR deadline >= clock_timestamp())"
    " ORDER BY id FOR UPDATE SKIP LOCKED)"
    " UPDATE tasks AS t SET status = 'running', attempts = GREATEST(t.attempts, b.attempt), lease_owner = $3,"
    " message_settled = false,"
    " lease_expires_at = clock_timestamp() + make_interval(secs => $4), next_attempt_at = NULL,"
    " started_at = clock_timestamp(), updated_at = clock_timestamp()"
    " FROM ready JOIN unnest($1::uuid[], $2::int[]) AS b(id, attempt) ON b.id = ready.id"
    " WHERE t.id = ready.id RETURNING " + ", ".join(f"t.{c.strip()}" for c in COLUMNS.split(","))
)
# pending → queued with the decision, unless the deadline (the row's, else the message's: $4) has passed.
_ROUTE = (
    "UPDATE tasks SET status = 'queued', specialist = $2, routing = $3,"
    " routed_at = clock_timestamp(), updated_at = clock_timestamp()"
    " WHERE id = $1 AND status = 'pending'"
    " AND (COALESCE(deadline, $4::timestamptz) IS NULL OR COALESCE(deadline, $4::timestamptz) > clock_timestamp())"
    " RETURNING deadline, timeout_seconds"
)


class LeaseQueries(PoolStore):
    async def route(
        self, task_id: UUID, decision: RoutingDecision, deadline: datetime | None = None
    ) -> RoutedTask | None:
        row = await self._fetchrow(
            _ROUTE, task_id, decision.specialist, decision.model_dump(mode="json"), deadline
        )
        if row is None:
            return None
        return RoutedTask(deadline=row["deadline"], timeout_seconds=row["timeout_seconds"])

    async def start_many(
        self, attempts: dict[UUID, int], *, owner: str, lease_seconds: float
    ) -> dict[UUID, TaskRecord]:
        if not attempts:
            return {}
        rows = await self._fetch(_START_MANY, list(attempts), list(attempts.values()), owner, lease_seconds)
        return {row["id"]: to_record(row) for row in rows}

    async def start(self, task_id: UUID, *, owner: str, lease_seconds: float, attempt: int) -> StartResult:
        # One round trip for the usual case instead of four (BEGIN, SELECT ... FOR UPDATE, UPDATE, COMMIT).
        fast = await self._fetchrow(_START_FAST, task_id, owner, attempt, lease_seconds)
        if fast is not None:
            return StartResult(StartOutcome.STARTED, to_record(fast))
        async with self._transaction() as conn:
            row = await conn.fetchrow(
                "SELECT status, lease_owner, deadline, cancel_requested_at, clock_timestamp() AS now,"
                " extract(epoch FROM lease_expires_at - clock_timestamp()) AS remaining"
                " FROM tasks WHERE id = $1 FOR UPDATE",
                task_id,
            )
            if row is None:
                return StartResult(StartOutcome.UNKNOWN)
            status = TaskStatus(row["status"])
            if status in TERMINAL_STATUSES:
                return StartResult(StartOutcome.FINISHED)
            if status is TaskStatus.PENDING:
                return StartResult(StartOutcome.NOT_ROUTED)
            remaining = float(row["remaining"] or 0.0)
            if status is TaskStatus.RUNNING and row["lease_owner"] != owner and remaining > 0:
                return StartResult(StartOutcome.LEASED, lease_remaining_seconds=remaining)
            if row["cancel_requested_at"] is not None:
                await conn.execute(
                    f"UPDATE tasks SET status = 'cancelled', {CLEAR_LEASE}, finished_at = clock_timestamp(),"
                    " updated_at = clock_timestamp() WHERE id = $1",
                    task_id,
                )
                return StartResult(StartOutcome.CANCELLED)
            if (
                status is not TaskStatus.RUNNING
                and row["deadline"] is not None
                and row["deadline"] < row["now"]
            ):
                await conn.execute(
                    "UPDATE tasks SET status = 'failed', error = $2, finished_at = clock_timestamp(),"
                    " next_attempt_at = NULL, updated_at = clock_timestamp() WHERE id = $1",
                    task_id,
                    {"type": "expired", "message": "the task's deadline passed before it could start"},
                )
                return StartResult(StartOutcome.EXPIRED)
            started = await conn.fetchrow(
                "UPDATE tasks SET status = 'running', attempts = GREATEST(attempts, $3), lease_owner = $2,"
                " message_settled = false,"
                " lease_expires_at = clock_timestamp() + make_interval(secs => $4), next_attempt_at = NULL,"
                " started_at = clock_timestamp(), updated_at = clock_timestamp()"
                f" WHERE id = $1 RETURNING {COLUMNS}",
                task_id,
                owner,
                attempt,
                lease_seconds,
            )
            return StartResult(StartOutcome.STARTED, to_record(started))

    async def heartbeat(
        self, owner: str, task_ids: list[UUID], lease_seconds: float
    ) -> tuple[set[UUID], set[UUID]]:
        if not task_ids:
            return set(), set()
        rows = await self._fetch(
            "UPDATE tasks SET lease_expires_at = clock_timestamp() + make_interval(secs => $3)"
            " WHERE id = ANY($1::uuid[]) AND status = 'running' AND lease_owner = $2"
            " RETURNING id, cancel_requested_at IS NOT NULL AS cancel",
            task_ids,
            owner,
            lease_seconds,
        )
        return {r["id"] for r in rows}, {r["id"] for r in rows if r["cancel"]}

    async def mark_settled(self, task_id: UUID, owner: str) -> bool:
        row = await self._fetchrow(
            "UPDATE tasks SET message_settled = true, updated_at = clock_timestamp()"
            " WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id",
            task_id,
            owner,
        )
        return row is not None

    async def schedule_retry(
        self, task_id: UUID, owner: str, *, entry: dict[str, Any], next_attempt_at: datetime, usage: Usage
    ) -> bool:
        row = await self._fetchrow(
            f"UPDATE tasks SET status = 'retrying', {CLEAR_LEASE}, next_attempt_at = $3,"
            " attempt_log = attempt_log || jsonb_build_array($4::jsonb), usage = $5,"
            " updated_at = clock_timestamp()"
            " WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id",
            task_id,
            owner,
            next_attempt_at,
            entry,
            usage.model_dump(),
        )
        return row is not None

    async def release(self, task_id: UUID, owner: str) -> bool:
        row = await self._fetchrow(
            f"UPDATE tasks SET status = 'queued', {CLEAR_LEASE}, updated_at = clock_timestamp()"
            " WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id",
            task_id,
            owner,
        )
        return row is not None

    async def cancel_running(self, task_id: UUID, owner: str, usage: Usage) -> bool:
        row = await self._fetchrow(
            f"UPDATE tasks SET status = 'cancelled', {CLEAR_LEASE}, usage = $3,"
            " finished_at = clock_timestamp(), updated_at = clock_timestamp()"
            " WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id",
            task_id,
            owner,
            usage.model_dump(),
        )
        return row is not None

    async def request_cancel(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(
            "UPDATE tasks SET"
            " status = CASE WHEN status = 'running' THEN status ELSE 'cancelled' END,"
            " cancel_requested_at = COALESCE(cancel_requested_at, clock_timestamp()),"
            " finished_at = CASE WHEN status = 'running' THEN finished_at ELSE clock_timestamp() END,"
            " next_attempt_at = NULL, updated_at = clock_timestamp()"
            f" WHERE id = $1 AND status IN ('pending', 'queued', 'retrying', 'running') RETURNING {COLUMNS}",
            task_id,
        )
        if row is not None:
            return to_record(row)
        row = await self._fetchrow(f"SELECT {COLUMNS} FROM tasks WHERE id = $1", task_id)
        return to_record(row) if row else None

    async def expired_leases(self, limit: int) -> list[TaskRecord]:
        rows = await self._fetch(
            f"SELECT {COLUMNS} FROM tasks WHERE status = 'running' AND message_settled"
            " AND lease_expires_at < clock_timestamp() ORDER BY lease_expires_at LIMIT $1",
            limit,
        )
        return [to_record(r) for r in rows]

    async def reclaim(
        self, task_id: UUID, max_expirations: int, message: dict[str, Any] | None = None
    ) -> TaskStatus | None:
        async with self._transaction() as conn:
            row = await conn.fetchrow(
                "UPDATE tasks SET"
                " status = CASE WHEN lease_expirations + 1 > $2 THEN 'dead_lettered' ELSE 'queued' END,"
                " dead_letter = CASE WHEN lease_expirations + 1 > $2 THEN jsonb_build_object("
                "   'reason', 'delivery_limit', 'queue', 'lease', 'count', lease_expirations + 1,"
                "   'deaths', '[]'::jsonb, 'at', clock_timestamp()) ELSE dead_letter END,"
                " finished_at = CASE WHEN lease_expirations + 1 > $2 THEN clock_timestamp() ELSE NULL END,"
                # Requeued, its new work message is not published yet: ``stale_queued`` finds it if the
                # caller dies before its publish is confirmed and ``mark_published`` is called.
                " published_at = CASE WHEN lease_expirations + 1 > $2 THEN published_at ELSE NULL END,"
                f" lease_expirations = lease_expirations + 1, {CLEAR_LEASE}, updated_at = clock_timestamp()"
                " WHERE id = $1 AND status = 'running' AND message_settled AND lease_expires_at < clock_timestamp()"
                " RETURNING status, specialist",
                task_id,
                max_expirations,
            )
            if row is None:
                return None
            status = TaskStatus(row["status"])
            if status is TaskStatus.DEAD_LETTERED:
                # In the same transaction, so the dead-letter API lists every dead-lettered task.
                await conn.execute(
                    UPSERT_DEAD_LETTER,
                    task_id,
                    row["specialist"],
                    "delivery_limit",
                    "lease",
                    [],
                    message or {},
                )
            return status

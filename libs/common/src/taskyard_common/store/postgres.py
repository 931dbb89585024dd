"""PostgreSQL implementation of ``TaskStore`` on an asyncpg pool; one statement per transition.

The class is assembled from one mixin per concern (tasks, leases, dead letters) to keep modules small.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskyard_common.messages import RoutingDecision, TaskStatus, Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store._pg import (
    CLEAR_LEASE,
    COLUMNS,
    INSERT_TASK,
    INSERT_TASKS,
    NON_TERMINAL,
    UNAVAILABLE,
    PoolStore,
    StoreUnavailable,
    init_connection,
    insert_args,
    keep_session,
    to_record,
)
from taskyard_common.store.base import Cursor, NewTask, TaskRecord, WaitingAges
from taskyard_common.store.dead_letters import DeadLetterQueries
from taskyard_common.store.idempotency import IdempotencyQueries
from taskyard_common.store.leases import LeaseQueries

__all__ = ["PostgresTaskStore", "StoreUnavailable"]


class PostgresTaskStore(LeaseQueries, DeadLetterQueries, IdempotencyQueries, PoolStore):
    @classmethod
    async def open(cls, settings: DbSettings) -> PostgresTaskStore:
        try:
            pool = await asyncpg.create_pool(
                settings.url.get_secret_value(),
                min_size=settings.pool_min_size,
                max_size=settings.pool_max_size,
                command_timeout=settings.command_timeout_seconds,
                # Connecting, too, must not take asyncpg's default minute when the server does not answer.
                timeout=settings.command_timeout_seconds,
                server_settings={"search_path": settings.db_schema, "application_name": "taskyard"},
                init=init_connection,
                reset=keep_session,
            )
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
        return cls(pool, acquire_timeout=settings.command_timeout_seconds)

    async def ping(self) -> None:
        await self._fetchrow("SELECT 1")

    async def create(self, task: NewTask) -> TaskRecord:
        row = await self._fetchrow(INSERT_TASK, *insert_args(task))
        assert row is not None
        return to_record(row)

    async def create_many(self, tasks: Sequence[NewTask]) -> list[TaskRecord]:
        """``create`` for many tasks in one statement (the API coalesces concurrent submissions), committed
        together; the records in the order of ``tasks``."""
        rows = await self._fetch(
            INSERT_TASKS,
            [t.id for t in tasks],
            [json.dumps(t.input) for t in tasks],
            [json.dumps(t.metadata) for t in tasks],
            [t.requested_specialist for t in tasks],
            [t.deadline for t in tasks],
            [t.timeout_seconds for t in tasks],
            [t.tenant for t in tasks],
        )
        by_id = {row["id"]: to_record(row) for row in rows}
        return [by_id[t.id] for t in tasks]

    async def mark_published(self, task_id: UUID) -> None:
        await self._fetchrow(
            "UPDATE tasks SET published_at = clock_timestamp() WHERE id = $1 AND published_at IS NULL",
            task_id,
        )

    async def mark_published_many(self, task_ids: Sequence[UUID]) -> int:
        """``mark_published`` for many tasks in one statement (the API's write-behind); how many changed."""
        rows = await self._fetch(
            "UPDATE tasks SET published_at = clock_timestamp()"
            " WHERE id = ANY($1::uuid[]) AND published_at IS NULL RETURNING id",
            list(task_ids),
        )
        return len(rows)

    async def discard_unpublished(self, task_id: UUID) -> bool:
        row = await self._fetchrow(
            "DELETE FROM tasks WHERE id = $1 AND status = 'pending' AND published_at IS NULL RETURNING id",
            task_id,
        )
        return row is not None

    async def unpublished(self, older_than: datetime, limit: int) -> list[TaskRecord]:
        # updated_at, not created_at: a replayed task is old but its intake publish may be in flight.
        rows = await self._fetch(
            f"SELECT {COLUMNS} FROM tasks WHERE published_at IS NULL AND status = 'pending'"
            " AND updated_at < $1 ORDER BY created_at LIMIT $2",
            older_than,
            limit,
        )
        return [to_record(r) for r in rows]

    async def stale_queued(self, older_than: datetime, limit: int) -> list[TaskRecord]:
        rows = await self._fetch(
            f"SELECT {COLUMNS} FROM tasks WHERE published_at IS NULL AND status = 'queued'"
            " AND lease_owner IS NULL AND next_attempt_at IS NULL AND updated_at < $1"
            " ORDER BY updated_at LIMIT $2",
            older_than,
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
            " FROM tasks WHERE status IN ('pending', 'queued')"
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

    async def get(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(f"SELECT {COLUMNS} FROM tasks WHERE id = $1", task_id)
        return to_record(row) if row else None

    async def list(
        self,
        *,
        status: TaskStatus | None,
        specialist: str | None,
        limit: int,
        after: Cursor | None,
        tenant: str | None = None,
    ) -> list[TaskRecord]:
        clauses: list[str] = []
        args: list[Any] = []
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
            f"SELECT {COLUMNS} FROM tasks {where} ORDER BY created_at DESC, id DESC LIMIT ${len(args)}",
            *args,
        )
        return [to_record(r) for r in rows]

    async def record_routing(self, task_id: UUID, decision: RoutingDecision) -> bool:
        row = await self._fetchrow(
            "UPDATE tasks SET status = 'queued', specialist = $2, routing = $3,"
            " routed_at = clock_timestamp(), updated_at = clock_timestamp()"
            " WHERE id = $1 AND status = 'pending' RETURNING id",
            task_id,
            decision.specialist,
            decision.model_dump(mode="json"),
        )
        return row is not None

    async def complete(self, task_id: UUID, result: dict[str, Any], usage: Usage, owner: str) -> bool:
        row = await self._fetchrow(
            f"UPDATE tasks SET status = 'completed', result = $3, usage = $4, {CLEAR_LEASE},"
            " finished_at = clock_timestamp(), updated_at = clock_timestamp()"
            " WHERE id = $1 AND status = 'running' AND lease_owner = $2 RETURNING id",
            task_id,
            owner,
            result,
            usage.model_dump(),
        )
        return row is not None

    async def fail(
        self, task_id: UUID, error: dict[str, Any], usage: Usage, owner: str | None = None
    ) -> bool:
        # Without an owner (the broker agent), any non-terminal task can fail, e.g. one it cannot route.
        condition = "status = 'running' AND lease_owner = $4" if owner else f"status IN {NON_TERMINAL}"
        args: list[Any] = [task_id, error, usage.model_dump()]
        if owner:
            args.append(owner)
        row = await self._fetchrow(
            f"UPDATE tasks SET status = 'failed', error = $2, usage = $3, {CLEAR_LEASE},"
            " next_attempt_at = NULL, finished_at = clock_timestamp(), updated_at = clock_timestamp()"
            f" WHERE id = $1 AND {condition} RETURNING id",
            *args,
        )
        return row is not None

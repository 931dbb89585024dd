"""PostgreSQL implementation of ``TaskStore`` on an asyncpg pool; one statement per transition."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from uuid import UUID

import asyncpg

from taskyard_common.errors import TransientError
from taskyard_common.messages import RoutingDecision, TaskStatus, Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store.base import Cursor, NewTask, TaskRecord

_COLUMNS = (
    "id, status, input, metadata, requested_specialist, specialist, routing, attempts, result, error,"
    " usage, created_at, published_at, routed_at, started_at, finished_at, updated_at"
)

# Errors that mean "the database is (momentarily) unreachable", not "this request is wrong".
_UNAVAILABLE = (
    OSError,
    TimeoutError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.TooManyConnectionsError,
)


class StoreUnavailable(TransientError):
    """The database could not be reached; the operation may succeed later."""


async def _init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


def _record(row: asyncpg.Record) -> TaskRecord:
    data = dict(row)
    data["status"] = TaskStatus(data["status"])
    return TaskRecord.model_validate(data)


class PostgresTaskStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, settings: DbSettings) -> PostgresTaskStore:
        try:
            pool = await asyncpg.create_pool(
                settings.url.get_secret_value(),
                min_size=settings.pool_min_size,
                max_size=settings.pool_max_size,
                command_timeout=settings.command_timeout_seconds,
                server_settings={"search_path": settings.db_schema, "application_name": "taskyard"},
                init=_init_connection,
            )
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {type(exc).__name__}") from exc
        return cls(pool)

    async def close(self) -> None:
        await self._pool.close()

    async def _fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        try:
            return await self._pool.fetchrow(sql, *args)
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            return await self._pool.fetch(sql, *args)
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    async def ping(self) -> None:
        await self._fetchrow("SELECT 1")

    async def create(self, task: NewTask) -> TaskRecord:
        row = await self._fetchrow(
            f"INSERT INTO tasks (id, status, input, metadata, requested_specialist)"
            f" VALUES ($1, 'pending', $2, $3, $4) RETURNING {_COLUMNS}",
            task.id,
            task.input,
            task.metadata,
            task.requested_specialist,
        )
        assert row is not None
        return _record(row)

    async def mark_published(self, task_id: UUID) -> None:
        await self._fetchrow(
            "UPDATE tasks SET published_at = clock_timestamp() WHERE id = $1 AND published_at IS NULL",
            task_id,
        )

    async def discard_unpublished(self, task_id: UUID) -> bool:
        row = await self._fetchrow(
            "DELETE FROM tasks WHERE id = $1 AND status = 'pending' AND published_at IS NULL RETURNING id",
            task_id,
        )
        return row is not None

    async def unpublished(self, older_than: datetime, limit: int) -> list[TaskRecord]:
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM tasks WHERE published_at IS NULL AND status = 'pending'"
            " AND created_at < $1 ORDER BY created_at LIMIT $2",
            older_than,
            limit,
        )
        return [_record(r) for r in rows]

    async def get(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(f"SELECT {_COLUMNS} FROM tasks WHERE id = $1", task_id)
        return _record(row) if row else None

    async def list(
        self, *, status: TaskStatus | None, specialist: str | None, limit: int, after: Cursor | None
    ) -> list[TaskRecord]:
        clauses, args = [], []
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
            f"SELECT {_COLUMNS} FROM tasks {where} ORDER BY created_at DESC, id DESC LIMIT ${len(args)}",
            *args,
        )
        return [_record(r) for r in rows]

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

    async def start(self, task_id: UUID) -> TaskRecord | None:
        row = await self._fetchrow(
            "UPDATE tasks SET status = 'running', attempts = attempts + 1,"
            " started_at = clock_timestamp(), updated_at = clock_timestamp()"
            f" WHERE id = $1 AND status IN ('queued', 'running') RETURNING {_COLUMNS}",
            task_id,
        )
        return _record(row) if row else None

    async def complete(self, task_id: UUID, result: dict[str, Any], usage: Usage) -> bool:
        return await self._finish(task_id, "completed", "result", result, usage, "('running')")

    async def fail(self, task_id: UUID, error: dict[str, Any], usage: Usage) -> bool:
        # Any non-terminal task can fail: the broker agent fails tasks it cannot route before they run.
        return await self._finish(
            task_id, "failed", "error", error, usage, "('pending', 'queued', 'running')"
        )

    async def _finish(
        self, task_id: UUID, status: str, column: str, value: dict[str, Any], usage: Usage, from_statuses: str
    ) -> bool:
        row = await self._fetchrow(
            f"UPDATE tasks SET status = $2, {column} = $3, usage = $4,"
            " finished_at = clock_timestamp(), updated_at = clock_timestamp()"
            f" WHERE id = $1 AND status IN {from_statuses} RETURNING id",
            task_id,
            status,
            value,
            usage.model_dump(),
        )
        return row is not None

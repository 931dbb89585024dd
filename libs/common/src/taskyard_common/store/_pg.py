"""Shared plumbing of the PostgreSQL store: the pool, the column list, error mapping, row → record."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

import asyncpg

from taskyard_common.errors import StoreUnavailable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.metrics import TASK_EVENTS
from taskyard_common.store.records import NewTask, TaskRecord

# A pooled connection (what ``acquire`` hands out), as the queries use it; generic only in asyncpg's stubs.
if TYPE_CHECKING:
    Connection: TypeAlias = asyncpg.pool.PoolConnectionProxy[asyncpg.Record]
else:
    Connection = asyncpg.pool.PoolConnectionProxy

COLUMNS = (
    "id, status, tenant, input, metadata, requested_specialist, specialist, routing, attempts, result, error,"
    " usage, created_at, published_at, routed_at, started_at, finished_at, updated_at,"
    " next_attempt_at, lease_owner, lease_expires_at, lease_expirations, cancel_requested_at, deadline,"
    " timeout_seconds, attempt_log, dead_letter, checkpoint_bytes, event_seq, webhook, instructions,"
    " parent_id, chain_root_id, chain_index, chain_rest, group_id, group_role, delegation, depth,"
    " waiting_children, priority, not_before, parked_at"
)
_CREATED = ", ".join(f"c.{c.strip()}" for c in COLUMNS.split(","))
# A task is born pending (scheduled while its not_before is ahead) with its first event, ``accepted``
# (``{specialist}``, and its ``not_before`` when it has one); a task with chain steps to come is its chain's
# first (chain_root_id: itself, chain_index 0).
ACCEPTED_DATA = (
    "jsonb_build_object('specialist', c.requested_specialist)"
    " || CASE WHEN c.not_before IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('not_before', c.not_before) END"
)


def accepted(extra_data: str = "") -> str:
    """The CTE that logs the ``accepted`` event of the ``created`` rows, and the final SELECT; ``extra_data``
    (``|| jsonb_build_object(...)``) adds to its data."""
    return (
        " logged AS (INSERT INTO task_events (task_id, seq, type, data)"
        f" SELECT c.id, 1, 'accepted', {ACCEPTED_DATA}{extra_data} FROM created c)"
        f" SELECT {_CREATED} FROM created c"
    )


_ACCEPTED = accepted()


def insert_task(extra_data: str = "") -> str:
    """One task's INSERT with its ``accepted`` event (see ``accepted``); parameters as ``insert_args``:
    $1 id, $2 input, $3 metadata, $4 requested_specialist, $5 deadline, $6 timeout_seconds, $7 tenant,
    $8 webhook, $9 instructions, $10 chain_rest, $11 group_id, $12 group_role, $13 parent_id,
    $14 delegation, $15 depth, $16 priority, $17 not_before (``extra_data`` may use $18 on)."""
    return (
        "WITH created AS (INSERT INTO tasks (id, status, input, metadata, requested_specialist, deadline,"
        " timeout_seconds, tenant, webhook, instructions, chain_rest, chain_root_id, chain_index, group_id,"
        " group_role, parent_id, delegation, depth, priority, not_before, event_seq)"
        " VALUES ($1, CASE WHEN $17::timestamptz > clock_timestamp() THEN 'scheduled' ELSE 'pending' END,"
        " $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb,"
        " CASE WHEN $10::jsonb IS NOT NULL THEN $1::uuid END, CASE WHEN $10::jsonb IS NOT NULL THEN 0 END,"
        " $11, $12, $13, $14, $15, $16, $17, 1) RETURNING tasks.*)," + accepted(extra_data)
    )


INSERT_TASK = insert_task()

# The same for many submissions at once, one array per column (JSON as text, the jsonb codec's encoding).
INSERT_TASKS = (
    "WITH created AS (INSERT INTO tasks (id, status, input, metadata, requested_specialist, deadline,"
    " timeout_seconds, tenant, webhook, instructions, chain_rest, chain_root_id, chain_index, group_id,"
    " group_role, priority, not_before, event_seq)"
    " SELECT id, CASE WHEN not_before > clock_timestamp() THEN 'scheduled' ELSE 'pending' END,"
    " input::jsonb, metadata::jsonb, requested_specialist, deadline, timeout_seconds,"
    " tenant, webhook::jsonb, instructions, chain_rest::jsonb,"
    " CASE WHEN chain_rest IS NOT NULL THEN id END, CASE WHEN chain_rest IS NOT NULL THEN 0 END,"
    " group_id, group_role, priority, not_before, 1"
    " FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::float8[],"
    " $7::text[], $8::text[], $9::text[], $10::text[], $11::uuid[], $12::text[], $13::text[],"
    " $14::timestamptz[])"
    " AS t(id, input, metadata, requested_specialist, deadline, timeout_seconds, tenant, webhook,"
    " instructions, chain_rest, group_id, group_role, priority, not_before)"
    " RETURNING tasks.*)," + _ACCEPTED
)


def insert_args(task: NewTask) -> tuple[Any, ...]:
    return (
        task.id,
        task.input,
        task.metadata,
        task.requested_specialist,
        task.deadline,
        task.timeout_seconds,
        task.tenant,
        task.webhook,
        task.instructions,
        task.chain_rest,
        task.group_id,
        task.group_role,
        task.parent_id,
        task.delegation,
        task.depth,
        task.priority.value,
        task.not_before,
    )


def insert_arrays(tasks: Sequence[NewTask]) -> tuple[list[Any], ...]:
    """``INSERT_TASKS``'s arrays."""

    def js(value: Any) -> str | None:
        return json.dumps(value) if value is not None else None

    return (
        [t.id for t in tasks],
        [json.dumps(t.input) for t in tasks],
        [json.dumps(t.metadata) for t in tasks],
        [t.requested_specialist for t in tasks],
        [t.deadline for t in tasks],
        [t.timeout_seconds for t in tasks],
        [t.tenant for t in tasks],
        [js(t.webhook) for t in tasks],
        [t.instructions for t in tasks],
        [js(t.chain_rest) for t in tasks],
        [t.group_id for t in tasks],
        [t.group_role for t in tasks],
        [t.priority.value for t in tasks],
        [t.not_before for t in tasks],
    )


def add_usage(param: str) -> str:
    """``usage = <this>``: the task's token usage plus the ``Usage`` JSON in ``param``. Outcomes add what the
    attempt used beyond its checkpointed steps (those add their own usage when recorded), so every LLM call
    counts once however often the task is interrupted. The cost (USD) adds up the same way; the model is
    the one named last."""
    fields = ("prompt_tokens", "completion_tokens", "total_tokens")
    parts = [
        f"'{f}', COALESCE((usage->>'{f}')::bigint, 0) + COALESCE(({param}::jsonb->>'{f}')::bigint, 0)"
        for f in fields
    ]
    parts.append(
        f"'cost', COALESCE((usage->>'cost')::float8, 0) + COALESCE(({param}::jsonb->>'cost')::float8, 0)"
    )
    parts.append(f"'model', COALESCE({param}::jsonb->>'model', usage->>'model')")
    return f"jsonb_build_object({', '.join(parts)})"


# Dropping a lease: shared by every transition out of running.
CLEAR_LEASE = "lease_owner = NULL, lease_expires_at = NULL"

# asyncpg's errors that mean "the database is (momentarily) unreachable", not "this request is wrong":
# - broken or refused connections (class 08, ``InterfaceError``: "connection is closed");
# - PostgreSQL ending the session itself (class 57: ``pg_ctl stop -m fast``, a crash, ``pg_terminate_backend``,
#   the server starting or shutting down, a statement or idle-session timeout);
# - ``InternalClientError``: asyncpg's "cannot switch to state N; another operation is in progress", which is
#   what a query on a pooled connection raises when the server closed that connection after it was handed
#   out (a restart): the class that escaped as a 500 in docs/resilience.md, row 4;
# - too many connections (53300).
DRIVER_UNAVAILABLE: tuple[type[Exception], ...] = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.InterfaceError,
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.TooManyConnectionsError,
)
# The same plus the socket's own errors: what every query helper turns into ``StoreUnavailable``.
UNAVAILABLE: tuple[type[Exception], ...] = (OSError, TimeoutError, *DRIVER_UNAVAILABLE)


async def init_connection(conn: asyncpg.Connection) -> None:
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset on release, instead of asyncpg's default query (``pg_advisory_unlock_all(); CLOSE
    ALL; UNLISTEN *; RESET ALL``), which doubled the round trips of each one-statement use of a connection
    to undo what taskyard never does on pooled connections (no advisory locks, cursors
    outside a transaction, LISTEN or SET; migrations take their own connection). An open transaction is
    still rolled back by asyncpg before this runs."""


def to_record(row: asyncpg.Record) -> TaskRecord:
    data = dict(row)
    data["status"] = TaskStatus(data["status"])
    return TaskRecord.model_validate(data)


class PoolStore:
    """Query helpers that turn connection trouble into ``StoreUnavailable``.

    ``acquire_timeout`` bounds taking a connection (connecting included) and handing it back. Without it, a
    database that stops answering without closing the connection (a partition, a frozen host) hangs every
    caller: a timed-out query leaves its connection waiting for the server to confirm the cancellation.
    """

    def __init__(self, pool: asyncpg.Pool, *, acquire_timeout: float | None = None) -> None:
        self._pool = pool
        self._acquire_timeout = acquire_timeout
        # Told the id of every task a transition changed (its event log grew): a service points it at the
        # events exchange, so that whoever watches the task wakes up.
        self.on_change: Callable[[UUID], None] | None = None

    def _changed(self, task_id: UUID, events: int = 1, *, watched: bool | None = True) -> None:
        """``events`` were appended to ``task_id``'s log (and committed); ``watched``: whether someone
        watches the task (``watched_until``), the only case ``on_change`` is told (None: unknown, told)."""
        TASK_EVENTS.inc(events)
        if self.on_change is not None and watched is not False:
            self.on_change(task_id)

    @property
    def pool(self) -> asyncpg.Pool:
        """For the other stores of the same database (API keys, rate limits) to share the connections."""
        return self._pool

    async def close(self) -> None:
        await self._pool.close()

    # Taking and handing back a connection, each bounded by ``acquire_timeout`` with ``asyncio.timeout``
    # rather than ``pool.acquire(timeout=...)``: asyncpg implements that one with ``wait_for``, which on
    # Python 3.11 runs the acquisition as a task of its own (see docs/benchmarks.md, submit path). A release
    # cut short terminates the connection (asyncpg does so when cancelled).

    async def _acquire(self) -> Connection:
        async with asyncio.timeout(self._acquire_timeout):
            return await self._pool.acquire()

    async def _release(self, conn: Connection) -> None:
        async with asyncio.timeout(self._acquire_timeout):
            await self._pool.release(conn)

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Connection]:
        conn = await self._acquire()
        try:
            yield conn
        finally:
            await self._release(conn)

    async def _fetchrow(self, sql: str, *args: Any) -> asyncpg.Record | None:
        try:
            conn = await self._acquire()
            try:
                return await conn.fetchrow(sql, *args)
            finally:
                await self._release(conn)
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        try:
            conn = await self._acquire()
            try:
                return await conn.fetch(sql, *args)
            finally:
                await self._release(conn)
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Connection]:
        try:
            async with self._connection() as conn, conn.transaction():
                yield conn
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"database unavailable: {type(exc).__name__}") from exc

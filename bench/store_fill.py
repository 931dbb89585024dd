"""Filling a scenario's schema with millions of finished tasks in bulk, in SQL (``generate_series``).

Row by row through the API would take hours; here the rows are generated inside PostgreSQL. The secondary
indexes of ``tasks`` and the keys of ``task_events`` are dropped first and built again afterwards (a bulk
build sorts once, instead of millions of random inserts), then the tables are analysed. ``tasks``' primary
key stays: every other table's foreign key needs it.

The rows look like a store that ran for ``days``: created evenly over that span, each finished two seconds
after it was created (95 % completed with a result, 5 % failed with an error), spread over 50 tenants,
with two events each (``accepted`` and the terminal one) and an idempotency key for one in ten. Ids are
UUIDv7 of each row's ``created_at`` (as the services make them), generated oldest first.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass

import asyncpg

from bench.infra import service_urls
from taskyard_common.ids import uuid7_sql
from taskyard_common.store.migrate import migrate

TENANTS = 50
# The generated rows, not the tasks the scenario submitted before the fill.
_GENERATED = "metadata->>'source' = 'bulk'"


@dataclass(frozen=True)
class Filled:
    tasks: int
    seconds: float
    # pg_total_relation_size per table, in bytes.
    sizes: dict[str, int]


def _fill_tasks(schema: str) -> str:
    return f"""
    INSERT INTO "{schema}".tasks (id, status, input, metadata, requested_specialist, specialist, routing,
        attempts, result, error, created_at, published_at, routed_at, started_at, finished_at, updated_at,
        tenant, event_seq)
    SELECT {uuid7_sql("ts")},
        CASE WHEN g % 20 = 0 THEN 'failed' ELSE 'completed' END,
        to_jsonb('Summarise the quarterly report number ' || g || ' for the board in three sentences.'),
        jsonb_build_object('source', 'bulk', 'batch', (g % 1000)::text),
        'noop', 'noop',
        '{{"method": "explicit", "specialist": "noop", "reason": "bulk", "confidence": 1.0}}'::jsonb,
        1,
        CASE WHEN g % 20 = 0 THEN NULL ELSE jsonb_build_object('output',
            'The report ' || g || ' shows revenue up, costs flat and a hiring freeze until the next review.')
        END,
        CASE WHEN g % 20 = 0 THEN '{{"type": "agent_error", "message": "the tool failed"}}'::jsonb END,
        ts, ts, ts, ts, ts + interval '2 seconds', ts + interval '2 seconds',
        CASE WHEN g % {TENANTS} = 0 THEN 'default' ELSE 'tenant-' || (g % {TENANTS}) END,
        2
    FROM (SELECT g, clock_timestamp() - interval '1 hour' - ($2::float8 * ($1 - g) / $1) * interval '1 day' AS ts
          FROM generate_series(1, $1::bigint) AS g) AS s
    """


async def _secondary_indexes(conn: asyncpg.Connection, schema: str) -> list[tuple[str, str]]:
    rows = await conn.fetch(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i"
        " WHERE i.schemaname = $1 AND i.tablename = 'tasks' AND i.indexname <> 'tasks_pkey'",
        schema,
    )
    return [(r["indexname"], r["indexdef"]) for r in rows]


async def _event_constraints(conn: asyncpg.Connection, schema: str) -> list[tuple[str, str]]:
    rows = await conn.fetch(
        "SELECT conname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c"
        " JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace"
        " WHERE n.nspname = $1 AND t.relname = 'task_events' AND c.contype IN ('p', 'f')"
        " ORDER BY c.contype DESC",  # the primary key ('p') before the foreign key ('f')
        schema,
    )
    return [(r["conname"], r["def"]) for r in rows]


async def fill(db_url: str, schema: str, tasks: int, *, days: float = 40.0) -> Filled:
    """Add ``tasks`` finished tasks (and their events and keys) to ``schema``, created over ``days``."""
    started = time.monotonic()
    conn = await asyncpg.connect(db_url, command_timeout=None)
    try:
        # Session settings only: a bulk load's sorts and index builds in memory, no wait for each commit.
        await conn.execute("SET maintenance_work_mem = '512MB'; SET synchronous_commit = off")
        indexes = await _secondary_indexes(conn, schema)
        constraints = await _event_constraints(conn, schema)
        for name, _ in indexes:
            await conn.execute(f'DROP INDEX "{schema}"."{name}"')
        for name, _ in constraints:
            await conn.execute(f'ALTER TABLE "{schema}".task_events DROP CONSTRAINT "{name}"')
        await conn.execute(_fill_tasks(schema), tasks, days)
        await conn.execute(
            f'INSERT INTO "{schema}".task_events (task_id, seq, type, data, created_at)'
            f" SELECT id, 1, 'accepted', '{{\"specialist\": \"noop\"}}'::jsonb, created_at"
            f' FROM "{schema}".tasks WHERE {_GENERATED}'
            f" UNION ALL SELECT id, 2, status, jsonb_build_object('status', status), finished_at"
            f' FROM "{schema}".tasks WHERE {_GENERATED}'
        )
        await conn.execute(
            f'INSERT INTO "{schema}".idempotency_keys (tenant, key, request_hash, task_id, created_at)'
            f" SELECT tenant, 'bulk-' || id, 'h', id, created_at FROM \"{schema}\".tasks"
            f" WHERE {_GENERATED} AND get_byte(uuid_send(id), 15) < 26"  # about one in ten (a random byte)
        )
        for _, definition in indexes:
            await conn.execute(definition)
        for name, definition in constraints:
            await conn.execute(f'ALTER TABLE "{schema}".task_events ADD CONSTRAINT "{name}" {definition}')
        for table in ("tasks", "task_events", "idempotency_keys"):
            await conn.execute(f'VACUUM (ANALYZE) "{schema}".{table}')
        sizes = {
            table: await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", f'"{schema}".{table}')
            for table in ("tasks", "task_events", "idempotency_keys")
        }
    finally:
        await conn.close()
    return Filled(tasks, time.monotonic() - started, sizes)


async def fill_schema(db_url: str, schema: str, tasks: int) -> Filled:
    """Migrate ``schema`` (made if missing) and fill it: a store a later run reuses (``--reuse-store``)."""
    conn = await asyncpg.connect(db_url)
    try:
        await migrate(conn, schema)
    finally:
        await conn.close()
    return await fill(db_url, schema, tasks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store_fill",
        description="Fill a schema of its own with finished tasks, for `--only large_store --reuse-store`.",
    )
    parser.add_argument("--schema", required=True, help="the schema to make (or add to); kept afterwards")
    parser.add_argument("--tasks", type=int, default=10_000_000)
    args = parser.parse_args(argv)
    _, db_url = service_urls()
    filled = asyncio.run(fill_schema(db_url, args.schema, args.tasks))
    sizes = ", ".join(f"{t} {size / 2**30:.2f} GiB" for t, size in filled.sizes.items())
    print(f"schema {args.schema}: {filled.tasks:,} tasks added in {filled.seconds:,.0f} s ({sizes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

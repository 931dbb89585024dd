"""Scenario: the task store's layout, plain tables vs tables range-partitioned by task id (one partition a
day), on the same rows: the figures behind the layout decision in docs/architecture.md.

1. A migrated scratch schema is filled in bulk (``bench.store_fill``: N finished tasks over ``DAYS`` days,
   UUIDv7 ids, two events each); a second schema gets a partitioned copy of its ``tasks`` and
   ``task_events`` (``bench.partitioned``: same columns, checks, indexes, foreign key).
2. On each layout, warm cache, one connection: lookups of random tasks by id (the task document's read);
   the first page of a tenant's list, and a page from a cursor at a random time (the list route's keyset
   query, 50 rows); then inserts of new tasks with their first event (4 connections, one transaction
   each), plain also with uuid4 ids (the ids before UUIDv7).
3. Retention of the oldest day and a bit (the part day the fill starts in, and the next whole day): plain
   by today's code path (``RetentionStore.expire_batch``, batches of 500: the tasks, their events and
   idempotency keys, one transaction a batch); partitioned by detaching and dropping those days'
   partitions (tasks and events; the keys would need a layout of their own).

Both schemas are dropped afterwards.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta

import asyncpg

from bench.infra import Context, db_schema
from bench.partitioned import copy_partitioned
from bench.report import Row
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import percentile
from bench.store_fill import TENANTS, fill
from taskyard_common.ids import uuid7
from taskyard_common.store.retention import RetentionStore

DAYS = 20
PAGE = 50
INSERT_CONNECTIONS = 4
LAYOUTS = ("plain", "partitioned")

_BY_ID = "SELECT * FROM tasks WHERE id = $1"
_FIRST_PAGE = f"SELECT * FROM tasks WHERE tenant = $1 ORDER BY created_at DESC, id DESC LIMIT {PAGE}"
_PAGE_FROM = (
    "SELECT * FROM tasks WHERE tenant = $1 AND (created_at, id) < ($2, $3)"
    f" ORDER BY created_at DESC, id DESC LIMIT {PAGE}"
)
_INSERT = (
    "INSERT INTO tasks (id, status, input, metadata, requested_specialist, tenant, event_seq)"
    " VALUES ($1, 'pending', $2::jsonb, '{}'::jsonb, 'noop', $3, 1)"
)
_EVENT = "INSERT INTO task_events (task_id, seq, type, data) VALUES ($1, 1, 'accepted', '{}'::jsonb)"


def _latencies(row: Row, seconds: list[float], wall: float) -> None:
    row.done, row.wall_s = len(seconds), wall
    row.p50_ms = (percentile(seconds, 50) or 0) * 1000
    row.p99_ms = (percentile(seconds, 99) or 0) * 1000
    finish(row)


async def _timed(
    row: Row, conn: asyncpg.Connection, sql: str, calls: Sequence[tuple[object, ...]], limit: float
) -> None:
    """Run ``sql`` once per argument tuple, one after another (after an unmeasured pass over the first
    tenth: a warm cache and a prepared statement)."""
    for args in calls[: max(1, len(calls) // 10)]:
        await conn.fetch(sql, *args)
    seconds: list[float] = []
    async with bounded(row, limit):
        started = time.perf_counter()
        for args in calls:
            t0 = time.perf_counter()
            await conn.fetch(sql, *args)
            seconds.append(time.perf_counter() - t0)
        _latencies(row, seconds, time.perf_counter() - started)


async def _connect(ctx: Context, schema: str) -> asyncpg.Connection:
    return await asyncpg.connect(ctx.db_url, server_settings={"search_path": schema})


async def _reads(ctx: Context, rows: Rows, schemas: dict[str, str], count: int) -> None:
    conn = await _connect(ctx, schemas["plain"])
    try:
        ids = [
            r["id"] for r in await conn.fetch("SELECT id FROM tasks TABLESAMPLE SYSTEM (2) LIMIT $1", count)
        ]
        if len(ids) < count:
            # A 2 % sample of pages (no sort of millions of rows) can come up short on a small table (the
            # smoke run's few pages): sorting that one is cheap.
            ids = [
                r["id"] for r in await conn.fetch("SELECT id FROM tasks ORDER BY random() LIMIT $1", count)
            ]
        first, last = await conn.fetchrow("SELECT min(created_at), max(created_at) FROM tasks")
    finally:
        await conn.close()
    rng = random.Random(19)
    rng.shuffle(ids)
    tenants = [f"tenant-{rng.randrange(1, TENANTS)}" for _ in range(count)]
    span = (last - first).total_seconds()
    cursors = [(first + timedelta(seconds=rng.uniform(0, span)), uuid.UUID(int=0)) for _ in range(count)]
    for layout in LAYOUTS:
        conn = await _connect(ctx, schemas[layout])
        try:
            limit = ctx.pick(120, 60, 20)
            row = rows.add(f"layout.{layout}.by_id", "layout", f"{layout}: task by id, {count} random", count)
            await _timed(row, conn, _BY_ID, [(i,) for i in ids], limit)
            row = rows.add(
                f"layout.{layout}.first_page", "layout", f"{layout}: tenant's first page of {PAGE}", count
            )
            await _timed(row, conn, _FIRST_PAGE, [(t,) for t in tenants], limit)
            row = rows.add(
                f"layout.{layout}.page_from", "layout", f"{layout}: page of {PAGE} from a cursor", count
            )
            calls = [(t, at, after) for t, (at, after) in zip(tenants, cursors, strict=True)]
            await _timed(row, conn, _PAGE_FROM, calls, limit)
        finally:
            await conn.close()


async def _inserts(ctx: Context, row: Row, schema: str, count: int, new_id: Callable[[], uuid.UUID]) -> None:
    body = json.dumps("Summarise the quarterly report for the board in three sentences.")
    seconds: list[float] = []

    async def one_connection(n: int) -> None:
        conn = await _connect(ctx, schema)
        try:
            for _ in range(n):
                t0 = time.perf_counter()
                task_id = new_id()
                async with conn.transaction():
                    await conn.execute(_INSERT, task_id, body, "tenant-1")
                    await conn.execute(_EVENT, task_id)
                seconds.append(time.perf_counter() - t0)
        finally:
            await conn.close()

    async with bounded(row, ctx.pick(180, 60, 20)):
        started = time.perf_counter()
        await asyncio.gather(
            *(one_connection(count // INSERT_CONNECTIONS) for _ in range(INSERT_CONNECTIONS))
        )
        _latencies(row, seconds, time.perf_counter() - started)


async def _retention(
    ctx: Context, rows: Rows, schemas: dict[str, str], days: list[tuple[str, str, str]]
) -> None:
    conn = await _connect(ctx, schemas["plain"])
    try:
        first = await conn.fetchval("SELECT min(created_at) FROM tasks")
        # The end of the first whole day (the fill starts part way through a day): a day's worth at least.
        cutoff = first.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=2)
        # Retention takes a task finished before the cutoff; a partition holds every task created before it.
        due, created = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE finished_at < $1), count(*) FROM tasks WHERE created_at < $1",
            cutoff,
        )
    finally:
        await conn.close()
    label = "the oldest 1-2 days"
    row = rows.add("layout.plain.retention", "layout", f"plain: retention of {label}, batched DELETE", due)
    pool = await asyncpg.create_pool(
        ctx.db_url, min_size=1, max_size=2, server_settings={"search_path": schemas["plain"]}
    )
    try:
        store = RetentionStore(pool)
        async with bounded(row, ctx.pick(900, 300, 30)):
            started = time.perf_counter()
            while (removed := await store.expire_batch(cutoff, 500)).tasks:
                row.done += removed.tasks
                row.wall_s = time.perf_counter() - started
            finish(row)
    finally:
        await pool.close()
    gone = [suffix for suffix, _, _ in days if suffix < cutoff.strftime("%Y%m%d")]
    row = rows.add("layout.partitioned.retention", "layout", f"partitioned: {label}, DETACH + DROP", created)
    conn = await _connect(ctx, schemas["partitioned"])
    try:
        async with bounded(row, ctx.pick(300, 120, 30)):
            started = time.perf_counter()
            for suffix in gone:
                for table in ("task_events", "tasks"):  # the referencing table's partition first
                    await conn.execute(f"ALTER TABLE {table} DETACH PARTITION {table}_{suffix}")
                    await conn.execute(f"DROP TABLE {table}_{suffix}")
            row.done, row.wall_s = created, time.perf_counter() - started
            row.note = f"{len(gone)} partitions of each table"
            finish(row)
    finally:
        await conn.close()


async def run(ctx: Context, rows: Rows) -> None:
    stored = ctx.pick(2_000_000, 200_000, 4_000)
    count = ctx.pick(2_000, 300, 30)
    async with db_schema(ctx, "layout_plain") as plain, db_schema(ctx, "layout_part", migrated=False) as part:
        schemas = {"plain": plain, "partitioned": part}
        row = rows.add(
            "layout.fill", "layout", f"bulk fill of {stored:,} tasks over {DAYS} days, then the copy", stored
        )
        async with bounded(row, ctx.pick(1800, 600, 60)):
            filled = await fill(ctx.db_url, plain, stored, days=DAYS)
            conn = await asyncpg.connect(ctx.db_url, command_timeout=None)
            try:
                days = await copy_partitioned(conn, plain, part)
            finally:
                await conn.close()
            row.done, row.wall_s = filled.tasks, filled.seconds
            row.note = f"{len(days)} day partitions + default; fill {filled.seconds:,.0f} s"
            finish(row)
        await _reads(ctx, rows, schemas, count)
        inserts = ctx.pick(4_000, 800, 40)
        for layout, new_id in (("plain", uuid7), ("partitioned", uuid7), ("plain_uuid4", uuid.uuid4)):
            schema = schemas["plain" if layout == "plain_uuid4" else layout]
            row = rows.add(
                f"layout.{layout}.insert",
                "layout",
                f"{layout}: insert task + event, {INSERT_CONNECTIONS} connections",
                inserts,
            )
            await _inserts(ctx, row, schema, inserts, new_id)
        await _retention(ctx, rows, schemas, days)


SCENARIO = Scenario(
    "store_layout",
    run,
    timeout_s=2400,
    quick_timeout_s=900,
    smoke_timeout_s=60,
    describe="plain vs partitioned-by-id tasks: lookups, list pages, inserts, retention of a day",
)

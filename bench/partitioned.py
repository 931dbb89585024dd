"""A partitioned copy of a filled store's ``tasks`` and ``task_events``, for the layout comparison
(``bench.scenarios.store_layout``).

The layout compared: both tables range-partitioned by task id, one partition a day. With UUIDv7 ids the id
is the creation time, so a day is the id range [``uuid7_floor(midnight)``, ``uuid7_floor(next midnight)``)
and the primary key stays ``(id)`` (a partitioned table's unique keys must hold the partition key): the
foreign key from ``task_events`` keeps working, and a lookup by id reads one partition. Partitioning by
``created_at`` instead would make the key ``(id, created_at)`` and break every foreign key to ``tasks(id)``.

Same columns, checks, defaults and indexes as the original (the indexes other than the key become one per
partition); a default partition takes ids outside every day (the uuid4 ids of a store older than UUIDv7).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from taskyard_common.ids import uuid7_floor

TABLES = (("tasks", "id"), ("task_events", "task_id"))


def day_bounds(first: datetime, last: datetime) -> list[tuple[str, str, str]]:
    """(suffix, lower id, upper id) of one partition per UTC day from ``first``'s to ``last``'s."""
    day = datetime(first.year, first.month, first.day, tzinfo=UTC)
    bounds = []
    while day <= last:
        upper = day + timedelta(days=1)
        lo, hi = (uuid7_floor(int(d.timestamp() * 1000)) for d in (day, upper))
        bounds.append((day.strftime("%Y%m%d"), str(lo), str(hi)))
        day = upper
    return bounds


def partition_ddl(
    source: str, target: str, table: str, key: str, bounds: list[tuple[str, str, str]]
) -> list[str]:
    """The statements that make ``target.table``, partitioned by ``key``, like ``source.table``."""
    statements = [
        f'CREATE TABLE "{target}".{table} (LIKE "{source}".{table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)'
        f" PARTITION BY RANGE ({key})"
    ]
    for suffix, lo, hi in bounds:
        statements.append(
            f'CREATE TABLE "{target}".{table}_{suffix} PARTITION OF "{target}".{table}'
            f" FOR VALUES FROM ('{lo}') TO ('{hi}')"
        )
    statements.append(f'CREATE TABLE "{target}".{table}_legacy PARTITION OF "{target}".{table} DEFAULT')
    return statements


async def _indexes(conn: asyncpg.Connection, source: str, target: str, table: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = $2 ORDER BY indexname",
        source,
        table,
    )
    return [r["indexdef"].replace(f"ON {source}.{table} ", f'ON "{target}".{table} ') for r in rows]


async def copy_partitioned(conn: asyncpg.Connection, source: str, target: str) -> list[tuple[str, str, str]]:
    """Make the partitioned copy of ``source``'s tasks and events in ``target`` (an empty schema); returns
    the day partitions made. Rows first, then indexes and the foreign key (a bulk build per partition)."""
    first, last = await conn.fetchrow(f'SELECT min(created_at), max(created_at) FROM "{source}".tasks')
    now = datetime.now(UTC)
    bounds = day_bounds(first or now, max(last or now, now) + timedelta(days=1))
    for table, key in TABLES:
        for statement in partition_ddl(source, target, table, key, bounds):
            await conn.execute(statement)
        await conn.execute(f'INSERT INTO "{target}".{table} SELECT * FROM "{source}".{table}')
    for table, _ in TABLES:
        for definition in await _indexes(conn, source, target, table):
            if "UNIQUE INDEX" in definition and definition.split()[3].endswith("_pkey"):
                columns = definition[definition.index("(") :]
                await conn.execute(f'ALTER TABLE "{target}".{table} ADD PRIMARY KEY {columns}')
            else:
                await conn.execute(definition)
    await conn.execute(
        f'ALTER TABLE "{target}".task_events ADD FOREIGN KEY (task_id) REFERENCES "{target}".tasks (id)'
        " ON DELETE CASCADE"
    )
    for table, _ in TABLES:
        await conn.execute(f'ANALYZE "{target}".{table}')
    return bounds

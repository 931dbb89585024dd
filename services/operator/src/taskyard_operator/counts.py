"""A Specialist's running tasks and unhandled dead letters, read from the task store (read-only)."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from taskyard_operator.reconcile import SCHEMA


@dataclass(frozen=True)
class StoreCounts:
    running: int
    dead_letters: int


async def store_counts(pool: asyncpg.Pool, schema: str, specialist: str) -> StoreCounts:
    """Running tasks (the partial index tasks_active_specialist_idx answers it) and dead letters not yet
    replayed or discarded."""
    if not SCHEMA.match(schema):  # it goes into the statement: reconcile checked it, check again here
        raise ValueError(f"not a schema name: {schema!r}")
    row = await pool.fetchrow(
        f"SELECT (SELECT count(*) FROM \"{schema}\".tasks WHERE specialist = $1 AND status = 'running') AS running, "
        f'(SELECT count(*) FROM "{schema}".dead_letters WHERE specialist = $1 AND discarded_at IS NULL) AS dead',
        specialist,
    )
    assert row is not None
    return StoreCounts(running=int(row["running"]), dead_letters=int(row["dead"]))


async def unfinished_tasks(pool: asyncpg.Pool, schema: str, specialist: str) -> int:
    """Queued, running and retrying tasks (what the KEDA trigger counts; the same partial index)."""
    if not SCHEMA.match(schema):
        raise ValueError(f"not a schema name: {schema!r}")
    value = await pool.fetchval(
        f'SELECT count(*) FROM "{schema}".tasks WHERE specialist = $1 '
        "AND status IN ('queued', 'running', 'retrying')",
        specialist,
    )
    return int(value or 0)

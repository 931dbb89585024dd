"""Scenario 6's comparison of the empty and the full store, in paired windows.

Measuring the empty store for ten seconds and the full one for the next ten, a round or two each, showed the
machine more than the store: on this shared 2-CPU box single windows of the same store spread from 0.76x to
1.39x of each other, several times the 10 % the targets allow. So both stores' services run side by side
for the whole comparison (idle services cost next to nothing) and the load alternates between them in short
windows, in ABBA order (empty-full, full-empty, ...), so that a slow drift of the machine's load falls on
both sides alike. Each side's figure pools all its windows: the p99 of every submission's latency, and the
throughput of all its end-to-end runs together. Every window is a row of its own, so the spread stays in
view; after a window, the next one waits until the store it loaded has finished that window's tasks, so
that no window pays for the one before.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import asyncpg

from bench.http_load import LoadResult, LoadSpec
from bench.report import Row
from bench.runner import Rows, finish
from bench.stats import percentile
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.process import Service

GROUP = "6 large store"
PHASES = ("empty", "full")


@dataclass
class Side:
    """One store's services, and what its windows measured."""

    phase: str  # "empty" or "full"
    label: str  # how the rows name the store
    running: Cluster
    api: Service
    schema: str
    latencies_s: list[float] = field(default_factory=list)
    e2e_done: int = 0
    e2e_wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def abba(pairs: int) -> list[tuple[int, str]]:
    """The windows' order: pair n's two phases, empty first in odd pairs and full first in even ones."""
    order: list[tuple[int, str]] = []
    for n in range(1, pairs + 1):
        phases = PHASES if n % 2 else tuple(reversed(PHASES))
        order.extend((n, phase) for phase in phases)
    return order


def pooled_p99_ms(latencies_s: Sequence[float]) -> float | None:
    value = percentile(latencies_s, 99)
    return None if value is None else value * 1000


async def drained(conn: asyncpg.Connection, schema: str, since: datetime, limit_s: float) -> None:
    """Wait until the store has no unfinished task created since ``since`` (read through the ``created_at``
    index), at most ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        left = await conn.fetchval(
            f'SELECT count(*) FROM "{schema}".tasks WHERE created_at >= $1 AND finished_at IS NULL', since
        )
        if not left:
            return
        await asyncio.sleep(0.5)


Measure = Callable[[Row, LoadSpec, Service], Awaitable[LoadResult | None]]


async def submit_windows(
    rows: Rows,
    sides: dict[str, Side],
    conn: asyncpg.Connection,
    spec_for: Callable[[Cluster], LoadSpec],
    measure: Measure,
    pairs: int,
    clients: int,
) -> None:
    """The submit path, one window per side and pair in ABBA order; then each side's pooled row
    (``large.<phase>.submit``, the one the targets read)."""
    for n, phase in abba(pairs):
        side = sides[phase]
        since = await conn.fetchval("SELECT clock_timestamp() - interval '1 second'")
        row = rows.add(
            f"large.{phase}.submit.w{n}", GROUP, f"submit, {clients} clients, {side.label} (window {n})", 0
        )
        result = await measure(row, spec_for(side.running), side.api)
        if result is not None:
            side.latencies_s.extend(result.latencies_s)
        await drained(conn, side.schema, since, 120.0)
    for phase in PHASES:
        side = sides[phase]
        row = rows.add(
            f"large.{phase}.submit",
            GROUP,
            f"submit, {clients} clients, {side.label}: {pairs} windows pooled",
            0,
        )
        row.done = row.total = len(side.latencies_s)
        windows = [r for r in rows if r.key.startswith(f"large.{phase}.submit.w")]
        row.wall_s = sum(r.wall_s or 0.0 for r in windows) or None
        row.p50_ms = (percentile(side.latencies_s, 50) or 0) * 1000 if side.latencies_s else None
        row.p99_ms = pooled_p99_ms(side.latencies_s)
        if windows and all(r.ok for r in windows):
            finish(row)
        else:
            row.status = "error: a window failed"


E2e = Callable[[Row, Cluster, asyncpg.Connection, str], Awaitable[None]]


async def e2e_windows(
    rows: Rows, sides: dict[str, Side], conn: asyncpg.Connection, run: E2e, pairs: int, total: int
) -> None:
    """The end-to-end no-op run of ``total`` tasks, one per side and pair in ABBA order; then each side's
    pooled row (``large.<phase>.e2e``: all its tasks over all its runs' time)."""
    for n, phase in abba(pairs):
        side = sides[phase]
        row = rows.add(f"large.{phase}.e2e.w{n}", GROUP, f"e2e no-op, {side.label} (run {n})", total)
        await run(row, side.running, conn, side.schema)
        side.e2e_done += row.done
        side.e2e_wall_s += row.wall_s or 0.0
    for phase in PHASES:
        side = sides[phase]
        runs = [r for r in rows if r.key.startswith(f"large.{phase}.e2e.w")]
        row = rows.add(
            f"large.{phase}.e2e", GROUP, f"e2e no-op, {side.label}: {pairs} runs pooled", total * pairs
        )
        row.done, row.wall_s = side.e2e_done, side.e2e_wall_s or None
        if runs and all(r.ok for r in runs):
            finish(row)
        else:
            row.status = "error: a run failed"

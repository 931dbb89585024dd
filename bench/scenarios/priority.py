"""Scenario: priorities on one specialist (one worker process, a concurrency of 4, LLM calls of 0.2 s).

Two measurements through the real API, broker agent and worker, tasks told apart by their ``priority``:

- **backlog**: 200 ``low`` tasks submitted and queued; the worker starts; once it has started 10 of them, 20
  ``high`` tasks are submitted. Figures: the p95 queue wait (``started_at - created_at``) of the highs and of
  the lows, their ratio (the issue's target: under 10 %), and how many lows started between the highs'
  submission and the last high's start (the lows' guaranteed share lets a few through).
- **stream**: 100 ``low`` tasks queued, then for 30 s a feeder keeps at least 20 ``high`` tasks not yet
  started (a continuous stream bigger than the worker can take). Figure: the lows' share of the starts made
  in that window, against their weighted share (one turn in 6 + 3 + 1: 10 % while normal is idle).

--quick / --smoke scale the counts down (figures then only show the behaviour, not the target).
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import httpx

from bench.infra import Context, taskyard_namespace
from bench.report import Row
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import percentile
from bench.taskyard import (
    TERMINAL,
    cluster,
    devllm,
    http_client,
    new_tag,
    submit_many,
    wait_for,
    write_catalog,
)
from taskyard_devkit.cluster import Cluster

SPECIALIST = "prio"
LLM_SECONDS = 0.2
CONCURRENCY = 4
CLIENTS = 8


def _body(tag: str, priority: str) -> dict[str, object]:
    return {
        "input": "Benchmark: priorities.",
        "specialist": SPECIALIST,
        "priority": priority,
        "metadata": {"bench": tag},
    }


async def _rows(conn: asyncpg.Connection, schema: str, tag: str) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT priority, created_at, started_at FROM \"{schema}\".tasks WHERE metadata->>'bench' = $1"
        " AND started_at IS NOT NULL ORDER BY started_at",
        tag,
    )


async def _started(conn: asyncpg.Connection, schema: str, tag: str) -> int:
    query = (
        f"SELECT count(*) FROM \"{schema}\".tasks WHERE metadata->>'bench' = $1 AND started_at IS NOT NULL"
    )
    return int(await conn.fetchval(query, tag))


async def run(ctx: Context, rows: Rows) -> None:
    lows, highs = ctx.pick((200, 20), (100, 10), (12, 3))
    stream_lows, stream_seconds = ctx.pick((100, 30.0), (40, 10.0), (8, 2.0))
    worker = f"1 worker, concurrency {CONCURRENCY}, LLM {LLM_SECONDS:g} s"
    backlog = rows.add(
        "priority.backlog", "6 priorities", f"{lows} low, then {highs} high; {worker}", lows + highs
    )
    # Its N is the starts made in the window, known at the end.
    stream = rows.add(
        "priority.stream",
        "6 priorities",
        f"{stream_lows} low under a high stream, {stream_seconds:g} s; {worker}",
        0,
    )
    log_dir = ctx.log_dir("priority")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: CONCURRENCY})
    async with (
        taskyard_namespace(ctx, "priority", [SPECIALIST]) as (amqp, db),
        devllm(log_dir, latency_seconds=LLM_SECONDS) as llm,
        cluster(amqp, db, catalog, llm, log_dir) as running,
    ):
        await running.start_api()
        await running.start_broker_agent()
        conn = await asyncpg.connect(ctx.db_url)
        try:
            async with http_client(running.api_url, CLIENTS) as client:
                async with bounded(backlog, ctx.pick(240, 120, 40)):
                    await _backlog(ctx, conn, db.db_schema, client, running, backlog, lows, highs)
                async with bounded(stream, ctx.pick(240, 120, 40)):
                    await _stream(conn, db.db_schema, client, stream, stream_lows, stream_seconds)
            finish(backlog)
            finish(stream)
        finally:
            await conn.close()


async def _backlog(
    ctx: Context,
    conn: asyncpg.Connection,
    schema: str,
    client: httpx.AsyncClient,
    running: Cluster,
    row: Row,
    lows: int,
    highs: int,
) -> None:
    tag = new_tag()
    submitted = await submit_many(client, lows, CLIENTS, _body(tag, "low"))
    await wait_for(conn, schema, tag, ["queued"], submitted.ok)
    started = time.time()
    await running.start_worker(SPECIALIST)
    for _ in range(1200):  # until the worker is into the backlog (at most a minute)
        if await _started(conn, schema, tag) >= min(10, lows // 4):
            break
        await asyncio.sleep(0.05)
    await submit_many(client, highs, CLIENTS, _body(tag, "high"))
    await wait_for(conn, schema, tag, TERMINAL, lows + highs, row, started)
    order = await _rows(conn, schema, tag)
    waits = {p: [(r["started_at"] - r["created_at"]).total_seconds() for r in order if r["priority"] == p]
             for p in ("high", "low")}  # fmt: skip
    high_p95, low_p95 = percentile(waits["high"], 95), percentile(waits["low"], 95)
    first_high = min(r["created_at"] for r in order if r["priority"] == "high")
    last_high = max(r["started_at"] for r in order if r["priority"] == "high")
    meanwhile = sum(1 for r in order if r["priority"] == "low" and first_high <= r["started_at"] <= last_high)
    remaining = sum(1 for r in order if r["priority"] == "low" and r["started_at"] >= first_high)
    ratio = (high_p95 or 0) / low_p95 if low_p95 else None
    row.done = len(order)
    row.wall_s = time.time() - started
    row.p50_ms = (percentile(waits["high"], 50) or 0) * 1000
    row.p99_ms = (percentile(waits["high"], 99) or 0) * 1000
    row.extra |= {"high_p95_s": high_p95 or 0, "low_p95_s": low_p95 or 0, "lows_meanwhile": meanwhile}
    if ratio is not None:
        row.extra["p95_ratio"] = ratio
    row.note = (
        f"p95 wait high {high_p95 or 0:.2f} s vs low {low_p95 or 0:.2f} s = {100 * (ratio or 0):.1f} %; "
        f"{meanwhile} of {remaining} remaining lows started before the last high; p50/p99: highs' wait"
    )
    if not ctx.smoke and ratio is not None:
        row.note += " (target < 10 %)"


async def _stream(
    conn: asyncpg.Connection, schema: str, client: httpx.AsyncClient, row: Row, lows: int, seconds: float
) -> None:
    tag = new_tag()
    await submit_many(client, lows, CLIENTS, _body(tag, "low"))
    window_start = time.time()
    deadline = time.monotonic() + seconds
    backlog = 20
    while time.monotonic() < deadline:
        queued_highs = await conn.fetchval(
            f"SELECT count(*) FROM \"{schema}\".tasks WHERE metadata->>'bench' = $1 AND priority = 'high'"
            " AND started_at IS NULL",
            tag,
        )
        if queued_highs < backlog:
            await submit_many(client, backlog - queued_highs + 10, CLIENTS, _body(tag, "high"))
        await asyncio.sleep(0.1)
    window_end = time.time()
    order = [r for r in await _rows(conn, schema, tag)
             if window_start <= r["started_at"].timestamp() <= window_end]  # fmt: skip
    low_starts = sum(1 for r in order if r["priority"] == "low")
    share = low_starts / len(order) if order else None
    row.total = row.done = len(order)
    row.wall_s = window_end - window_start
    if share is not None:
        row.extra["low_share"] = share
    row.note = (
        f"{low_starts} of {len(order)} starts were lows = {100 * (share or 0):.1f} % "
        "(weighted share 10 %) while highs kept waiting"
    )


SCENARIO = Scenario(
    "priority",
    run,
    timeout_s=420,
    quick_timeout_s=200,
    smoke_timeout_s=90,
    describe="priorities on one specialist: highs behind 200 lows (p95 wait ratio), lows' share under a high stream",
)

"""Scenario 6: a model's fleet-wide ``rpm`` kept by several worker processes against a provider that answers
429 above it (the development model server with ``--rpm``, the same figure).

300 one-call tasks (60 in --quick, 20 in --smoke) are submitted and routed first; then three worker
processes (one in --smoke) drain them, every call reserving from the one PostgreSQL bucket. Measured: the calls the server
answered and refused (429), the rate it answered them at (answered calls over the window from its first to
its last answer, the initial burst included), and the attempts charged (a task with more than one attempt, or
a charged entry in its history).
"""

from __future__ import annotations

import time

import asyncpg

from bench.infra import Context, taskyard_namespace
from bench.runner import Rows, Scenario, bounded, finish
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

SPECIALIST = "limited"
CLIENTS = 16


async def run(ctx: Context, rows: Rows) -> None:
    # Three workers (one in the smoke run, which only proves the scenario works).
    total, rpm, workers = ctx.pick((300, 600, 3), (60, 1200, 3), (20, 1200, 1))
    config = f"{workers} workers, rpm {rpm} (server: 429 above it)"
    row = rows.add("llm.rpm", "6 fleet-wide LLM rpm", config, total)
    log_dir = ctx.log_dir("rpm")
    async with (
        taskyard_namespace(ctx, "rpm", [SPECIALIST]) as (amqp, db),
        devllm(log_dir, rpm=rpm) as llm,
        cluster(amqp, db, log_dir / "catalog.yaml", llm, log_dir) as running,
    ):
        write_catalog(log_dir / "catalog.yaml", {SPECIALIST: 32}, [{"name": running.model, "rpm": rpm}])
        await running.start_api()
        await running.start_broker_agent()
        conn = await asyncpg.connect(ctx.db_url)
        try:
            tag = new_tag()
            body = {
                "input": "Benchmark: one model call.",
                "specialist": SPECIALIST,
                "metadata": {"bench": tag},
            }
            async with http_client(running.api_url, CLIENTS) as client:
                submitted = await submit_many(client, total, CLIENTS, body)
            await wait_for(conn, db.db_schema, tag, ["queued"], submitted.ok)
            spawned = time.time()
            for _ in range(workers):
                await running.start_worker(SPECIALIST)
            async with bounded(row, ctx.pick(240, 90, 40)):
                await wait_for(conn, db.db_schema, tag, TERMINAL, submitted.ok, row, spawned)
            stats = await llm.stats(running.model)
            charged = await conn.fetchval(
                f"SELECT count(*) FROM \"{db.db_schema}\".tasks WHERE metadata->>'bench' = $1 AND (attempts > 1"
                " OR EXISTS (SELECT 1 FROM jsonb_array_elements(attempt_log) e WHERE e->>'charged' = 'true'))",
                tag,
            )
            row.done = await conn.fetchval(
                f"SELECT count(*) FROM \"{db.db_schema}\".tasks WHERE metadata->>'bench' = $1 AND status = 'completed'",
                tag,
            )
            answered, refused = int(stats["answered"]), int(stats["rate_limited"])
            window = (stats["last_at"] or 0) - (stats["first_at"] or 0)
            measured = (answered - 1) / window * 60 if window > 0 else 0.0
            row.wall_s = window
            row.extra.update(
                answered=answered,
                rate_limited=refused,
                refused_pct=100 * refused / max(1, answered + refused),
                measured_rpm=measured,
                limit_rpm=rpm,
                charged=int(charged),
            )
            row.note = (
                f"{answered} calls answered, {refused} refused (429: {row.extra['refused_pct']:.2f} %); "
                f"answered at {measured:.0f}/min = {measured / rpm:.3f}x the limit over {window:.1f} s; "
                f"{charged} attempts charged"
            )
            finish(row)
        finally:
            await conn.close()


SCENARIO = Scenario(
    "rpm",
    run,
    timeout_s=300,
    quick_timeout_s=150,
    smoke_timeout_s=90,
    describe="fleet-wide rpm over 3 workers against a server answering 429 above it: 429 share, rate, charges",
)

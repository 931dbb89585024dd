"""Scenario 4: taskyard I/O-bound: one worker process, tasks whose one LLM call takes 1 s.

The specialist's concurrency (its queue prefetch) comes from a bench catalog: 500 (50 in --quick, 10 in
--smoke). All
tasks are submitted and routed first, with no worker running; then one worker starts and drains them, so
the measurement is the worker's own: the window from the first task's ``started_at`` to the last
``finished_at``, against the ideal (waves of ``concurrency`` tasks of 1 s). Also the most tasks seen in
flight at once (from the rows' start/finish times) and the worker's peak memory (PSS of its processes, sampled).

Run twice: without LLM limits, then with the model's fleet-wide ``rpm`` and ``tpm`` set far above what the
run uses (``LIMITED``), so every call reserves from the PostgreSQL buckets without ever waiting: the cost of
the limits themselves (``taskyard.io.limited`` against ``taskyard.io``).
"""

from __future__ import annotations

import time

import asyncpg

from bench.infra import Context, taskyard_namespace
from bench.memory import TreeMemory
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import ideal_seconds, peak_overlap, percentile
from bench.taskyard import (
    TERMINAL,
    cluster,
    devllm,
    http_client,
    new_tag,
    submit_many,
    task_times,
    wait_for,
    write_catalog,
)

SPECIALIST = "io"
LLM_SECONDS = 1.0
CLIENTS = 32
# Limits that never bind here (10^6 requests and 10^9 tokens a minute), only to be kept.
LIMITED = {"rpm": 1_000_000, "tpm": 1_000_000_000}


async def run(ctx: Context, rows: Rows) -> None:
    await _run(ctx, rows, limited=False)
    if not ctx.smoke:  # the smoke run only proves the scenario works: once is enough (and lean)
        await _run(ctx, rows, limited=True)


async def _run(ctx: Context, rows: Rows, *, limited: bool) -> None:
    total, concurrency = ctx.pick((1_000, 500), (100, 50), (20, 10))
    ideal = ideal_seconds(total, LLM_SECONDS, concurrency)
    suffix = ".limited" if limited else ""
    config = f"1 worker, concurrency {concurrency}, LLM 1 s" + (
        ", rpm/tpm limits (not binding)" if limited else ""
    )
    row = rows.add(f"taskyard.io{suffix}", "4 taskyard I/O-bound", config, total)
    row.extra["ideal_s"] = ideal
    name = "io_limited" if limited else "io"
    log_dir = ctx.log_dir(name)
    async with (
        taskyard_namespace(ctx, name, [SPECIALIST]) as (amqp, db),
        devllm(log_dir, latency_seconds=LLM_SECONDS) as llm,
        cluster(amqp, db, log_dir / "catalog.yaml", llm, log_dir) as running,
    ):
        models = [{"name": running.model, **LIMITED}] if limited else None
        write_catalog(log_dir / "catalog.yaml", {SPECIALIST: concurrency}, models)
        await running.start_api()
        await running.start_broker_agent()
        conn = await asyncpg.connect(ctx.db_url)
        try:
            tag = new_tag()
            body = {
                "input": "Benchmark: one slow model call.",
                "specialist": SPECIALIST,
                "metadata": {"bench": tag},
            }
            async with http_client(running.api_url, CLIENTS) as client:
                submitted = await submit_many(client, total, CLIENTS, body)
            if submitted.errors:
                row.note = f"submit retries/errors {submitted.error_note()}; "
            # Every task routed and waiting in the specialist's queue before the worker exists.
            await wait_for(conn, db.db_schema, tag, ["queued"], submitted.ok)
            spawned = time.time()
            worker = await running.start_worker(SPECIALIST)
            memory = TreeMemory(worker.proc.pid)
            memory.start()
            async with bounded(row, ctx.pick(240, 60, 20)):
                await wait_for(conn, db.db_schema, tag, TERMINAL, submitted.ok, row, spawned)
            rss = await memory.stop()
            if rss is not None:
                row.extra["peak_memory_mb"] = rss
            times = [t for t in await task_times(conn, db.db_schema, tag) if t.started and t.finished]
            completed = [t for t in times if t.status == "completed"]
            row.done = len(completed)
            if times:
                first_start = min(t.started for t in times if t.started)
                last_finish = max(t.finished for t in times if t.finished)
                row.wall_s = last_finish - first_start
                row.extra["window_s"] = row.wall_s
                row.extra["peak_in_flight"] = peak_overlap((t.started or 0, t.finished or 0) for t in times)
                run_times = [(t.finished or 0) - (t.started or 0) for t in completed]
                row.p50_ms = (percentile(run_times, 50) or 0) * 1000
                row.p99_ms = (percentile(run_times, 99) or 0) * 1000
                row.note += (
                    f"{row.wall_s / ideal:.2f}x ideal {ideal:.0f} s; {row.extra['peak_in_flight']:.0f} in flight; "
                    f"memory {rss or 0:.0f} MB (PSS, all its processes); spawn to last {last_finish - spawned:.1f} s; p50/p99: run time"
                )
            finish(row)
        finally:
            await conn.close()


SCENARIO = Scenario(
    "io",
    run,
    timeout_s=840,
    quick_timeout_s=300,
    smoke_timeout_s=60,
    describe="taskyard, one worker, 1-s LLM calls at high concurrency: time vs ideal, peak RSS",
)

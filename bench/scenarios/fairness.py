"""Scenario 6: tenant fairness. Tenant A submits 2,000 tasks, then tenant B 20, to one specialist.

Two workers of 20 slots each (one of 4 in ``--smoke``) (bench catalog), tasks of one 2-s LLM call, A capped at ``max_running`` 24 (set
over REST with A's admin key; the API runs with authentication, one admin key per tenant, no rate limit).
A's tasks are submitted over HTTP from 32 clients; B's 20 the moment A's last one is accepted.

Measured from the task rows (the database's clock): B's queue wait (``routed_at`` .. ``started_at``) against
a slot turnover (the median run time, ``started_at`` .. ``finished_at``, of every completed task), the target
being p95 under two turnovers; the most tasks of A running at once over the whole run (from its rows' start
and finish times) against its cap; the refusals noted in the attempt histories, by reason; and A's
throughput against the ideal for its cap (``max_running / LLM seconds``).
"""

from __future__ import annotations

import asyncio
import time

import asyncpg

from bench.infra import Context, taskyard_namespace
from bench.report import Row
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import peak_overlap, percentile
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
from taskyard_common.settings import DbSettings
from taskyard_common.store.keys import KeyStore, Role

SPECIALIST = "fair"
CLIENTS = 32


async def admin_header(db: DbSettings, tenant: str) -> dict[str, str]:
    keys = await KeyStore.open(db)
    try:
        _, key = await keys.create(tenant=tenant, role=Role.ADMIN, name="bench")
    finally:
        await keys.close()
    return {"Authorization": f"Bearer {key}"}


async def run(ctx: Context, rows: Rows) -> None:
    a_total, b_total = ctx.pick((2_000, 20), (500, 20), (20, 4))
    workers, slots, cap, llm_seconds = ctx.pick((2, 20, 24, 2.0), (2, 20, 24, 2.0), (1, 4, 3, 0.3))
    config = f"{workers} worker(s) x {slots} slots, A max_running {cap}, LLM {llm_seconds:g} s"
    b_row = rows.add(
        "fairness.b", "6 tenant fairness: B's queue wait", f"B {b_total} after A; {config}", b_total
    )
    a_row = rows.add("fairness.a", "6 tenant fairness: A under its cap", f"A {a_total}; {config}", a_total)
    log_dir = ctx.log_dir("fairness")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: slots})
    async with (
        taskyard_namespace(ctx, "fairness", [SPECIALIST]) as (amqp, db),
        devllm(log_dir, latency_seconds=llm_seconds) as llm,
        cluster(amqp, db, catalog, llm, log_dir) as running,
    ):
        await running.start_api(TASKYARD_API_AUTH_ENABLED="true")
        await running.start_broker_agent()
        for _ in range(workers):
            await running.start_worker(SPECIALIST)
        a_key, b_key = await admin_header(db, "tenant-a"), await admin_header(db, "tenant-b")
        conn = await asyncpg.connect(ctx.db_url)
        try:
            tag = new_tag()
            body = {
                "input": "Benchmark: one slow model call.",
                "specialist": SPECIALIST,
                "metadata": {"bench": tag},
            }
            async with http_client(running.api_url, CLIENTS) as client:
                capped = await client.put(
                    "/v1/tenants/tenant-a/limits", json={"max_running": cap}, headers=a_key
                )
                capped.raise_for_status()
                started = time.time()
                client.headers.update(a_key)
                a_sent = await submit_many(client, a_total, CLIENTS, body)
                client.headers.update(b_key)
                b_sent = await submit_many(client, b_total, min(CLIENTS, b_total), body)
            notes = [f"{k} {s.error_note()}" for k, s in (("A", a_sent), ("B", b_sent)) if s.errors]
            async with bounded(b_row, ctx.pick(300, 120, 40)):
                await _wait_tenant(conn, db.db_schema, "tenant-b", b_sent.ok, b_row, started)
            async with bounded(a_row, ctx.pick(600, 240, 60)):
                await wait_for(conn, db.db_schema, tag, TERMINAL, a_sent.ok + b_sent.ok, None, started)
            await _summarise(conn, db.db_schema, a_row, b_row, cap=cap, llm_seconds=llm_seconds)
            if notes:
                b_row.note = "; ".join([*notes, b_row.note])
            finish(b_row)
            finish(a_row)
        finally:
            await conn.close()


async def _wait_tenant(
    conn: asyncpg.Connection, schema: str, tenant: str, expected: int, row: Row, started: float
) -> None:
    """Poll the store until ``expected`` tasks of ``tenant`` are finished; keeps ``row`` current."""
    while True:
        done = await conn.fetchval(
            f'SELECT count(*) FROM "{schema}".tasks WHERE tenant = $1 AND status = ANY($2)', tenant, TERMINAL
        )
        row.done, row.wall_s = done, time.time() - started
        if done >= expected:
            return
        await asyncio.sleep(0.2)


async def _summarise(
    conn: asyncpg.Connection, schema: str, a_row: Row, b_row: Row, *, cap: int, llm_seconds: float
) -> None:
    records = await conn.fetch(
        f'SELECT tenant, status, routed_at, started_at, finished_at FROM "{schema}".tasks'
    )
    refusals = await conn.fetch(
        f"SELECT tenant || ' ' || (e->>'reason') AS reason, sum((e->>'count')::int) AS n FROM \"{schema}\".tasks,"
        " jsonb_array_elements(attempt_log) e WHERE e->>'event' = 'start_deferred' GROUP BY 1 ORDER BY 1"
    )
    done = [r for r in records if r["status"] == "completed"]
    turnover = percentile([(r["finished_at"] - r["started_at"]).total_seconds() for r in done], 50) or 0.0
    b_waits = [
        (r["started_at"] - r["routed_at"]).total_seconds()
        for r in records
        if r["tenant"] == "tenant-b" and r["started_at"] and r["routed_at"]
    ]
    b_done = [r for r in done if r["tenant"] == "tenant-b"]
    b_row.done = len(b_done)
    p50, p95, p99 = (percentile(b_waits, p) for p in (50, 95, 99))
    b_row.p50_ms, b_row.p99_ms = (p50 or 0) * 1000, (p99 or 0) * 1000
    b_row.extra.update({"b_p95_wait_s": p95 or 0.0, "turnover_s": turnover})
    b_timed = [r for r in records if r["tenant"] == "tenant-b" and r["started_at"] and r["routed_at"]]
    overtaken = 0
    if b_timed:
        # A's starts while B's tasks waited: how far A got ahead of B's queued work.
        since, until = min(r["routed_at"] for r in b_timed), max(r["started_at"] for r in b_timed)
        overtaken = sum(
            1
            for r in records
            if r["tenant"] == "tenant-a" and r["started_at"] and since < r["started_at"] < until
        )
    ratio = (p95 or 0) / turnover if turnover else float("nan")
    b_row.note = (
        f"B's queue wait p95 {p95 or 0:.2f} s = {ratio:.2f} slot turnovers (target < 2: "
        f"{'met' if ratio < 2 else 'NOT met'}); turnover (median run time) {turnover:.2f} s; {overtaken} of A's "
        "tasks started while B's waited; p50/p99: B's queue wait"
    )
    a_rows = [r for r in records if r["tenant"] == "tenant-a"]
    a_done = [r for r in a_rows if r["status"] == "completed"]
    peak = peak_overlap(
        (r["started_at"].timestamp(), r["finished_at"].timestamp())
        for r in a_rows
        if r["started_at"] and r["finished_at"]
    )
    a_row.done = len(a_done)
    if a_done:
        first = min(r["started_at"] for r in a_done).timestamp()
        last = max(r["finished_at"] for r in a_done).timestamp()
        a_row.wall_s = last - first
        ideal = len(a_done) * llm_seconds / cap
        a_row.extra.update({"a_peak_running": peak, "a_ideal_s": ideal})
        runs = [(r["finished_at"] - r["started_at"]).total_seconds() for r in a_done]
        a_row.p50_ms = (percentile(runs, 50) or 0) * 1000
        a_row.p99_ms = (percentile(runs, 99) or 0) * 1000
        by_reason = ", ".join(f"{r['reason']} {r['n']}" for r in refusals) or "none"
        a_row.note = (
            f"peak running {peak} of max_running {cap} ({'never exceeded' if peak <= cap else 'EXCEEDED'}); "
            f"window {a_row.wall_s:.0f} s = {a_row.wall_s / ideal:.2f}x ideal {ideal:.0f} s at the cap; "
            f"refusals noted: {by_reason}; p50/p99: run time"
        )


SCENARIO = Scenario(
    "fairness",
    run,
    timeout_s=900,
    quick_timeout_s=360,
    smoke_timeout_s=90,
    describe="two tenants, A 2,000 tasks capped, then B 20: B's queue wait in slot turnovers, A's peak running",
)

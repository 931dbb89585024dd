"""Scenario 6: a large store: submit p99 and end-to-end throughput with 10 million tasks already stored, vs the
same measurements on the empty store, and the submit path while retention removes old tasks.

Two schemas: an empty one, and a full one, either filled here in bulk inside PostgreSQL
(``bench.store_fill``: 10 million finished tasks over 40 days, two events each, an idempotency key for one
in ten; dropped afterwards) or, with ``--reuse-store SCHEMA``, one filled earlier by
``python -m bench.store_fill --schema SCHEMA`` (kept: a fill takes half an hour on a loaded machine).

Then rounds of empty, full (two rounds in a full run: empty, full, empty, full, so the spread between rounds
shows the machine's noise). Each phase starts its own API, broker agent (retention off) and worker on its
schema and measures the submit path (closed loop, 32 clients, the lean load generator) and the no-op end to
end (N tasks, explicit specialist, as scenario 3).

Last, on a store filled here only: a second broker agent starts with retention on (a round every second,
batches of 500): a quarter of the generated tasks are past the default 30 days, so it removes tasks all
through one more measurement of the submit path; the row notes how many it removed and at what rate.
Retention never runs on a reused store (it would remove a quarter of it).

Completion is read from the store through the ``created_at`` index (only this run's rows), never with a scan
of the whole table.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import asyncpg

from bench.http_load import LoadSpec, run_in_process
from bench.infra import Context, delete_amqp, taskyard_namespace
from bench.report import Row
from bench.runner import Rows, Scenario, bounded, finish
from bench.scenarios.submit_path import _measure
from bench.store_fill import fill
from bench.taskyard import TaskTimes, cluster, devllm, new_tag, summarise_e2e, write_catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store.migrate import migrate
from taskyard_common.topology import Topology
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.process import Service

SPECIALIST = "noop"
CLIENTS = 32
WORKER_CONCURRENCY = 100
OFF = {"TASKYARD_TASK_RETENTION_ENABLED": "false"}
RETENTION = {
    "TASKYARD_TASK_RETENTION_ENABLED": "true",
    "TASKYARD_TASK_RETENTION_INTERVAL_SECONDS": "1",
    "TASKYARD_TASK_RETENTION_BATCH_SIZE": "500",
    "TASKYARD_TASK_RETENTION_MAX_BATCHES": "100000",
}


async def _run_rows(conn: asyncpg.Connection, schema: str, tag: str, since: datetime) -> list[asyncpg.Record]:
    return await conn.fetch(
        f'SELECT status, created_at, started_at, finished_at FROM "{schema}".tasks'
        " WHERE created_at >= $1 AND metadata->>'bench' = $2",
        since,
        tag,
    )


async def _e2e(
    row: Row, running: Cluster, conn: asyncpg.Connection, schema: str, total: int, limit: float
) -> None:
    """``total`` no-op tasks end to end, as scenario 3 (explicit specialist)."""
    tag = new_tag()
    port = int(running.api_url.rsplit(":", 1)[1])
    body = {
        "input": "Benchmark: reply with one short sentence.",
        "specialist": SPECIALIST,
        "metadata": {"bench": tag},
    }
    spec = LoadSpec(
        host="127.0.0.1", port=port, path="/v1/tasks", body=json.dumps(body), concurrency=CLIENTS,
        seconds=limit, warmup_seconds=0, count=total,
    )  # fmt: skip
    since = await conn.fetchval("SELECT clock_timestamp() - interval '1 second'")
    async with bounded(row, limit):
        first_submit = time.time()
        submitted = await run_in_process(spec, timeout=limit + 30)
        while True:
            rows = await _run_rows(conn, schema, tag, since)
            finished = [r for r in rows if r["finished_at"] is not None]
            row.done, row.wall_s = len(finished), time.time() - first_submit
            if len(finished) >= submitted.ok:
                break
            await asyncio.sleep(0.5)
        times = [
            TaskTimes(r["status"], r["created_at"].timestamp(), None, r["finished_at"].timestamp())
            for r in rows
        ]
        summarise_e2e(row, times, first_submit)
        finish(row)


def _removed(metrics_text: str) -> float:
    match = re.search(r'^taskyard_store_rows_removed_total\{table="tasks"\} (\S+)$', metrics_text, re.M)
    return float(match.group(1)) if match else 0.0


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class Setup:
    ctx: Context
    catalog: Path
    llm: DevLlm
    log_dir: Path
    body: str

    def submit(self, running: Cluster) -> LoadSpec:
        seconds, warmup = self.ctx.pick((10.0, 2.0), (3.0, 1.0), (1.0, 0.5))
        port = int(running.api_url.rsplit(":", 1)[1])
        return LoadSpec(
            host="127.0.0.1", port=port, path="/v1/tasks", body=self.body, concurrency=CLIENTS,
            seconds=seconds, warmup_seconds=warmup,
        )  # fmt: skip


async def _round(
    setup: Setup,
    rows: Rows,
    store: tuple[AmqpSettings, DbSettings],
    phase: str,
    suffix: str,
    label: str,
    *,
    retention: bool,
) -> None:
    """One phase of one round: a cluster of its own on ``store``, the submit path, then the e2e run; with
    ``retention``, the submit path once more while a second broker agent removes expired tasks."""
    ctx = setup.ctx
    amqp, db = store
    total = ctx.pick(5_000, 500, 10)
    async with cluster(
        amqp, db, setup.catalog, setup.llm, _dir(setup.log_dir / f"{phase}{suffix}")
    ) as running:
        api = await running.start_api()
        await running.start_broker_agent(**OFF)
        await running.start_worker(SPECIALIST)
        submit = setup.submit(running)
        row = rows.add(
            f"large.{phase}.submit{suffix}", "6 large store", f"submit, {CLIENTS} clients, {label}", 0
        )
        await _measure(row, submit, api)
        row = rows.add(f"large.{phase}.e2e{suffix}", "6 large store", f"e2e no-op, {label}", total)
        conn = await asyncpg.connect(ctx.db_url)
        try:
            await _e2e(row, running, conn, db.db_schema, total, ctx.pick(300, 120, 30))
            if retention:
                await _retention(rows, running, conn, db.db_schema, submit, api)
        finally:
            await conn.close()


async def _retention(
    rows: Rows, running: Cluster, conn: asyncpg.Connection, schema: str, submit: LoadSpec, api: Service
) -> None:
    due = await conn.fetchval(
        f"SELECT count(*) FROM \"{schema}\".tasks WHERE created_at < clock_timestamp() - interval '30 days'"
    )
    cleaner: Service = await running.start_broker_agent(**RETENTION)
    await asyncio.sleep(2.0)  # its first rounds under way
    row = rows.add(
        "large.retention.submit", "6 large store", f"submit, {CLIENTS} clients, retention removing", 0
    )
    before, started = _removed(await running.metrics(cleaner)), time.monotonic()
    await _measure(row, submit, api)
    removed = _removed(await running.metrics(cleaner)) - before
    elapsed = time.monotonic() - started
    row.extra["retention_tasks_per_s"] = removed / elapsed
    row.note = (
        f"retention removed {removed:,.0f} of {due:,} due tasks ({removed / elapsed:,.0f}/s, with their rows); "
        + row.note
    )
    cleaner.stop()


@asynccontextmanager
async def _full_store(ctx: Context, rows: Rows) -> AsyncIterator[tuple[AmqpSettings, DbSettings, bool]]:
    """The full store: ``ctx.reuse_store`` as it is (kept afterwards, retention not run on it: it would
    remove a quarter of it), else a schema of this run filled in bulk here (dropped afterwards). The flag
    says whether retention may run."""
    if ctx.reuse_store:
        amqp = AmqpSettings(
            url=ctx.amqp_url, prefix=ctx.prefix("large_kept"), delivery_limit=5, max_length=100_000
        )
        # Filled by an earlier release maybe: bring it to this one's schema first (the services do not
        # migrate; without the later columns every submission would fail).
        conn = await asyncpg.connect(ctx.db_url)
        try:
            await migrate(conn, ctx.reuse_store)
        finally:
            await conn.close()
        try:
            yield amqp, DbSettings(url=ctx.db_url, db_schema=ctx.reuse_store), ctx.remove_from_reused_store
        finally:
            topology = Topology(amqp.prefix)
            await delete_amqp(
                ctx.amqp_url, topology.all_queue_names([SPECIALIST]), topology.all_exchange_names()
            )
        return
    stored = ctx.pick(10_000_000, 200_000, 2_000)
    async with taskyard_namespace(ctx, "large", [SPECIALIST]) as (amqp, db):
        row = rows.add("large.fill", "6 large store", f"bulk fill of {stored:,} tasks", stored)
        async with bounded(row, ctx.pick(3600, 600, 60)):
            filled = await fill(ctx.db_url, db.db_schema, stored)
            row.done, row.wall_s = filled.tasks, filled.seconds
            row.note = ", ".join(f"{t} {size / 2**30:.2f} GiB" for t, size in filled.sizes.items())
            finish(row)
        yield amqp, db, True


async def _stored(ctx: Context, schema: str) -> int:
    conn = await asyncpg.connect(ctx.db_url)
    try:
        if await conn.fetchval("SELECT to_regclass($1)", f'"{schema}".tasks') is None:
            raise RuntimeError(
                f"no tasks table in schema {schema}: fill it first (python -m bench.store_fill)"
            )
        # The planner's estimate: a count(*) of 10 million rows would take minutes.
        return int(
            await conn.fetchval(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = $1::regclass", f'"{schema}".tasks'
            )
        )
    finally:
        await conn.close()


async def run(ctx: Context, rows: Rows) -> None:
    rounds = ctx.pick(2, 2, 1)
    log_dir = ctx.log_dir("large")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: WORKER_CONCURRENCY})
    body = json.dumps(
        {"input": "Benchmark: submit only.", "specialist": SPECIALIST, "metadata": {"bench": "x"}}
    )
    async with (
        devllm(log_dir) as llm,
        taskyard_namespace(ctx, "large_empty", [SPECIALIST]) as empty,
        _full_store(ctx, rows) as (full_amqp, full_db, may_remove),
    ):
        setup = Setup(ctx, catalog, llm, log_dir, body)
        stored = await _stored(ctx, full_db.db_schema)
        # Empty and full in turn, each round: the spread between rounds shows the machine's noise.
        for n in range(1, rounds + 1):
            suffix = "" if n == 1 else f".r{n}"
            mark = f" (round {n})" if rounds > 1 else ""
            await _round(setup, rows, empty, "empty", suffix, f"empty store{mark}", retention=False)
            last = n == rounds
            await _round(
                setup, rows, (full_amqp, full_db), "full", suffix, f"{stored:,} tasks stored{mark}",
                retention=last and may_remove,
            )  # fmt: skip


SCENARIO = Scenario(
    "large_store",
    run,
    timeout_s=5400,
    quick_timeout_s=600,
    smoke_timeout_s=240,
    describe="submit p99 and e2e throughput with 10 million tasks stored vs empty, and while retention removes",
)

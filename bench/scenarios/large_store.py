"""Scenario 6: a large store: submit p99 and end-to-end throughput with 10 million tasks already stored, vs the
same measurements on the empty store, and the submit path while retention removes old tasks.

Two schemas: an empty one, and a full one, either filled here in bulk inside PostgreSQL
(``bench.store_fill``: 10 million finished tasks over 40 days, two events each, an idempotency key for one
in ten; dropped afterwards) or, with ``--reuse-store SCHEMA``, one filled earlier by
``python -m bench.store_fill --schema SCHEMA`` (kept: a fill takes half an hour on a loaded machine).

Then both stores' services (API, broker agent with retention off, worker, each store its own) run side by
side and the load alternates between them in paired windows (``large_store_pairs.py``: ABBA order, six
pairs in a full run): the submit path (closed loop, 32 clients, the lean load generator, 5-s windows) and
the no-op end to end (2,000 tasks, explicit specialist, as scenario 3). Each side's figure pools its
windows; each window is a row too, so the spread shows the machine's noise.

Last, on a store filled here (or a reused one with ``--remove-from-reused-store``): a second broker agent
starts with retention on (a round every second, batches of 500): a quarter of the generated tasks are past
the default 30 days, so it removes tasks all through one more measurement of the submit path; the row notes
how many it removed and at what rate.

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
from bench.scenarios.large_store_pairs import Side, e2e_windows, submit_windows
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
        seconds, warmup = self.ctx.pick((5.0, 1.0), (3.0, 1.0), (2.0, 1.0))
        port = int(running.api_url.rsplit(":", 1)[1])
        return LoadSpec(
            host="127.0.0.1", port=port, path="/v1/tasks", body=self.body, concurrency=CLIENTS,
            seconds=seconds, warmup_seconds=warmup,
        )  # fmt: skip


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


@asynccontextmanager
async def _side(
    setup: Setup, store: tuple[AmqpSettings, DbSettings], phase: str, label: str
) -> AsyncIterator[Side]:
    """One store's API, broker agent (retention off) and worker, up for the whole comparison."""
    amqp, db = store
    async with cluster(amqp, db, setup.catalog, setup.llm, _dir(setup.log_dir / phase)) as running:
        api = await running.start_api()
        await running.start_broker_agent(**OFF)
        await running.start_worker(SPECIALIST)
        yield Side(phase, label, running, api, db.db_schema)


async def run(ctx: Context, rows: Rows) -> None:
    pairs = ctx.pick(6, 2, 1)
    total = ctx.pick(2_000, 300, 10)
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
        limit = ctx.pick(300, 120, 30)

        async def e2e(row: Row, running: Cluster, conn: asyncpg.Connection, schema: str) -> None:
            await _e2e(row, running, conn, schema, total, limit)

        conn = await asyncpg.connect(ctx.db_url)
        try:
            async with (
                _side(setup, empty, "empty", "empty store") as empty_side,
                _side(setup, (full_amqp, full_db), "full", f"{stored:,} tasks stored") as full_side,
            ):
                sides = {"empty": empty_side, "full": full_side}
                await submit_windows(rows, sides, conn, setup.submit, _measure, pairs, CLIENTS)
                await e2e_windows(rows, sides, conn, e2e, pairs, total)
                if may_remove:
                    await _retention(
                        rows, full_side.running, conn, full_db.db_schema, setup.submit(full_side.running),
                        full_side.api,
                    )  # fmt: skip
        finally:
            await conn.close()


SCENARIO = Scenario(
    "large_store",
    run,
    timeout_s=5400,
    quick_timeout_s=600,
    smoke_timeout_s=240,
    describe="submit p99 and e2e throughput with 10 million tasks stored vs empty, and while retention removes",
)

"""Scenario 2, the baseline: Celery on the same RabbitMQ (a quorum queue) with a PostgreSQL result backend.

No-op tasks and 1-s sleep tasks (a blocking LLM call's stand-in), with the default prefork pool (concurrency
= CPU count) and with a threads pool of 100. Time runs from the first enqueue to the last result stored;
latency is each task's enqueue to its result row's ``date_done``. Completion is read from the result table,
as taskyard's is from its task table.

1-s tasks on prefork run ``CPU count`` at a time, so the full count would take ``N / CPUs`` seconds (1,000
tasks on 2 cores: 500 s); prefork's sleep run uses a smaller, stated count (``PREFORK_SLEEP_TASKS``).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from datetime import UTC

import aio_pika
import aiormq
import asyncpg

from bench.celery_app import NOOP, SLEEP, make_app
from bench.infra import ROOT, Context, db_schema, delete_amqp
from bench.report import Row
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import percentile
from taskyard_devkit.process import Service

THREADS = 100
PREFORK_SLEEP_TASKS = 60  # full run: 30 s of 1-s tasks on 2 processes, instead of 500 s for 1,000
DELAYED = [f"celery_delayed_{level}" for level in range(28)]  # Celery's native delayed delivery (quorum)


def _counts(ctx: Context, pool: str, concurrency: int) -> tuple[int, int]:
    noop = ctx.pick(5_000, 200, 20)
    if pool == "threads":
        return noop, ctx.pick(1_000, 100, 20)
    return noop, ctx.pick(PREFORK_SLEEP_TASKS, 2 * concurrency, concurrency)


async def _absent(url: str, names: list[str], exchanges: bool) -> list[str]:
    """Those of ``names`` the broker does not have yet: only what this scenario created is deleted."""
    missing = []
    connection = await aio_pika.connect(url, client_properties={"connection_name": "bench celery check"})
    try:
        for name in names:
            channel = await connection.channel()
            try:
                if exchanges:
                    await channel.declare_exchange(name, passive=True)
                else:
                    await channel.declare_queue(name, passive=True)
                await channel.close()
            except aiormq.exceptions.ChannelNotFoundEntity:
                missing.append(name)
    finally:
        await connection.close()
    return missing


async def _wait_consumer(url: str, queue: str, worker: Service, timeout: float = 60) -> None:
    connection = await aio_pika.connect(url, client_properties={"connection_name": "bench celery wait"})
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=True, arguments={"x-queue-type": "quorum"})
        deadline = time.monotonic() + timeout
        while True:
            if worker.proc.poll() is not None:
                raise RuntimeError(f"celery worker exited:\n{worker.log_tail()}")
            result = await channel.declare_queue(queue, passive=True)
            if result.declaration_result.consumer_count:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("celery worker never consumed")
            await asyncio.sleep(0.1)
    finally:
        await connection.close()


def _enqueue(
    app, name: str, args: list, total: int, sent: dict[str, float], stop: threading.Event, queue: str
) -> None:
    for _ in range(total):
        if stop.is_set():
            return
        task_id = str(uuid.uuid4())
        sent[task_id] = time.time()
        app.send_task(name, args=args, task_id=task_id, queue=queue)


async def _results(conn: asyncpg.Connection, schema: str) -> list[asyncpg.Record]:
    try:
        return await conn.fetch(f'SELECT task_id, status, date_done FROM "{schema}".celery_taskmeta')
    except asyncpg.UndefinedTableError:
        return []


async def _done(conn: asyncpg.Connection, schema: str) -> int:
    try:
        return await conn.fetchval(
            f"SELECT count(*) FROM \"{schema}\".celery_taskmeta WHERE status = 'SUCCESS'"
        )
    except asyncpg.UndefinedTableError:
        return 0


async def _measure(
    app, conn: asyncpg.Connection, schema: str, queue: str, row: Row, name: str, args: list
) -> None:
    try:
        await conn.execute(f'TRUNCATE "{schema}".celery_taskmeta')
    except asyncpg.UndefinedTableError:
        pass
    sent: dict[str, float] = {}
    stop = threading.Event()
    enqueue = asyncio.create_task(asyncio.to_thread(_enqueue, app, name, args, row.total, sent, stop, queue))
    try:
        while (done := await _done(conn, schema)) < row.total:
            row.done = done
            if sent:
                row.wall_s = time.time() - min(sent.values())
            if enqueue.done() and enqueue.exception():
                raise enqueue.exception()
            await asyncio.sleep(0.2)
    finally:
        stop.set()
        await asyncio.shield(enqueue)
    first = min(sent.values())
    latencies, last = [], first
    for record in await _results(conn, schema):
        finished = record["date_done"].replace(tzinfo=UTC).timestamp()  # naive UTC column
        if record["status"] == "SUCCESS" and record["task_id"] in sent:
            latencies.append(finished - sent[record["task_id"]])
            last = max(last, finished)
    row.done = len(latencies)
    row.wall_s = last - first
    row.p50_ms = (percentile(latencies, 50) or 0) * 1000
    row.p99_ms = (percentile(latencies, 99) or 0) * 1000
    finish(row)


async def run(ctx: Context, rows: Rows) -> None:
    prefork = os.cpu_count() or 1
    pools = [("prefork", prefork), ("threads", THREADS)]
    plan = []
    for pool, concurrency in pools:
        n_noop, n_sleep = _counts(ctx, pool, concurrency)
        noop = rows.add(f"celery.{pool}.noop", "2 Celery", f"{pool} x{concurrency}, no-op", n_noop)
        sleep = rows.add(f"celery.{pool}.sleep", "2 Celery", f"{pool} x{concurrency}, sleep 1 s", n_sleep)
        if pool == "prefork" and not ctx.quick:
            sleep.note = f"reduced count ({n_sleep}, not 1,000: {prefork} processes)"
        plan.append((pool, concurrency, noop, sleep))

    queue = f"{ctx.prefix('celery')}.q"
    new_queues = await _absent(ctx.amqp_url, DELAYED, exchanges=False)
    new_exchanges = await _absent(ctx.amqp_url, [*DELAYED, "celery_delayed_delivery"], exchanges=True)
    async with db_schema(ctx, "celery", migrated=False) as schema:
        app = make_app(ctx.amqp_url, ctx.db_url, queue, schema)
        conn = await asyncpg.connect(ctx.db_url)
        try:
            for pool, concurrency, noop, sleep in plan:
                argv = [
                    "python",
                    "-m",
                    "bench.celery_worker",
                    "--pool",
                    pool,
                    "--concurrency",
                    str(concurrency),
                    "--queue",
                    queue,
                    "--schema",
                    schema,
                ]
                env = {
                    "BENCH_CELERY_BROKER": ctx.amqp_url,
                    "BENCH_CELERY_DB": ctx.db_url,
                    "PYTHONPATH": str(ROOT),
                }
                worker = Service(f"celery-{pool}", argv, env, ctx.log_dir("celery"))
                try:
                    await _wait_consumer(ctx.amqp_url, queue, worker)
                    limit = ctx.pick(240, 60, 20)
                    async with bounded(noop, limit):
                        await _measure(app, conn, schema, queue, noop, NOOP, [])
                    async with bounded(sleep, limit):
                        await _measure(app, conn, schema, queue, sleep, SLEEP, [1.0])
                finally:
                    worker.stop()
        finally:
            await conn.close()
            app.close()
            await delete_amqp(ctx.amqp_url, [queue, *new_queues], [queue, *new_exchanges])


SCENARIO = Scenario(
    "celery",
    run,
    timeout_s=900,
    quick_timeout_s=180,
    smoke_timeout_s=60,
    describe="Celery, quorum queue, PostgreSQL results: no-op and 1-s tasks, prefork and threads x100",
)

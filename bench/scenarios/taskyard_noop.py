"""Scenario 3: taskyard end to end with instant work, over HTTP, through both queues and the store.

N tasks are POSTed by concurrent keep-alive clients (one pooled ``httpx.AsyncClient``) to one API process;
one broker agent and one worker (a specialist with no tools and one call to the dev LLM, which answers at
once) do the rest. Time runs from the first POST to the last ``finished_at``; latency is each task's
``created_at`` to ``finished_at``. Twice: with an explicit specialist (routing skipped) and with LLM routing
(the broker agent asks the dev LLM).
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
    summarise_e2e,
    task_times,
    wait_for,
    write_catalog,
)

SPECIALIST = "noop"
CLIENTS = 32
WORKER_CONCURRENCY = 100  # as Celery's threads pool


async def run(ctx: Context, rows: Rows) -> None:
    total = ctx.pick(5_000, 200, 20)
    limit = ctx.pick(300, 75, 20)
    runs = [
        (
            rows.add(
                "taskyard.noop.explicit",
                "3 taskyard e2e no-op",
                f"explicit specialist, {CLIENTS} clients",
                total,
            ),
            True,
        ),
        (
            rows.add(
                "taskyard.noop.llm",
                "3 taskyard e2e no-op",
                f"LLM routing (dev LLM), {CLIENTS} clients",
                total,
            ),
            False,
        ),
    ]
    log_dir = ctx.log_dir("noop")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: WORKER_CONCURRENCY})
    async with (
        taskyard_namespace(ctx, "noop", [SPECIALIST]) as (amqp, db),
        devllm(log_dir) as llm,
        cluster(amqp, db, catalog, llm, log_dir) as running,
    ):
        await running.start_api()
        await running.start_broker_agent()
        await running.start_worker(SPECIALIST)
        conn = await asyncpg.connect(ctx.db_url)
        try:
            async with http_client(running.api_url, CLIENTS) as client:
                for row, explicit in runs:
                    tag = new_tag()
                    body = {"input": "Benchmark: reply with one short sentence.", "metadata": {"bench": tag}}
                    if explicit:
                        body["specialist"] = SPECIALIST
                    async with bounded(row, limit):
                        first_submit = time.time()
                        submitted = await submit_many(client, total, CLIENTS, body)
                        if submitted.errors:
                            row.note = f"submit retries/errors {submitted.error_note()}"
                        await wait_for(conn, db.db_schema, tag, TERMINAL, submitted.ok, row, first_submit)
                        summarise_e2e(row, await task_times(conn, db.db_schema, tag), first_submit)
                        finish(row)
        finally:
            await conn.close()


SCENARIO = Scenario(
    "noop",
    run,
    timeout_s=720,
    quick_timeout_s=180,
    smoke_timeout_s=60,
    describe="taskyard end to end, instant work, explicit specialist and LLM routing",
)

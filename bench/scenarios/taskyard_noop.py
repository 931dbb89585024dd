"""Scenario 3: taskyard end to end with instant work, over HTTP, through both queues and the store.

N tasks are POSTed by closed-loop keep-alive clients to one API process, from the lean load generator in a
process of its own (``bench.http_load``, as the submit scenario: an in-process ``httpx`` client cost about as
much CPU per request as the API, on the same two cores);
one broker agent and one worker (a specialist with no tools and one call to the dev LLM, which answers at
once) do the rest. Time runs from the first POST to the last ``finished_at``; latency is each task's
``created_at`` to ``finished_at``. Twice: with an explicit specialist (routing skipped) and with LLM routing
(the broker agent asks the dev LLM).
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import asyncpg

from bench.http_load import LoadSpec, run_in_process
from bench.infra import Context, taskyard_namespace
from bench.runner import Rows, Scenario, bounded, finish
from bench.taskyard import (
    TERMINAL,
    cluster,
    devllm,
    new_tag,
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
            api = urlsplit(running.api_url)
            for row, explicit in runs:
                tag = new_tag()
                body = {"input": "Benchmark: reply with one short sentence.", "metadata": {"bench": tag}}
                if explicit:
                    body["specialist"] = SPECIALIST
                spec = LoadSpec(
                    host=api.hostname or "127.0.0.1",
                    port=api.port or 80,
                    path="/v1/tasks",
                    body=json.dumps(body),
                    concurrency=CLIENTS,
                    seconds=limit,
                    warmup_seconds=0,
                    count=total,
                )
                async with bounded(row, limit):
                    first_submit = time.time()
                    submitted = await run_in_process(spec, timeout=limit + 30)
                    if submitted.errors:
                        errors = ", ".join(f"{k}: {v}" for k, v in sorted(submitted.errors.items()))
                        row.note = f"submit retries/errors {errors}"
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

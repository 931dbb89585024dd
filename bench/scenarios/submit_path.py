"""Scenario 5: the submit path alone: ``POST /v1/tasks`` against one API process, nothing consuming.

Closed-loop keep-alive clients (one pooled ``httpx.AsyncClient`` in the benchmark process, on the same
cores as the API: on a small machine the client's own CPU limits the figures) at increasing concurrency,
each level for a fixed time after a short warm-up. The intake queue fills (well below its max length).
"""

from __future__ import annotations

import time

from bench.infra import Context, taskyard_namespace
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import percentile
from bench.taskyard import Submitted, cluster, devllm, http_client, new_tag, submit_many, write_catalog

SPECIALIST = "noop"
LEVELS = (1, 8, 32, 64)
QUICK_LEVELS = (1, 8, 32)


async def run(ctx: Context, rows: Rows) -> None:
    levels = QUICK_LEVELS if ctx.quick else LEVELS
    seconds = 1.5 if ctx.quick else 8.0
    plan = [(rows.add(f"submit.c{c}", "5 submit path", f"{c} clients, {seconds:g} s", 0), c) for c in levels]
    log_dir = ctx.log_dir("submit")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: 1})
    async with (
        taskyard_namespace(ctx, "submit", [SPECIALIST]) as (amqp, db),
        devllm(log_dir) as llm,  # the launcher wants one; the API never calls it
        cluster(amqp, db, catalog, llm, log_dir) as running,
    ):
        await running.start_api()
        body = {
            "input": "Benchmark: submit only.",
            "specialist": SPECIALIST,
            "metadata": {"bench": new_tag()},
        }
        for row, clients in plan:
            async with http_client(running.api_url, clients) as client:
                await submit_many(client, 5 * clients, clients, body)  # warm-up: connections, caches
                result = Submitted()
                async with bounded(row, seconds + 30):
                    started = time.monotonic()
                    await submit_many(client, None, clients, body, until=started + seconds, result=result)
                    row.wall_s = time.monotonic() - started
                row.done = row.total = result.ok
                row.p50_ms = (percentile(result.latencies_s, 50) or 0) * 1000
                row.p99_ms = (percentile(result.latencies_s, 99) or 0) * 1000
                if result.errors:
                    row.note = f"refused {result.error_note()}"
                finish(row)


SCENARIO = Scenario(
    "submit",
    run,
    timeout_s=180,
    quick_timeout_s=90,
    describe="POST /v1/tasks alone at 1, 8, 32, 64 concurrent clients",
)

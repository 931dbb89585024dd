"""Scenario 6: a task group of N children and a reduce step, against the same N tasks submitted one by one.

The same cluster as the no-op scenario (one API, one broker agent, one worker of an instant specialist at
concurrency 100, the dev LLM answering at once). First the N single tasks: POSTed by 32 closed-loop
keep-alive clients (``bench.http_load`` in a process of its own), timed from the first POST to the last
``finished_at``. Then one ``POST /v1/task-groups`` with the same N inputs and a reduce step, timed from that
POST to the group's ``finished_at`` (its reduce task ended): the children's fan-out, their runs, the
settlement after each, and the reduce step created, routed, queued and run on N outcomes. The group row's
notes give its wall time as a ratio of the singles' and the reduce latency (last child's end to the
group's end).
"""

from __future__ import annotations

import asyncio
import json
import time
from urllib.parse import urlsplit

import asyncpg
import httpx

from bench.http_load import LoadSpec, run_in_process
from bench.infra import Context, taskyard_namespace
from bench.report import Row, fmt
from bench.runner import Rows, Scenario, bounded, finish
from bench.stats import ratio
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
WORKER_CONCURRENCY = 100
INPUT = "Benchmark: reply with one short sentence."
GROUP_STATUSES = ("completed", "failed", "cancelled")


async def _singles(conn: asyncpg.Connection, schema: str, api_url: str, row: Row, limit: float) -> None:
    tag = new_tag()
    api = urlsplit(api_url)
    body = {"input": INPUT, "specialist": SPECIALIST, "metadata": {"bench": tag}}
    spec = LoadSpec(
        host=api.hostname or "127.0.0.1",
        port=api.port or 80,
        path="/v1/tasks",
        body=json.dumps(body),
        concurrency=CLIENTS,
        seconds=limit,
        warmup_seconds=0,
        count=row.total,
    )
    async with bounded(row, limit):
        first_submit = time.time()
        submitted = await run_in_process(spec, timeout=limit + 30)
        if submitted.errors:
            row.note = "submit retries/errors " + ", ".join(
                f"{k}: {v}" for k, v in sorted(submitted.errors.items())
            )
        await wait_for(conn, schema, tag, TERMINAL, submitted.ok, row, first_submit)
        summarise_e2e(row, await task_times(conn, schema, tag), first_submit)
        finish(row)


async def _group(
    conn: asyncpg.Connection, schema: str, api_url: str, row: Row, children: int, limit: float
) -> None:
    tag = new_tag()
    body = {
        "tasks": [
            {"input": INPUT, "specialist": SPECIALIST, "metadata": {"bench": tag}} for _ in range(children)
        ],
        "reduce": {"specialist": SPECIALIST, "instructions": "Count the completed results."},
        "metadata": {"bench": tag},
    }
    async with bounded(row, limit), httpx.AsyncClient(base_url=api_url, timeout=60) as client:
        first_submit = time.time()
        response = await client.post("/v1/task-groups", json=body)
        if response.status_code != 202:
            row.status = f"error: POST {response.status_code}"
            row.note = response.text[:200]
            return
        group_id = response.json()["id"]
        row.extra["accept_s"] = time.time() - first_submit
        while True:
            group = await conn.fetchrow(
                f'SELECT status, finished_at FROM "{schema}".task_groups WHERE id = $1::uuid', group_id
            )
            row.done = await conn.fetchval(
                f"SELECT count(*) FROM \"{schema}\".tasks WHERE group_id = $1::uuid AND status = 'completed'",
                group_id,
            )
            row.wall_s = time.time() - first_submit
            if group is not None and group["status"] in GROUP_STATUSES:
                break
            await asyncio.sleep(0.2)
        summarise_e2e(row, await task_times(conn, schema, tag), first_submit)
        # The group ends with its reduce task: its end is the group's.
        row.wall_s = group["finished_at"].timestamp() - first_submit
        last_child = await conn.fetchval(
            f"SELECT max(finished_at) FROM \"{schema}\".tasks WHERE group_id = $1::uuid AND group_role = 'child'",
            group_id,
        )
        row.extra["reduce_latency_s"] = (group["finished_at"] - last_child).total_seconds()
        if group["status"] != "completed":
            row.status = f"group {group['status']}"
            return
        finish(row)


async def run(ctx: Context, rows: Rows) -> None:
    total = ctx.pick(1_000, 200, 10)
    limit = ctx.pick(300, 90, 40)
    singles = rows.add(
        "group.singles", "6 workflow group", f"{total:,} single POST /v1/tasks, {CLIENTS} clients", total
    )
    group = rows.add(
        "group.group", "6 workflow group", f"one POST /v1/task-groups: {total:,} children + reduce", total + 1
    )
    log_dir = ctx.log_dir("group")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: WORKER_CONCURRENCY})
    async with (
        taskyard_namespace(ctx, "group", [SPECIALIST]) as (amqp, db),
        devllm(log_dir) as llm,
        cluster(amqp, db, catalog, llm, log_dir) as running,
    ):
        await running.start_api()
        await running.start_broker_agent()
        await running.start_worker(SPECIALIST)
        conn = await asyncpg.connect(ctx.db_url)
        try:
            await _singles(conn, db.db_schema, running.api_url, singles, limit)
            await _group(conn, db.db_schema, running.api_url, group, total, limit)
        finally:
            await conn.close()
    value = ratio(group.wall_s, singles.wall_s)
    if value is not None:
        group.extra["ratio_to_singles"] = value
    notes = [
        f"{fmt(value)}x the singles' wall time",
        f"accepted in {fmt(group.extra.get('accept_s'))} s",
        f"reduce latency {fmt(group.extra.get('reduce_latency_s'))} s",
    ]
    group.note = "; ".join([*notes, *([group.note] if group.note else [])])


SCENARIO = Scenario(
    "group",
    run,
    timeout_s=720,
    quick_timeout_s=240,
    smoke_timeout_s=90,
    describe="a task group of 1,000 children and a reduce step vs 1,000 single submissions",
)

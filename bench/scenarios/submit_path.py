"""Scenario 5: the submit path alone: ``POST /v1/tasks`` against one API process, nothing consuming.

The load comes from ``bench.http_load``: bare keep-alive HTTP/1.1 connections in a process of their own,
costing a small fraction of the API's CPU per request (each row's note gives both). Three parts, each
measurement after a short warm-up:

1. closed loop at 1, 8, 32 and 64 clients: what the API sustains at each concurrency;
2. open loop at rising fixed rates, stopping at the first rate the API does not keep up with (p99 at or
   above 50 ms, fewer answers than requests due, or refusals): the sustainable rate of the issue's target,
   latencies counted from when each request was due;
3. the closed loop at 32 clients again while 500 Server-Sent Events streams are open on the same API
   process (``bench.sse_streams``, another process: one stream per task, submitted first and never
   consumed, so every stream stays open), measured once they settled: what watching clients cost the
   submit path;
4. the production default: authentication on (a submitter key) and the per-tenant rate limit on (set far
   above the offered load, so the bucket is taken on every request but never refuses), closed loop at 32
   clients and open loop at the sustainable rate found in part 2.

The intake queue fills (well below its max length) since nothing consumes it.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path

import httpx

from bench.http_load import LoadResult, LoadSpec, run_in_process
from bench.infra import Context, taskyard_namespace
from bench.report import Row
from bench.runner import Rows, Scenario, bounded, finish
from bench.sse_streams import StreamHolder, StreamSpec
from bench.stats import percentile
from bench.taskyard import cluster, devllm, new_tag, write_catalog
from taskyard_common.settings import DbSettings
from taskyard_common.store.keys import KeyStore, Role
from taskyard_devkit.process import Service

SPECIALIST = "noop"
LEVELS = (1, 8, 32, 64)
QUICK_LEVELS = (1, 8, 32)
RATES = (250, 500, 750, 1000, 1250, 1500, 2000)
QUICK_RATES = (250, 500)
SMOKE_LEVELS = (1, 8)
SMOKE_RATES = (100,)
OPEN_CONNECTIONS = 64
AUTH_CLIENTS = 32
STREAM_CLIENTS = 32
STREAMS, QUICK_STREAMS, SMOKE_STREAMS = 500, 100, 20
# The API binds each watched task on the events exchange in the background (one broker round trip each):
# the row measures the open streams, not their opening.
STREAMS_SETTLE_SECONDS = 2.0
P99_LIMIT_MS = 50.0
# Part 3's rate limit: far above anything one API process answers, so it never refuses.
AUTH_ENV = {
    "TASKYARD_API_AUTH_ENABLED": "true",
    "TASKYARD_API_RATE_LIMIT_PER_SECOND": "1000000",
    "TASKYARD_API_RATE_LIMIT_BURST": "1000000",
    "TASKYARD_API_READ_RATE_LIMIT_PER_SECOND": "1000000",
    "TASKYARD_API_READ_RATE_LIMIT_BURST": "1000000",
}


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux); None when unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


async def _measure(row: Row, spec: LoadSpec, api: Service) -> LoadResult | None:
    """Run one load against the API and fill ``row``; None when it ran past its limit."""
    result: LoadResult | None = None
    before = _cpu_seconds(api.proc.pid)
    async with bounded(row, spec.warmup_seconds + spec.seconds + 30):
        result = await run_in_process(spec, timeout=spec.warmup_seconds + spec.seconds + 25)
    if result is None:
        return None
    after = _cpu_seconds(api.proc.pid)
    row.done = row.total = result.ok
    row.wall_s = result.wall_s
    row.p50_ms = (percentile(result.latencies_s, 50) or 0) * 1000
    row.p99_ms = (percentile(result.latencies_s, 99) or 0) * 1000
    # CPU per request over warm-up and window alike (both served requests at the same pace).
    served = result.ok * (1 + spec.warmup_seconds / spec.seconds)
    notes = []
    if before is not None and after is not None and served:
        row.extra["api_cpu_ms"] = (after - before) / served * 1000
        notes.append(f"API {row.extra['api_cpu_ms']:.2f} ms CPU/req")
    if served:
        row.extra["loadgen_cpu_ms"] = result.cpu_s / served * 1000
        notes.append(f"load gen {row.extra['loadgen_cpu_ms']:.2f}")
    if result.errors:
        notes.append("refused " + ", ".join(f"{k}: {v}" for k, v in sorted(result.errors.items())))
    if result.unsent:
        notes.append(f"{result.unsent} due but unsent")
    row.note = "; ".join(notes)
    finish(row)
    return result


def _keeps_up(row: Row, result: LoadResult | None, rate: float) -> bool:
    return (
        result is not None
        and row.ok
        and not result.errors
        and not result.unsent
        and result.ok >= 0.97 * rate * result.wall_s
        and row.p99_ms is not None
        and row.p99_ms < P99_LIMIT_MS
    )


async def _streams_open(port: int) -> int:
    """The API's own count of open event streams (``taskyard_event_streams_open``)."""
    async with httpx.AsyncClient(timeout=10) as client:
        text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    for line in text.splitlines():
        if line.startswith("taskyard_event_streams_open "):
            return int(float(line.split()[1]))
    return 0


async def _measure_with_streams(row: Row, spec: LoadSpec, api: Service, streams: int) -> None:
    """``spec`` while ``streams`` event streams are open on the API; the row fails unless every stream
    was open on the API's side and stayed open throughout."""
    holder = await StreamHolder.start(
        StreamSpec(host=spec.host, port=spec.port, streams=streams, body=spec.body, headers=spec.headers)
    )
    try:
        await asyncio.sleep(STREAMS_SETTLE_SECONDS)
        seen_by_api = await _streams_open(spec.port)
        await _measure(row, spec, api)
    finally:
        held = await holder.close()
    opened = holder.opened
    row.note = "; ".join(
        [
            f"{opened.opened} streams open (API: {seen_by_api}), opened in {opened.open_s:.1f} s",
            *([row.note] if row.note else []),
        ]
    )
    if opened.opened < streams or seen_by_api < streams or held.ended_early:
        problems = [f"{k}: {v}" for k, v in sorted(opened.errors.items())]
        if held.ended_early:
            problems.append(f"{held.ended_early} ended early")
        row.status = "error: streams " + (", ".join(problems) or "not all open")


async def _new_key(db: DbSettings) -> str:
    keys = await KeyStore.open(db)
    try:
        _, key = await keys.create(tenant="bench", role=Role.SUBMITTER, name="submit bench")
    finally:
        await keys.close()
    return key


async def run(ctx: Context, rows: Rows) -> None:
    levels, rates = ctx.pick((LEVELS, RATES), (QUICK_LEVELS, QUICK_RATES), (SMOKE_LEVELS, SMOKE_RATES))
    seconds, warmup = ctx.pick((5.0, 1.0), (1.5, 0.5), (0.5, 0.2))
    log_dir = ctx.log_dir("submit")
    catalog = write_catalog(log_dir / "catalog.yaml", {SPECIALIST: 1})
    body = json.dumps(
        {"input": "Benchmark: submit only.", "specialist": SPECIALIST, "metadata": {"bench": new_tag()}}
    )
    async with (
        taskyard_namespace(ctx, "submit", [SPECIALIST]) as (amqp, db),
        devllm(log_dir) as llm,  # the launcher wants one; the API never calls it
        cluster(amqp, db, catalog, llm, log_dir) as running,
    ):
        api = await running.start_api()
        port = int(running.api_url.rsplit(":", 1)[1])
        base = LoadSpec(
            host="127.0.0.1",
            port=port,
            path="/v1/tasks",
            body=body,
            concurrency=1,
            seconds=seconds,
            warmup_seconds=warmup,
        )
        for clients in levels:
            row = rows.add(f"submit.c{clients}", "5 submit path", f"{clients} clients, closed loop", 0)
            await _measure(row, replace(base, concurrency=clients), api)

        streams = ctx.pick(STREAMS, QUICK_STREAMS, SMOKE_STREAMS)
        row = rows.add(
            f"submit.streams.c{STREAM_CLIENTS}",
            "5 submit path",
            f"{STREAM_CLIENTS} clients, closed loop, {streams} SSE streams open",
            0,
        )
        await _measure_with_streams(row, replace(base, concurrency=STREAM_CLIENTS), api, streams)

        sustained: float | None = None
        for rate in rates:
            row = rows.add(
                f"submit.open.r{rate}",
                "5 submit path",
                f"open loop {rate:,}/s, {OPEN_CONNECTIONS} conns",
                0,
            )
            result = await _measure(row, replace(base, concurrency=OPEN_CONNECTIONS, rate=rate), api)
            if not _keeps_up(row, result, rate):
                break
            sustained = rate

        api.stop()
        api = await running.start_api(**AUTH_ENV)
        auth = replace(
            base,
            port=int(running.api_url.rsplit(":", 1)[1]),
            headers={"Authorization": f"Bearer {await _new_key(db)}"},
        )
        row = rows.add(
            f"submit.auth.c{AUTH_CLIENTS}",
            "5 submit path",
            f"auth + rate limit, {AUTH_CLIENTS} clients, closed loop",
            0,
        )
        await _measure(row, replace(auth, concurrency=AUTH_CLIENTS), api)
        if sustained is not None:
            row = rows.add(
                f"submit.auth.r{sustained:g}",
                "5 submit path",
                f"auth + rate limit, open loop {sustained:,g}/s",
                0,
            )
            await _measure(row, replace(auth, concurrency=OPEN_CONNECTIONS, rate=sustained), api)


SCENARIO = Scenario(
    "submit",
    run,
    timeout_s=240,
    quick_timeout_s=90,
    smoke_timeout_s=60,
    describe="POST /v1/tasks alone: closed loop at 1, 8, 32, 64 clients, at 32 with 500 SSE streams open, open "
    "loop at rising rates until p99 reaches 50 ms, then with auth and rate limit on; the load from a separate "
    "lean process",
)

"""Driving a taskyard cluster from the benchmark: catalog, dev LLM, HTTP load, completion from the store.

Completion is read from the task store directly (one indexed-enough count per poll), never by polling every
task over HTTP, so the measurement does not load the API it measures. Latencies come from the task rows'
own ``created_at`` / ``started_at`` / ``finished_at``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import yaml

from bench.report import Row
from bench.stats import percentile
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm, start_devllm
from taskyard_devkit.readiness import wait_http_ok

TERMINAL = ["completed", "failed", "dead_lettered", "cancelled"]
# Explicit in the bench environment whatever the defaults become: the API is measured without auth or a
# rate limit (TASKYARD_API_AUTH_ENABLED=false is also the launcher's own setting).
BENCH_API_ENV = {
    "TASKYARD_API_AUTH_ENABLED": "false",
    "TASKYARD_API_RATE_LIMIT_PER_SECOND": "0",
    "TASKYARD_API_RATE_LIMIT_BURST": "0",
    "TASKYARD_API_READ_RATE_LIMIT_PER_SECOND": "0",
}


def write_catalog(
    path: Path, specialists: dict[str, int], models: list[dict[str, Any]] | None = None
) -> Path:
    """A catalog of instant specialists (no tools, one LLM call), ``name -> concurrency``; ``models``: its
    ``models`` entries."""
    catalog: dict[str, Any] = {
        "apiVersion": "taskyard.dev/v1alpha1",
        "kind": "SpecialistCatalog",
        "fallback": next(iter(specialists)),
        "specialists": [
            {
                "name": name,
                "description": f"Benchmark specialist {name}: answers any request with one model call.",
                "keywords": [name, "benchmark"],
                "instructions": "Reply with one short sentence.",
                "tools": [],
                "max_steps": 1,
                "timeout_seconds": 120,
                "max_attempts": 1,
                "concurrency": concurrency,
            }
            for name, concurrency in specialists.items()
        ],
    }
    if models:
        catalog["models"] = models
    path.write_text(yaml.safe_dump(catalog, sort_keys=False))
    return path


@asynccontextmanager
async def devllm(
    log_dir: Path, latency_seconds: float = 0.0, rpm: int | None = None
) -> AsyncIterator[DevLlm]:
    service, llm = start_devllm(log_dir, latency_seconds=latency_seconds, rpm=rpm)
    try:
        await wait_http_ok(llm.health_url, service, timeout=30)
        yield llm
    finally:
        service.stop()


@asynccontextmanager
async def cluster(
    amqp: AmqpSettings, db: DbSettings, catalog_path: Path, llm: DevLlm, log_dir: Path
) -> AsyncIterator[Cluster]:
    running = Cluster(amqp, db, catalog_path, llm, log_dir)
    running.env.update(BENCH_API_ENV)
    try:
        yield running
    finally:
        running.stop_all()


@dataclass
class Submitted:
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_s: list[float] = field(default_factory=list)

    def error_note(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(self.errors.items()))


def http_client(base_url: str, concurrency: int) -> httpx.AsyncClient:
    """One pooled keep-alive client: ``concurrency`` connections, so connection setup is not measured."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30)


async def submit_many(
    client: httpx.AsyncClient,
    count: int | None,
    concurrency: int,
    body: dict[str, Any],
    *,
    until: float | None = None,
    result: Submitted | None = None,
) -> Submitted:
    """POST ``body`` ``count`` times (or until the monotonic time ``until``) from ``concurrency`` closed-loop
    clients. A 503/429 is retried after a short pause, as a careful client would, and counted."""
    result = result if result is not None else Submitted()
    numbers = itertools.count()

    async def one_client() -> None:
        while (count is None or next(numbers) < count) and (until is None or time.monotonic() < until):
            while True:
                started = time.perf_counter()
                try:
                    response = await client.post("/v1/tasks", json=body)
                    code = str(response.status_code)
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                if code == "202":
                    result.ok += 1
                    result.latencies_s.append(time.perf_counter() - started)
                    break
                result.errors[code] = result.errors.get(code, 0) + 1
                if code not in ("503", "429"):
                    break
                await asyncio.sleep(0.2)

    await asyncio.gather(*(one_client() for _ in range(concurrency)))
    return result


def _table(schema: str) -> str:
    return f'"{schema}".tasks'


async def count_status(conn: asyncpg.Connection, schema: str, tag: str, statuses: list[str]) -> int:
    return await conn.fetchval(
        f"SELECT count(*) FROM {_table(schema)} WHERE status = ANY($1) AND metadata->>'bench' = $2",
        statuses,
        tag,
    )


async def wait_for(
    conn: asyncpg.Connection,
    schema: str,
    tag: str,
    statuses: list[str],
    expected: int,
    row: Row | None = None,
    started: float | None = None,
) -> None:
    """Poll the store until ``expected`` tasks of the run are in ``statuses``; keeps ``row`` current."""
    while True:
        done = await count_status(conn, schema, tag, statuses)
        if row is not None:
            row.done = done
            if started is not None:
                row.wall_s = time.time() - started
        if done >= expected:
            return
        await asyncio.sleep(0.2)


@dataclass
class TaskTimes:
    status: str
    created: float
    started: float | None
    finished: float | None
    # Why it did not complete: the error's type (failed) or the dead letter's reason; None otherwise.
    why: str | None = None


async def task_times(conn: asyncpg.Connection, schema: str, tag: str) -> list[TaskTimes]:
    records = await conn.fetch(
        "SELECT status, created_at, started_at, finished_at,"
        " COALESCE(error->>'type', dead_letter->>'reason') AS why"
        f" FROM {_table(schema)} WHERE metadata->>'bench' = $1",
        tag,
    )
    return [
        TaskTimes(
            r["status"],
            r["created_at"].timestamp(),
            r["started_at"].timestamp() if r["started_at"] else None,
            r["finished_at"].timestamp() if r["finished_at"] else None,
            r["why"],
        )
        for r in records
    ]


def summarise_e2e(row: Row, times: list[TaskTimes], first_submit: float) -> None:
    """Fill ``row`` from the task rows: wall time from the first submit to the last completion, latency
    from each task's ``created_at`` to its ``finished_at``."""
    completed = [t for t in times if t.status == "completed" and t.finished is not None]
    row.done = len(completed)
    if completed:
        row.wall_s = max(t.finished for t in completed if t.finished) - first_submit
        latencies = [(t.finished or 0) - t.created for t in completed]
        row.p50_ms = _ms(percentile(latencies, 50))
        row.p99_ms = _ms(percentile(latencies, 99))
    others = Counter(f"{t.status} ({t.why})" if t.why else t.status for t in times if t.status != "completed")
    if others:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(others.items()))
        row.note = (row.note + "; " if row.note else "") + f"{sum(others.values())} not completed: {kinds}"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def new_tag() -> str:
    return uuid.uuid4().hex[:12]

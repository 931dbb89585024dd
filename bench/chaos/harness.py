"""What every chaos scenario does: a taskyard cluster of real processes on the scenario's own broker and
database, a steady stream of submissions over HTTP, the fault, and the count of what came out.

Each task's input names it (``chaos <scenario> <n> <tag>``), so the development model server's per-conversation
counters tell how often each task asked for a final answer. Figures:

- **lost**: accepted tasks (a ``202``) that did not end as expected (completed; dead-lettered for poison)
  once the run drained, or are not in the store at all;
- **duplicates**: tasks completed more than once as clients can see it (more than one ``completed`` event in
  the task's history) or whose stored result differs from every answer the model gave it;
- **re-asked**: tasks whose conversation got more than one final answer from the model (a worker killed
  between the answer and its record): work done twice, not a result seen twice; stated in the notes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import yaml

from bench.chaos import server_errors
from bench.infra import Context, taskyard_namespace
from bench.taskyard import BENCH_API_ENV
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.process import Service

log = logging.getLogger("chaos")

TERMINAL = ("completed", "failed", "dead_lettered", "cancelled")
SPECIALIST = "general"


@dataclass
class Outcome:
    """One row of the table."""

    scenario: str
    tasks: int = 0  # accepted
    lost: int | None = None
    duplicates: int | None = None
    recover_s: float | None = None  # the fault's end (or the fault, when it has no end) to service again
    drain_s: float | None = None  # the fault's end to every accepted task terminal
    notes: list[str] = field(default_factory=list)
    failed: str | None = None  # why the scenario could not finish (a timeout, an error)

    def note(self, text: str) -> None:
        self.notes.append(text)

    @property
    def ok(self) -> bool:
        return self.failed is None and self.lost == 0 and self.duplicates == 0


def write_catalog(path: Path, *, concurrency: int, max_attempts: int = 1, llm_retries: int = 2) -> Path:
    catalog = {
        "apiVersion": "taskyard.dev/v1alpha1",
        "kind": "SpecialistCatalog",
        "fallback": SPECIALIST,
        "specialists": [
            {
                "name": SPECIALIST,
                "description": "Chaos specialist: answers any request with one model call.",
                "keywords": ["chaos"],
                "instructions": "Reply with one short sentence.",
                "tools": [],
                "max_steps": 1,
                "timeout_seconds": 120,
                "max_attempts": max_attempts,
                "backoff_base_seconds": 1,
                "backoff_max_seconds": 10,
                "llm_retries": llm_retries,
                "concurrency": concurrency,
            }
        ],
    }
    path.write_text(yaml.safe_dump(catalog, sort_keys=False))
    return path


@dataclass
class Submissions:
    """Every answer the API gave, in order: (monotonic time, status code or error name)."""

    accepted: dict[str, str] = field(default_factory=dict)  # task id -> input
    answers: list[tuple[float, str]] = field(default_factory=list)
    accept_latencies: list[float] = field(default_factory=list)  # seconds each 202 took
    missing_retry_after: int = 0

    def accept_latency(self, quantile: float) -> float | None:
        ordered = sorted(self.accept_latencies)
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))] if ordered else None

    def count(self, code: str) -> int:
        return sum(1 for _, c in self.answers if c == code)

    def longest_refusal(self, after: float) -> float | None:
        """The longest stretch after ``after`` between two accepted submissions with refusals between."""
        longest, last_ok, refused = None, None, False
        for at, code in self.answers:
            if code == "202":
                if last_ok is not None and refused and at >= after:
                    gap = at - last_ok
                    longest = gap if longest is None else max(longest, gap)
                last_ok, refused = at, False
            else:
                refused = True
        return longest


class ChaosRun:
    """One scenario's cluster, its submissions and its measurements."""

    def __init__(
        self, name: str, cluster: Cluster, llm: DevLlm, amqp: AmqpSettings, db: DbSettings, tag: str
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.llm = llm
        self.amqp = amqp
        self.db = db
        self.tag = tag
        self.workers: list[Service] = []
        self.api: Service | None = None
        self.submissions = Submissions()
        self._numbers = 0

    async def start(
        self, *, workers: int, worker_env: dict[str, str] | None = None, **agent_env: str
    ) -> None:
        # Together: each process takes seconds to import and connect on a busy machine.
        self.api, *_ = await asyncio.gather(
            self.cluster.start_api(),
            self.cluster.start_broker_agent(**agent_env),
            *(self.add_worker(**(worker_env or {})) for _ in range(workers)),
        )

    async def add_worker(self, **env: str) -> Service:
        worker = await self.cluster.start_worker(SPECIALIST, **env)
        self.workers.append(worker)
        return worker

    def text(self, marker: str = "") -> str:
        self._numbers += 1
        return f"chaos {self.name} {self._numbers} {self.tag}{marker}"

    async def submit(
        self,
        count: int,
        *,
        concurrency: int = 8,
        per_second: float | None = None,
        marker_every: tuple[int, str] | None = None,
        give_up_after: float = 300,
    ) -> None:
        """Submit ``count`` tasks (``per_second``: paced); a ``503``/``429`` is retried after its Retry-After
        (at most 1 s), as a careful client does; every answer is recorded. ``marker_every`` (n, text): every
        n-th input ends with ``text``."""
        numbers = iter(range(count))
        interval = None if per_second is None else concurrency / per_second
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=self.cluster.api_url, timeout=10, limits=limits) as client:

            async def one_client() -> None:
                for i in numbers:
                    marker = ""
                    if marker_every is not None and i % marker_every[0] == marker_every[0] - 1:
                        marker = marker_every[1]
                    text = self.text(marker)
                    give_up = time.monotonic() + give_up_after
                    started = time.monotonic()
                    while time.monotonic() < give_up:
                        if await self._submit_one(client, text):
                            break
                    if interval is not None:
                        await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

            await asyncio.gather(*(one_client() for _ in range(concurrency)))

    async def _submit_one(self, client: httpx.AsyncClient, text: str) -> bool:
        body = {"input": text, "specialist": SPECIALIST, "metadata": {"chaos": self.tag}}
        sent = time.monotonic()
        try:
            response = await client.post("/v1/tasks", json=body)
            code = str(response.status_code)
        except httpx.HTTPError as exc:
            response, code = None, type(exc).__name__
        self.submissions.answers.append((time.monotonic(), code))
        if response is not None and code == "202":
            self.submissions.accepted[response.json()["id"]] = text
            self.submissions.accept_latencies.append(time.monotonic() - sent)
            return True
        wait = 0.5
        if response is not None and code in ("503", "429"):
            retry_after = response.headers.get("retry-after")
            if retry_after is None:
                self.submissions.missing_retry_after += 1
            else:
                wait = min(1.0, float(retry_after))
        await asyncio.sleep(wait)
        return False

    @asynccontextmanager
    async def store(self) -> AsyncIterator[asyncpg.Connection]:
        conn = await asyncpg.connect(
            self.db.url.get_secret_value(), server_settings={"search_path": self.db.db_schema}
        )
        try:
            yield conn
        finally:
            await conn.close()

    async def statuses(self) -> dict[str, int]:
        """Tasks of the run per status (waits for the database while it is away)."""
        while True:
            try:
                async with self.store() as conn:
                    rows = await conn.fetch(
                        "SELECT status, count(*) AS n FROM tasks WHERE metadata->>'chaos' = $1 GROUP BY status",
                        self.tag,
                    )
                return {r["status"]: r["n"] for r in rows}
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await asyncio.sleep(0.5)

    async def drain(self, timeout: float) -> float | None:
        """Wait until every accepted task is terminal; the seconds it took, None at the timeout."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            counts = await self.statuses()
            if sum(counts.get(s, 0) for s in TERMINAL) >= len(self.submissions.accepted):
                return time.monotonic() - started
            await asyncio.sleep(0.5)
        return None

    async def judge(self, outcome: Outcome, expected: dict[str, str] | None = None) -> None:
        """Fill lost and duplicates; ``expected``: the status a task must end in (default ``completed``)."""
        expected = expected or {}
        accepted = self.submissions.accepted
        outcome.tasks = len(accepted)
        async with self.store() as conn:
            rows = await conn.fetch(
                "SELECT id::text, status, result->>'output' AS output FROM tasks WHERE metadata->>'chaos' = $1",
                self.tag,
            )
            completions = await conn.fetch(
                "SELECT e.task_id::text, count(*) AS n FROM task_events e JOIN tasks t ON t.id = e.task_id"
                " WHERE t.metadata->>'chaos' = $1 AND e.type = 'completed' GROUP BY e.task_id",
                self.tag,
            )
        stored = {r["id"]: r for r in rows}
        wrong = [
            t for t in accepted if t not in stored or stored[t]["status"] != expected.get(t, "completed")
        ]
        outcome.lost = len(wrong)
        by_status: dict[str, int] = {}
        for task_id in wrong:
            status = stored[task_id]["status"] if task_id in stored else "missing"
            by_status[status] = by_status.get(status, 0) + 1
        if wrong:
            outcome.note("not as expected: " + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())))
        twice = {r["task_id"] for r in completions if r["n"] > 1}
        _, answers = await self.llm.conversations(self.cluster.model)
        completed = [t for t in accepted if t in stored and stored[t]["status"] == "completed"]
        # A stored result no answer of the model produced for that task would be a result from elsewhere.
        unanswered = {t for t in completed if answers.get(accepted[t][:200], 0) == 0}
        outcome.duplicates = len(twice | unanswered)
        re_asked = sum(1 for t in accepted if answers.get(accepted[t][:200], 0) > 1)
        if re_asked:
            outcome.note(
                f"{re_asked} got a second final answer from the model (work redone after the fault), each completed once"
            )
        refused: dict[str, int] = {}
        for _, code in self.submissions.answers:
            if code != "202":
                refused[code] = refused.get(code, 0) + 1
        if refused:
            outcome.note(
                "API answers besides 202: " + ", ".join(f"{n}x {c}" for c, n in sorted(refused.items()))
            )
        # A 5xx other than a 503 is a defect: what the API logged for it goes to the suite's log and the notes.
        if self.api is not None and any(c.startswith("5") and c != "503" for c in refused):
            outcome.note(server_errors.report(self.api.log_path) or "the API logged no unhandled error")
        if self.submissions.missing_retry_after:
            outcome.note(f"{self.submissions.missing_retry_after} refusals without Retry-After")

    def kill_random_worker(self, rng: random.Random) -> Service | None:
        alive = [w for w in self.workers if w.proc.poll() is None]
        if not alive:
            return None
        victim = rng.choice(alive)
        self.cluster.kill(victim)
        self.workers.remove(victim)
        return victim


@asynccontextmanager
async def chaos_run(
    ctx: Context,
    name: str,
    *,
    llm: DevLlm,
    concurrency: int,
    max_attempts: int = 1,
    delivery_limit: int = 5,
    amqp_url: str | None = None,
    db_url: str | None = None,
) -> AsyncIterator[ChaosRun]:
    """A cluster of the scenario's own (queue prefix, schema; on ``amqp_url`` / ``db_url`` when given),
    stopped and removed afterwards."""
    scoped = dataclasses.replace(ctx, amqp_url=amqp_url or ctx.amqp_url, db_url=db_url or ctx.db_url)
    log_dir = ctx.log_dir(name)
    catalog = write_catalog(log_dir / "catalog.yaml", concurrency=concurrency, max_attempts=max_attempts)
    async with taskyard_namespace(scoped, name, [SPECIALIST]) as (amqp, db):
        amqp = amqp.model_copy(update={"delivery_limit": delivery_limit})
        cluster = Cluster(amqp, db, catalog, llm, log_dir)
        cluster.env.update(BENCH_API_ENV)
        cluster.env["TASKYARD_LOG_LEVEL"] = "WARNING"
        # Processes started together on a shared, busy machine: a minute is not always enough to import.
        cluster.ready_timeout = 300
        run = ChaosRun(name, cluster, llm, amqp, db, ctx.run_id + name)
        try:
            yield run
        finally:
            with contextlib.suppress(Exception):
                cluster.stop_all()


def fmt_s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


def describe(values: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in values.items())

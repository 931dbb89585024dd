"""Scenarios 5 and 6: bad work and a bad model (poison tasks that kill their worker; a slow model, then one
that answers nothing but errors for a while)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from bench.chaos.harness import ChaosRun, Outcome, chaos_run
from bench.chaos.nodes import rabbit_node
from bench.infra import Context
from bench.memory import TreeMemory
from taskyard_devkit import procfs
from taskyard_devkit.devllm import DevLlm

POISON = " POISON"
SLOW = " SLOW"
WORKER_ENV = {"TASKYARD_WORKER_LEASE_SECONDS": "3"}


@dataclass(frozen=True)
class HealthyRun:
    """The healthy tasks of a run, on the database's clock: how many completed, over how long from the first
    acceptance to the last completion (``span``), of which the acceptances took ``accepting``."""

    completed: int
    span: float
    accepting: float

    @property
    def rate(self) -> float | None:
        return self.completed / self.span if self.completed and self.span > 0 else None

    latency_p50: float | None = None  # of the submissions that were accepted (202), seconds
    latency_p99: float | None = None

    def describe(self) -> str:
        latency = ""
        if self.latency_p50 is not None and self.latency_p99 is not None:
            latency = f", submit p50 {self.latency_p50 * 1000:.0f} ms p99 {self.latency_p99 * 1000:.0f} ms"
        return f"accepted over {self.accepting:.1f} s{latency}, last done {self.span - self.accepting:.1f} s later"


async def _healthy_run(run: ChaosRun) -> HealthyRun:
    """Healthy tasks completed per second: first submission to last healthy completion (database clock)."""
    async with run.store() as conn:
        row = await conn.fetchrow(
            "SELECT count(*) AS n, extract(epoch FROM max(finished_at) - min(created_at)) AS span,"
            " extract(epoch FROM max(created_at) - min(created_at)) AS accepting FROM tasks"
            " WHERE metadata->>'chaos' = $1 AND status = 'completed' AND input::text NOT LIKE $2",
            run.tag,
            f"%{POISON.strip()}%",
        )
    return HealthyRun(
        int(row["n"]),
        float(row["span"] or 0),
        float(row["accepting"] or 0),
        run.submissions.accept_latency(0.5),
        run.submissions.accept_latency(0.99),
    )


# What a worker logs when it moves a task to the quarantine queue (crashes.py).
_QUARANTINED = re.compile(r"task ([0-9a-f-]{36}): [^;\n]*; moved to the quarantine queue")


def _quarantined(run: ChaosRun) -> set[str]:
    """The tasks the workers moved to the quarantine queue, read from their logs."""
    moved: set[str] = set()
    for path in run.cluster.log_dir.glob("worker-*.log"):
        with contextlib.suppress(OSError):
            moved.update(_QUARANTINED.findall(path.read_text(errors="replace")))
    return moved


# What a worker's supervisor logs when a child it forked again consumes (supervisor.py).
_RESTARTED = re.compile(r"worker child \d+ consuming, ([0-9.]+) s after its predecessor died")


def _restart_times(run: ChaosRun) -> list[float]:
    """How long each restarted worker child took to consume again, from its predecessor's death."""
    times: list[float] = []
    for path in run.cluster.log_dir.glob("worker-*.log"):
        with contextlib.suppress(OSError):
            times += [float(t) for t in _RESTARTED.findall(path.read_text(errors="replace"))]
    return sorted(times)


async def poison_tasks(ctx: Context, out: Outcome, llm: DevLlm) -> None:
    """5: one task in twenty kills the worker that runs it; the rest must not suffer much."""
    total, limit = ctx.pick((1000, 2), (200, 2), (40, 2))
    every = 20  # 5 %
    healthy = total - total // every
    # A node of its own: the shared one may be restarted by other test runs, and the replacement workers this
    # scenario starts all the time would not start meanwhile.
    async with rabbit_node(f"chaos{ctx.run_id}-poison", ctx.work_dir / "rabbitmq-poison") as node:
        await _poison_runs(ctx, out, llm, node.url, total, limit, every, healthy)


async def _poison_runs(
    ctx: Context, out: Outcome, llm: DevLlm, amqp_url: str, total: int, limit: int, every: int, healthy: int
) -> None:
    # Each healthy model call takes ``poison_model_seconds`` (1 s by default, a fast hosted model's call):
    # at 0.2 s the clean run alone keeps this machine's 2 CPUs busy, and the figure then measures what a
    # crash costs in CPU on a machine that the database, the broker and every service share (docs/resilience.md).
    model_call = [{"delay_seconds": ctx.poison_model_seconds}]
    async with chaos_run(ctx, "clean", llm=llm, concurrency=16, amqp_url=amqp_url) as clean:
        await llm.script(clean.cluster.model, model_call, by_turn=True)
        await clean.start(workers=3, worker_env=WORKER_ENV)
        await clean.submit(healthy, concurrency=8)
        await clean.drain(ctx.pick(600, 300, 90))
        clean_run = await _healthy_run(clean)
        clean_rate = clean_run.rate
    async with chaos_run(
        ctx, "poison", llm=llm, concurrency=16, delivery_limit=limit, amqp_url=amqp_url
    ) as run:
        model = run.cluster.model
        await llm.script(model, model_call, by_turn=True)
        # A poison task's call hangs long enough for the suite to kill the worker that made it (were the kill
        # to miss, the task would complete after a minute and count as lost).
        await llm.script(model, [{"delay_seconds": 60}], by_turn=True, when=POISON)
        await run.start(workers=3, worker_env=WORKER_ENV)
        kills = 0
        seen: dict[str, int] = {}
        server_port = urlsplit(llm.base_url).port or 80

        async def killer() -> None:
            # The worker child that made the poison call dies; its supervisor forks a new one (the suite
            # starts no replacement).
            nonlocal kills
            # One client for the whole loop: a new one per poll (ten a second) built an SSL context each
            # time, about 25 ms of CPU, on the submitter's event loop and the CPUs of what is measured.
            async with httpx.AsyncClient() as control:
                await kill_poison_callers(control)

        async def kill_poison_callers(control: httpx.AsyncClient) -> None:
            nonlocal kills
            while True:
                calls, callers = await llm.watch_conversations(model, control, contains=POISON)
                new = [c for c, n in calls.items() if n > seen.get(c, 0)]
                # /proc read only when a poison call came: the suite shares the machine and the submitter's
                # event loop with what it measures.
                for conversation in new:
                    seen[conversation] = calls[conversation]
                    port = int(callers[conversation].rsplit(":", 1)[1])
                    children = [c for w in run.workers for c in procfs.children(w.proc.pid)]
                    pid = procfs.connection_owner(port, server_port, children)
                    if pid is not None:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                            kills += 1
                await asyncio.sleep(0.1)

        killing = asyncio.create_task(killer())
        try:
            await run.submit(total, concurrency=8, marker_every=(every, POISON))
            drained = await run.drain(ctx.pick(900, 400, 120))
        finally:
            killing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await killing
        poisoned = {t for t, text in run.submissions.accepted.items() if text.endswith(POISON)}
        await run.judge(out, expected=dict.fromkeys(poisoned, "dead_lettered"))
        out.drain_s = drained
        poison_run = await _healthy_run(run)
        rate = poison_run.rate
        ratio = None if rate is None or not clean_rate else rate / clean_rate
        async with run.store() as conn:
            reasons = await conn.fetch(
                "SELECT dead_letter->>'reason' AS reason, count(*) AS n FROM tasks"
                " WHERE metadata->>'chaos' = $1 AND status = 'dead_lettered' GROUP BY 1",
                run.tag,
            )
        letters = ", ".join(f"{r['n']} {r['reason']}" for r in reasons) or "none"
        restarts = _restart_times(run)
        out.note(
            f"{len(poisoned)} poison of {total}, each healthy model call {ctx.poison_model_seconds:g} s,"
            f" delivery limit {limit}, {kills} worker children killed by them; dead-lettered: {letters}"
        )
        if restarts:
            median = restarts[len(restarts) // 2]
            out.note(
                f"{len(restarts)} children forked again by their supervisor, consuming {median:.2f} s"
                f" (median; max {restarts[-1]:.2f} s) after the death"
            )
        moved = _quarantined(run)
        out.note(f"moved to quarantine: {len(moved & poisoned)} poison, {len(moved - poisoned)} healthy")
        if ratio is not None and clean_rate is not None and rate is not None:
            verdict = "met" if ratio >= 0.9 else "NOT met"
            out.note(
                f"healthy {rate:.1f}/s ({poison_run.describe()}) vs clean run {clean_rate:.1f}/s"
                f" ({clean_run.describe()}): {ratio:.0%} (target >= 90 %: {verdict})"
            )


async def slow_llm(ctx: Context, out: Outcome, llm: DevLlm) -> None:
    """6: a model whose p99 is 30 s (one call in fifty takes 30 s), then answers only 503 for a while."""
    total, concurrency, outage = ctx.pick((1000, 32, 20.0), (300, 32, 10.0), (30, 8, 3.0))
    # On a node of its own too: the shared one may be restarted by other test runs.
    async with (
        rabbit_node(f"chaos{ctx.run_id}-slow", ctx.work_dir / "rabbitmq-slow") as node,
        chaos_run(
            ctx, "slowllm", llm=llm, concurrency=concurrency, max_attempts=10, amqp_url=node.url
        ) as run,
    ):
        model = run.cluster.model
        steady = [{"delay_seconds": 0.5}]
        await llm.script(model, steady, by_turn=True)
        await llm.script(model, [{"delay_seconds": 30}], by_turn=True, when=SLOW)
        await run.start(workers=1, worker_env=WORKER_ENV)
        memory = {s.name.rsplit("-", 1)[0]: TreeMemory(s.proc.pid) for s in run.cluster.services}
        for sampled in memory.values():
            sampled.start()
        peak_running = 0
        sampling = True

        async def sample() -> None:
            nonlocal peak_running
            while sampling:
                counts = await run.statuses()
                peak_running = max(peak_running, counts.get("running", 0))
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(sample())
        started = time.monotonic()
        await run.submit(total, concurrency=8, marker_every=(50, SLOW))
        await asyncio.sleep(max(0.0, ctx.pick(10.0, 5.0, 1.0) - (time.monotonic() - started)))
        # The provider's outage: every call answers 503 (the by-turn scripts replaced), then it is back.
        await llm.script(model, [{"status": 503, "error_message": "overloaded"}], by_turn=True)
        await llm.script(model, [{"status": 503, "error_message": "overloaded"}], by_turn=True, when=SLOW)
        await asyncio.sleep(outage)
        await llm.script(model, steady, by_turn=True)
        await llm.script(model, [{"delay_seconds": 30}], by_turn=True, when=SLOW)
        back = time.monotonic()
        drained = await run.drain(ctx.pick(900, 400, 120))
        out.drain_s = None if drained is None else time.monotonic() - back
        sampling = False
        await sampler
        await run.judge(out)
        rss = {name: await sampled.stop() for name, sampled in memory.items()}
        async with run.store() as conn:
            attempts = await conn.fetchval(
                "SELECT max(attempts) FROM tasks WHERE metadata->>'chaos' = $1", run.tag
            )
        out.note(
            f"1 call in 50 takes 30 s (p99 30 s), others 0.5 s; then {outage:g} s of 503s; at most"
            f" {peak_running} running at once (concurrency {concurrency}: the rest waited in the queue);"
            f" up to {attempts} attempts"
        )
        out.note(
            "peak memory (PSS of each service's processes, sampled): "
            + ", ".join(f"{k} {v:.0f} MB" for k, v in rss.items() if v is not None)
        )

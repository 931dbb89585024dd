"""Scenarios 1-4: processes and infrastructure taken away mid-run (workers SIGKILLed, RabbitMQ stopped, the
quorum leader stopped, PostgreSQL restarted). Every broker or database stopped here is the suite's own."""

from __future__ import annotations

import asyncio
import random
import time

from bench.chaos.harness import TERMINAL, ChaosRun, Outcome, chaos_run
from bench.chaos.nodes import FailoverProxy, private_postgres, rabbit_cluster, rabbit_node
from bench.infra import Context
from taskyard_common.topology import Topology
from taskyard_devkit.devllm import DevLlm

# Each task's one model call takes this long, so that a fault finds tasks in flight.
CALL_SECONDS = 0.3
# A dead worker's tasks come back after this (the default is 30 s).
WORKER_ENV = {"TASKYARD_WORKER_LEASE_SECONDS": "3"}


async def _steady(run: ChaosRun, llm: DevLlm, *, workers: int) -> None:
    await llm.script(run.cluster.model, [{"delay_seconds": CALL_SECONDS}], by_turn=True)
    await run.start(workers=workers, worker_env=WORKER_ENV)


def _first_accept_after(run: ChaosRun, moment: float) -> float | None:
    later = [at for at, code in run.submissions.answers if code == "202" and at >= moment]
    return min(later) - moment if later else None


async def kill_workers(ctx: Context, out: Outcome, llm: DevLlm) -> None:
    """1: SIGKILL a random worker process every few seconds while tasks stream in."""
    count, rate, every = ctx.pick((2000, 40, 4.0), (400, 40, 3.0), (20, 10, 1.0))
    workers, min_kills = ctx.pick((3, 2), (3, 2), (2, 1))
    async with chaos_run(ctx, "kill", llm=llm, concurrency=16) as run:
        await _steady(run, llm, workers=workers)
        rng = random.Random(18)
        submitting = asyncio.create_task(run.submit(count, concurrency=4, per_second=rate))
        kill_times: list[float] = []
        while not submitting.done() or len(kill_times) < min_kills:
            await asyncio.sleep(every)
            if run.kill_random_worker(rng) is not None:
                kill_times.append(time.monotonic())
            await run.add_worker(**WORKER_ENV)
        await submitting
        drained = await run.drain(ctx.pick(600, 300, 90))
        out.drain_s = None if drained is None else time.monotonic() - kill_times[-1]
        # A replacement is started and ready before the next kill: on a busy machine that sets the pace.
        kills = len(kill_times)
        pace = (kill_times[-1] - kill_times[0]) / (kills - 1) if kills > 1 else every
        out.note(
            f"{kills} workers SIGKILLed (1 of {workers} at a time, one every {pace:.0f} s), {rate}/s submitted"
        )
        await run.judge(out)


async def restart_rabbitmq(ctx: Context, out: Outcome, llm: DevLlm) -> None:
    """2: the (private) RabbitMQ node stopped and started again mid-run."""
    count, rate, down = ctx.pick((1000, 25, 10.0), (300, 25, 8.0), (30, 3, 3.0))
    async with (
        rabbit_node(f"chaos{ctx.run_id}-solo", ctx.work_dir / "rabbitmq") as node,
        chaos_run(ctx, "rabbitmq", llm=llm, concurrency=16, amqp_url=node.url) as run,
    ):
        await _steady(run, llm, workers=2)
        submitting = asyncio.create_task(run.submit(count, concurrency=4, per_second=rate))
        await asyncio.sleep(count / rate / 3)
        stopped = time.monotonic()
        await node.stop()
        await asyncio.sleep(down)
        await node.start()
        back = time.monotonic()
        await submitting
        drained = await run.drain(ctx.pick(600, 300, 90))
        out.drain_s = None if drained is None else time.monotonic() - back
        out.recover_s = _first_accept_after(run, back)
        out.note(f"node down {back - stopped:.0f} s (stop, {down:g} s, start)")
        await run.judge(out)


async def stop_quorum_leader(ctx: Context, out: Outcome, llm: DevLlm) -> None:
    """3: a 3-node cluster; the node leading the work queue is stopped mid-run (not started again)."""
    count, rate = ctx.pick((1000, 25), (300, 25), (30, 10))
    async with (
        rabbit_cluster(f"chaos{ctx.run_id}-q", ctx.work_dir / "rabbitmq-cluster") as nodes,
        FailoverProxy([n.port for n in nodes]) as proxy,
        chaos_run(
            ctx, "quorum", llm=llm, concurrency=16, amqp_url=f"amqp://guest:guest@127.0.0.1:{proxy.port}/"
        ) as run,
    ):
        await _steady(run, llm, workers=2)
        submitting = asyncio.create_task(run.submit(count, concurrency=4, per_second=rate))
        await asyncio.sleep(count / rate / 3)
        queue = Topology(run.amqp.prefix).specialist_queue("general")
        leader = (await nodes[0].queue_leaders()).get(queue)
        victim = next((n for n in nodes if n.nodename == leader), nodes[0])
        stopped = time.monotonic()
        await victim.stop()
        survivor = next(n for n in nodes if n is not victim)
        await submitting
        drained = await run.drain(ctx.pick(600, 300, 90))
        out.drain_s = None if drained is None else time.monotonic() - stopped
        out.recover_s = run.submissions.longest_refusal(stopped) or 0.0
        new_leader = (await survivor.queue_leaders()).get(queue)
        out.note(f"leader {leader} stopped, new leader {new_leader}; clients through one failover address")
        await run.judge(out)


async def restart_postgres(ctx: Context, out: Outcome, llm: DevLlm) -> None:
    """4: the (private) PostgreSQL stopped and started again mid-run."""
    count, rate, down = ctx.pick((1000, 25, 10.0), (300, 25, 8.0), (30, 3, 3.0))
    async with (
        private_postgres(ctx.work_dir / "pg") as pg,
        chaos_run(ctx, "postgres", llm=llm, concurrency=16, db_url=pg.url) as run,
    ):
        await _steady(run, llm, workers=2)
        submitting = asyncio.create_task(run.submit(count, concurrency=4, per_second=rate))
        await asyncio.sleep(count / rate / 3)
        stopped = time.monotonic()
        await pg.stop("fast")
        await asyncio.sleep(down)
        await pg.start()
        back = time.monotonic()
        await submitting
        drained = await run.drain(ctx.pick(600, 300, 90))
        out.drain_s = None if drained is None else time.monotonic() - back
        out.recover_s = _first_accept_after(run, back)
        counts = await run.statuses()
        stuck = sum(n for status, n in counts.items() if status not in TERMINAL)
        out.note(
            f"database down {back - stopped:.0f} s (pg_ctl stop -m fast, {down:g} s, start); {stuck} stuck non-terminal"
        )
        await run.judge(out)

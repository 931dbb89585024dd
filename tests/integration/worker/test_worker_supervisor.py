"""``taskyard-worker`` under its supervisor (supervisor.py): a SIGKILLed child is forked again at once, and its
task runs again without waiting for the dead child's lease."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path

import aio_pika
import aiormq
import httpx
import pytest
from aio_pika.abc import AbstractConnection

from taskyard_common.lifecycle import TaskStatus
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok
from tests.integration.worker.helpers import Harness
from tests.integration.worker.test_worker_process import worker_env
from tests.support.polling import eventually
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

# Far longer than the test may take: a task that waited for the dead child's lease could not complete in it.
LEASE_SECONDS = 600


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(p) for p in text.split()]


def listener(port: int, pids: list[int]) -> int | None:
    """Which of ``pids`` listens on TCP ``port`` (the main child serves health and metrics)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    for pid in pids:
        try:
            if any(os.readlink(fd) in inodes for fd in Path(f"/proc/{pid}/fd").iterdir()):
                return pid
        except OSError:
            continue
    return None


async def exchange_exists(connection: AbstractConnection, name: str) -> bool:
    """A passive declare, on a channel of its own (a missing exchange closes it: 404)."""
    channel = await connection.channel()
    try:
        await channel.declare_exchange(name, passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return False
    await channel.close()
    return True


def supervised_worker(
    harness: Harness, catalog_path: Path, service_logs: Path, **env: str
) -> tuple[Service, int]:
    """``taskyard-worker`` for general under its supervisor (started, not yet ready), with ``env`` on top of a
    lease far longer than the test; and its health port."""
    port = free_port()
    settings = harness.settings
    full = worker_env(settings.amqp, settings.db, catalog_path, harness.devllm.base_url, harness.model, port)
    full |= {"TASKYARD_WORKER_LEASE_SECONDS": str(LEASE_SECONDS), **env}
    service = Service("worker-supervised", ["taskyard-worker", "--specialist", "general"], full, service_logs)
    return service, port


async def test_a_sigkilled_child_is_forked_again_and_its_task_runs_without_waiting_for_its_lease(
    harness: Harness, catalog_path: Path, service_logs: Path
) -> None:
    # The first call hangs (the child is killed under it); the re-run's call answers.
    await harness.script([{"delay_seconds": 120, "content": "never seen"}, {"content": "after the crash"}])
    service, port = supervised_worker(harness, catalog_path, service_logs)
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        kids = children(service.proc.pid)
        assert len(kids) == 3, "one child for the main queues, two for the quarantine queue"
        main = listener(port, kids)
        assert main is not None, "the main child serves health and metrics"

        message = await harness.submit("This call hangs until its worker dies.")
        running = await harness.wait(message.task_id, TaskStatus.RUNNING)
        await harness.wait_llm_calls(1)
        first_owner = running.lease_owner
        assert first_owner is not None and f":{main}:" in first_owner
        # The successor declares only its specialist's queues: an exchange it does not use, deleted now (the
        # first children declared the whole topology), stays gone.
        intake = harness.bus.topology.intake_exchange
        await harness.bus.channel.exchange_delete(intake)
        os.kill(main, signal.SIGKILL)

        record = await harness.wait(message.task_id, TaskStatus.COMPLETED, within=60)
        assert record.result is not None and record.result["output"] == "after the crash"
        events = await harness.store.events(message.task_id)
        starts = [e for e in events if e.type == "attempt_started"]
        assert len(starts) == 2 and starts[0].data["worker"] == first_owner
        assert starts[1].data["worker"] != first_owner, "a new child (a new owner) ran it again"
        # The second start took the task over long before the dead child's lease could have run out.
        second_start = datetime.fromisoformat(starts[1].at)
        assert second_start < datetime.fromisoformat(starts[0].at) + timedelta(seconds=LEASE_SECONDS / 2)

        # The parent is the same process; a new main child serves the port again.
        assert service.proc.poll() is None
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        # ...with the whole pod's metrics: the re-run ended in a quarantine child (the task was in flight at
        # the crash), and the dead child's task in flight is no longer counted.
        async with httpx.AsyncClient() as client:
            metrics = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
        assert metric_sum(metrics, "taskyard_tasks_finished_total", status="completed") == 1
        assert metric_sum(metrics, "taskyard_tasks_in_flight") == 0
        assert metric_sum(metrics, "taskyard_task_duration_seconds_count") == 1

        async def replaced() -> bool:
            now = children(service.proc.pid)
            # The successor and, the main queues split after a crash (main_split.py), three more, and two
            # quarantine children beside the two at rest.
            return len(now) == 8 and main not in now

        await eventually(replaced, timeout=30, what="a new main child and the split's")
        assert not await exchange_exists(harness.bus.connection, intake)
        await harness.bus.channel.declare_exchange(intake, aio_pika.ExchangeType.DIRECT, durable=True)
    finally:
        code = await asyncio.to_thread(service.stop)
    log = service.log_tail(400)
    assert code == 0, log
    assert f"main worker child {main} died (signal SIGKILL): restart #1" in log
    assert "ended 1 leases of the dead child" in log


async def test_a_task_that_kills_its_quarantine_child_is_dead_lettered_without_another_run(
    harness: Harness, catalog_path: Path, service_logs: Path
) -> None:
    # Every call hangs: the test kills the child under each (the main child, then the quarantine child).
    await harness.script([{"delay_seconds": 120, "content": "never seen"}], repeat_last=True)
    service, port = supervised_worker(harness, catalog_path, service_logs)
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        message = await harness.submit("Each call of this task kills its worker child.")
        for calls in (1, 2):
            await harness.wait_llm_calls(calls)
            record = await harness.store.get(message.task_id)
            assert record is not None and record.lease_owner is not None
            os.kill(int(record.lease_owner.split(":")[1]), signal.SIGKILL)

        async def dead_lettered() -> bool:
            return await harness.bus.dead_letters() == 1

        # Proven poison at its first crash in quarantine: not run a third time (before, it waited two
        # leases, 1200 s here, and ran again).
        await eventually(dead_lettered, timeout=30, what="the poison in the dead-letter queue")
        assert len(await harness.llm_requests()) == 2
    finally:
        code = await asyncio.to_thread(service.stop)
    log = service.log_tail(400)
    assert code == 0, log
    assert "proven poison, dead-lettered" in log


async def test_a_crash_takes_only_its_own_main_childs_tasks_with_it(
    harness: Harness, write_catalog: Callable[..., Path], service_logs: Path
) -> None:
    # Two main children share a concurrency of 2 (one task each); the poison's call hangs until its child
    # dies, the healthy task's answers after a few seconds, long after the kill.
    catalog_path = write_catalog(concurrency=2)
    await harness.devllm.script(harness.model, [{"delay_seconds": 6, "content": "healthy"}], by_turn=True)
    await harness.devllm.script(harness.model, [{"delay_seconds": 120}], by_turn=True, when="POISON")
    # The poison hangs again in quarantine: the stop at the end hands it back instead of waiting for it.
    service, port = supervised_worker(
        harness,
        catalog_path,
        service_logs,
        TASKYARD_WORKER_MAIN_CHILDREN="2",
        TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS="1",
    )
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        kids = children(service.proc.pid)
        assert len(kids) == 4, "two children for the main queues, two for the quarantine queue"
        assert listener(port, kids) is not None, "one of them serves health and metrics"

        # /readyz is the first main child's: wait for the other one to consume too.
        queue = harness.bus.topology.specialist_queue("general")

        async def both_consume() -> bool:
            return await harness.bus.consumers(queue) == 2

        await eventually(both_consume, timeout=30, what="two main children consuming")
        healthy = await harness.submit("A healthy task.")
        poison = await harness.submit("POISON: this call hangs until its worker dies.")
        await harness.wait_llm_calls(2)
        healthy_owner = (await harness.wait(healthy.task_id, TaskStatus.RUNNING)).lease_owner
        poison_owner = (await harness.wait(poison.task_id, TaskStatus.RUNNING)).lease_owner
        assert healthy_owner is not None and poison_owner is not None
        assert healthy_owner != poison_owner, "each main child runs one task (its share of the concurrency)"
        killed = int(poison_owner.split(":")[1])
        os.kill(killed, signal.SIGKILL)

        record = await harness.wait(healthy.task_id, TaskStatus.COMPLETED, within=60)
        assert record.result is not None and record.result["output"] == "healthy"
        starts = [e for e in await harness.store.events(healthy.task_id) if e.type == "attempt_started"]
        # With one main child for both, the kill took the healthy task with it: it ran again in quarantine.
        assert [s.data["worker"] for s in starts] == [healthy_owner], "not touched by the other child's crash"
    finally:
        code = await asyncio.to_thread(service.stop)
    log = service.log_tail(400)
    assert code == 0, log
    assert f"worker child {killed} died (signal SIGKILL): restart #1" in log


async def test_after_a_main_crash_the_main_queues_split_and_merge_again_once_calm(
    harness: Harness, write_catalog: Callable[..., Path], service_logs: Path
) -> None:
    # The first call hangs until its child dies; the re-run in quarantine answers, and so does a task sent
    # after the merge.
    catalog_path = write_catalog(concurrency=2)
    await harness.script([{"delay_seconds": 120}, {"content": "after the crash"}, {"content": "merged"}])
    service, port = supervised_worker(
        harness,
        catalog_path,
        service_logs,
        TASKYARD_WORKER_SPLIT_AFTER_CRASH="3",
        TASKYARD_WORKER_SPLIT_CALM_SECONDS="4",
    )
    topology = harness.bus.topology
    queue, quarantine = topology.specialist_queue("general"), topology.quarantine_queue("general")

    def count(main: int, isolating: int) -> Callable[[], Awaitable[bool]]:
        async def reached() -> bool:
            return (
                len(children(service.proc.pid)) == main + isolating
                and await harness.bus.consumers(queue) == main
                and await harness.bus.consumers(quarantine) == isolating
            )

        return reached

    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        await eventually(count(1, 2), timeout=30, what="one main child and two quarantine ones")
        first = await harness.submit("This call hangs until its worker dies.")
        running = await harness.wait(first.task_id, TaskStatus.RUNNING)
        await harness.wait_llm_calls(1)
        assert running.lease_owner is not None
        os.kill(int(running.lease_owner.split(":")[1]), signal.SIGKILL)

        # The split: three main children, and as many quarantine ones for the suspects its crashes send.
        await eventually(count(3, 3), timeout=30, what="three main and quarantine children after the crash")
        record = await harness.wait(first.task_id, TaskStatus.COMPLETED, within=60)
        assert record.result is not None and record.result["output"] == "after the crash"
        # Four calm seconds later one main child again (stopped gracefully, so a clean exit each), and it
        # consumes: a new task completes.
        await eventually(count(1, 2), timeout=60, what="one main child again after the calm period")
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        second = await harness.submit("After the merge.")
        record = await harness.wait(second.task_id, TaskStatus.COMPLETED, within=60)
        assert record.result is not None and record.result["output"] == "merged"
    finally:
        code = await asyncio.to_thread(service.stop)
    log = service.log_tail(400)
    assert code == 0, log
    assert "the main queues run in 3 children, the quarantine queue in 3, for at least 4 s" in log
    assert "no main worker crash for 4 s: back to one main child" in log


async def test_a_sigterm_while_the_split_merges_stops_the_draining_children_and_exits_cleanly(
    harness: Harness, write_catalog: Callable[..., Path], service_logs: Path
) -> None:
    """The merge SIGTERMs the split's main children; one still drains a task's model call when the pod is
    told to stop: the parent forwards the SIGTERM, forks nothing more, and exits 0 after every child."""
    catalog_path = write_catalog(concurrency=2)
    await harness.script(
        [{"delay_seconds": 120}, {"content": "after the crash"}, {"delay_seconds": 10, "content": "drained"}]
    )
    service, port = supervised_worker(
        harness,
        catalog_path,
        service_logs,
        TASKYARD_WORKER_SPLIT_AFTER_CRASH="2",
        TASKYARD_WORKER_SPLIT_CALM_SECONDS="8",
    )
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        first = await harness.submit("This call hangs until its worker dies.")
        running = await harness.wait(first.task_id, TaskStatus.RUNNING)
        await harness.wait_llm_calls(1)
        assert running.lease_owner is not None
        os.kill(int(running.lease_owner.split(":")[1]), signal.SIGKILL)
        await harness.wait(first.task_id, TaskStatus.COMPLETED, within=60)
        # Started on a split main child before the calm period ends; its model call outlasts the merge's start.
        second = await harness.submit("This call is still running when the split merges.")
        draining = await harness.wait(second.task_id, TaskStatus.RUNNING)
        await harness.wait_llm_calls(3)
        assert draining.lease_owner is not None
        drainer = int(draining.lease_owner.split(":")[1])

        async def merging() -> bool:
            return "back to one main child" in service.log_tail(400)

        await eventually(merging, timeout=30, what="the merge")
        assert drainer in children(service.proc.pid), "the merge has begun; the child still drains"
    finally:
        code = await asyncio.to_thread(service.stop, 40)
    log = service.log_tail(400)
    assert code == 0, log
    with pytest.raises(ProcessLookupError):
        os.kill(drainer, 0)  # no child outlives its parent
    record = await harness.store.get(second.task_id)
    assert record is not None and record.status not in (TaskStatus.FAILED, TaskStatus.DEAD_LETTERED), record

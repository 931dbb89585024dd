"""Settlement around the store commit: crashes, graceful shutdown, and many tasks in one process."""

from __future__ import annotations

import pytest

from taskyard_common.messages import TaskStatus
from taskyard_worker.app import running_worker
from tests.integration.worker.helpers import Harness
from tests.support.processes import eventually

pytestmark = pytest.mark.integration


async def test_ack_only_after_commit_a_crash_mid_task_redelivers(harness: Harness) -> None:
    slow, fast = {"delay_seconds": 2, "content": "never read"}, {"content": "second worker's answer"}
    await harness.script([slow, fast])
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as first:
        await harness.wait(message.task_id, TaskStatus.RUNNING)
        await harness.wait_llm_calls(1)
        assert await harness.bus.work_depth() == 0, "the message is with the worker"
        # Crash: the connection drops while the task runs, and the process's work dies with it. Had the
        # message been acked on receipt, it would now be lost with the task stuck in `running`.
        await first.resources.connection.close()
        for task in list(first.handler.in_flight):
            task.cancel()

    async def back_in_queue() -> bool:
        return await harness.bus.work_depth() == 1

    await eventually(back_in_queue, what="the unacked message back in the queue")
    assert (await harness.wait(message.task_id, TaskStatus.RUNNING)).result is None
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == "second worker's answer"
    assert record.attempts == 2
    assert await harness.bus.work_depth() == 0


async def test_shutdown_lets_in_flight_tasks_finish(harness: Harness) -> None:
    await harness.script([{"delay_seconds": 1, "content": "finished during shutdown"}])
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as worker:
        await harness.wait(message.task_id, TaskStatus.RUNNING)
        assert worker.handler.in_flight
    # Leaving the block is the SIGTERM path: the task was finished and acked before the worker stopped.
    record = await harness.store.get(message.task_id)
    assert record is not None and record.status is TaskStatus.COMPLETED
    assert record.result == {"output": "finished during shutdown", "steps": 1, "tool_calls": []}
    assert await harness.bus.work_depth() == 0


async def test_shutdown_hands_back_what_outlives_the_grace_period(harness: Harness, make_settings) -> None:
    slow, fast = {"delay_seconds": 2, "content": "too late"}, {"content": "done by the next worker"}
    await harness.script([slow, fast])
    message = await harness.submit()
    async with running_worker(make_settings(shutdown_grace_seconds=0.2), "general") as worker:
        await harness.wait(message.task_id, TaskStatus.RUNNING)
        await harness.wait_llm_calls(1)
    assert worker.handler.outcomes["requeued"] == 1
    # Handed back with requeue (not dead-lettered, not lost), the task still running for the next worker.
    assert await harness.bus.work_depth() == 1
    assert await harness.bus.dead_letters() == 0
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == "done by the next worker"


async def test_one_process_runs_many_tasks_at_once(harness: Harness) -> None:
    await harness.script([{"delay_seconds": 1.5, "content": "slow answer"}], repeat_last=True)
    messages = [await harness.submit(f"Task number {i}") for i in range(20)]
    most_running = 0

    async def all_completed() -> bool:
        nonlocal most_running
        most_running = max(most_running, await harness.count(TaskStatus.RUNNING))
        return await harness.count(TaskStatus.COMPLETED) == len(messages)

    async with running_worker(harness.settings, "general") as worker:
        await eventually(all_completed, what="all 20 tasks completed")
    assert most_running >= 10, f"at most {most_running} tasks ran at once"
    assert worker.handler.outcomes["completed"] == 20
    assert len(await harness.llm_requests()) == 20
    assert await harness.bus.work_depth() == 0


async def test_misrouted_message_fails_its_task(harness: Harness) -> None:
    message = await harness.submit(publish=False)
    # Lands in the general queue although it names another specialist: a routing bug upstream.
    stray = message.model_copy(update={"specialist": "summarizer"})
    await harness.bus.publisher.publish(harness.bus.topology.tasks_exchange, "general", stray)
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert record.error is not None and record.error["type"] == "misrouted"
    assert await harness.llm_requests() == []

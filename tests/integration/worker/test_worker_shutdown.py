"""Graceful shutdown: in-flight tasks finish within the grace period, the rest are handed back uncharged."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, wait_outcome
from tests.integration.worker.test_worker_process import worker_env
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def test_shutdown_lets_in_flight_tasks_finish(harness: Harness) -> None:
    await harness.script([{"delay_seconds": 1, "content": "finished during shutdown"}])
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as worker:
        await harness.wait(message.task_id, TaskStatus.RUNNING)
        assert worker.handler.flights
    # Leaving the block is the SIGTERM path: the task was finished and acked before the worker stopped.
    record = await harness.store.get(message.task_id)
    assert record is not None and record.status is TaskStatus.COMPLETED
    assert record.result == {"output": "finished during shutdown", "steps": 1, "tool_calls": []}
    assert await harness.bus.work_depth() == 0


async def test_a_task_acked_early_is_handed_back_with_a_new_message(
    harness: Harness, make_settings: Callable[..., ServiceSettings]
) -> None:
    slow, fast = {"delay_seconds": 6, "content": "too late"}, {"content": "done by the next worker"}
    await harness.script([slow, fast])
    message = await harness.submit()
    settings = make_settings(shutdown_grace_seconds=0.2, settle_after_seconds=0.5)
    async with running_worker(settings, "general") as worker:
        await wait_outcome(worker, "settled_early")
    assert worker.handler.outcomes["handed_back"] == 1
    record = await harness.store.get(message.task_id)
    assert record is not None and record.status is TaskStatus.QUEUED
    assert record.attempts == 1 and record.lease_owner is None and record.attempt_log == []
    # The original was acked long ago: what is in the queue is the hand-back's new message.
    assert await harness.bus.work_depth() == 1
    assert await harness.bus.dead_letters() == 0
    async with running_worker(harness.settings, "general") as next_worker:
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert next_worker.handler.outcomes["quarantined"] == 0
    assert record.result is not None and record.result["output"] == "done by the next worker"
    assert record.attempts == 1


async def test_sigterm_hands_unfinished_tasks_back_uncharged(
    harness: Harness, catalog_path: Path, service_logs: Path
) -> None:
    slow = {"delay_seconds": 6, "content": "too late"}
    await harness.script([slow, slow, slow, {"content": "done after the restart"}], repeat_last=True)
    port = free_port()
    settings = harness.settings
    env = {
        **worker_env(settings.amqp, settings.db, catalog_path, harness.devllm.base_url, harness.model, port),
        "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "0.5",
    }
    service = Service("worker-sigterm", ["taskyard-worker", "--specialist", "general"], env, service_logs)
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        messages = [await harness.submit(f"task {i}") for i in range(3)]

        async def all_running() -> bool:
            return await harness.count(TaskStatus.RUNNING) == 3

        await eventually(all_running, what="3 tasks running")
        await harness.wait_llm_calls(3)
    finally:
        code = await asyncio.to_thread(service.stop)
    assert code == 0, service.log_tail()
    assert "handed back to the queue" in service.log_tail(200)
    for message in messages:
        record = await harness.store.get(message.task_id)
        assert record is not None and record.status is TaskStatus.QUEUED, record
        assert record.attempts == 1 and record.lease_owner is None
    # Republished, not rejected with requeue: back on the specialist queue, nothing dead-lettered.
    assert await harness.bus.work_depth() == 3
    assert await harness.bus.dead_letters() == 0

    async with running_worker(harness.settings, "general") as worker:
        for message in messages:
            record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
            assert record.attempts == 1
        await wait_outcome(worker, "completed", 3)
    # Fresh messages, not redeliveries: none of them went to quarantine.
    assert worker.handler.outcomes["quarantined"] == 0

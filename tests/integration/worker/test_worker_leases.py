"""Leases and cancellation: one worker per task, a lost lease stops the run, cancel via control or heartbeat."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage
from taskyard_common.metrics import TASKS_FINISHED
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, counter, wait_outcome
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def test_a_second_worker_defers_a_task_another_one_holds(
    harness: Harness, make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> None:
    # Concurrency 1, and the first worker's prefetch per level is 1 too (a job-mode worker's: the idle exit
    # itself only applies to the process entry point), so it is full and the duplicate goes to the second.
    catalog = write_catalog(concurrency=1)
    settings = make_settings(catalog=catalog, lease_seconds=3)
    first_settings = make_settings(catalog=catalog, lease_seconds=3, exit_when_idle_seconds=3600)
    await harness.script([{"delay_seconds": 4, "content": "only once"}])
    message = await harness.submit()
    async with running_worker(first_settings, "general") as first:
        record = await harness.wait(message.task_id, TaskStatus.RUNNING)
        assert record.lease_owner == first.owner
        async with running_worker(settings, "general") as second:
            # A duplicate of the message (as a lost ack or a replay would make one).
            await harness.bus.send_work(message)
            await wait_outcome(second, "deferred")
            # It waits in a delay tier for the lease to run out (not charged, not requeued).
            assert await harness.bus.delayed() == 1
            record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert first.handler.outcomes["completed"] == 1
    assert second.handler.outcomes["completed"] == 0
    assert record.attempts == 1 and record.attempt_log == []
    assert len(await harness.llm_requests()) == 1


async def test_a_duplicate_of_a_task_in_flight_here_is_deferred_not_run_twice(harness: Harness) -> None:
    await harness.script([{"delay_seconds": 4, "content": "only once"}])
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as worker:
        await harness.wait(message.task_id, TaskStatus.RUNNING)
        await harness.bus.send_work(message)
        await wait_outcome(worker, "deferred")
        assert await harness.bus.delayed() == 1
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.attempts == 1
    assert len(await harness.llm_requests()) == 1


async def test_a_worker_that_lost_its_lease_stops_the_run_and_records_nothing(
    harness: Harness, make_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"delay_seconds": 6, "content": "never recorded"}])
    message = await harness.submit()
    async with running_worker(make_settings(lease_seconds=1.5), "general") as worker:
        await harness.wait_llm_calls(1)
        await harness.steal_lease(message.task_id, "thief")
        await wait_outcome(worker, "lost_lease")
        assert message.task_id not in worker.handler.flights
    record = await harness.store.get(message.task_id)
    assert record is not None and record.status is TaskStatus.RUNNING
    assert record.lease_owner == "thief" and record.result is None
    # The message was settled (the new owner has its own), and the new owner can still finish the task.
    assert await harness.bus.work_depth() == 0
    assert await harness.store.complete(message.task_id, {"output": "thief's"}, Usage(), owner="thief")


async def test_a_control_message_cancels_a_running_task_at_once(harness: Harness) -> None:
    # The default 30 s lease: the heartbeat (every 10 s) cannot be what cancels it within 2 s.
    await harness.script([{"delay_seconds": 6, "content": "never finished"}])
    cancelled = counter(TASKS_FINISHED, "general", "cancelled")
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as worker:
        await harness.wait_llm_calls(1)
        requested = await harness.store.cancel(message.task_id)
        assert requested is not None and requested.status is TaskStatus.RUNNING
        await harness.bus.cancel(message.task_id)
        record = await harness.wait(message.task_id, TaskStatus.CANCELLED, within=2.0)
        await wait_outcome(worker, "cancelled")
    assert record.lease_owner is None and record.result is None
    assert counter(TASKS_FINISHED, "general", "cancelled") == cancelled + 1
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.delayed() == 0


async def test_the_heartbeat_cancels_when_no_control_message_comes(
    harness: Harness, make_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"delay_seconds": 6, "content": "never finished"}])
    message = await harness.submit()
    async with running_worker(make_settings(lease_seconds=1.5), "general") as worker:
        await harness.wait_llm_calls(1)
        await harness.store.cancel(message.task_id)  # and no control message
        await harness.wait(message.task_id, TaskStatus.CANCELLED, within=5)
        await wait_outcome(worker, "cancelled")
    assert await harness.bus.work_depth() == 0


async def test_a_cancel_for_a_task_running_elsewhere_is_ignored(harness: Harness) -> None:
    message = await harness.submit(publish=False)
    async with running_worker(harness.settings, "general") as worker:
        await harness.bus.cancel(message.task_id)
        done = await harness.submit()
        await harness.wait(done.task_id, TaskStatus.COMPLETED)

        async def nothing_in_flight() -> bool:
            return not worker.handler.flights

        await eventually(nothing_in_flight, what="no flights left")
    assert (await harness.store.get(message.task_id)).status is TaskStatus.QUEUED  # type: ignore[union-attr]

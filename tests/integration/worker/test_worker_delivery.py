"""Settlement around the store commit: crashes and quarantine, settling long tasks early, many tasks at once."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.metrics import MESSAGES_QUARANTINED, TASK_START_DEFERRALS
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, counter, crash, wait_outcome
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def test_a_crashed_message_runs_again_then_alone_in_quarantine_and_completes_once(
    harness: Harness, make_settings: Callable[..., ServiceSettings]
) -> None:
    # Short leases: a crashed worker's lease runs out quickly, and the re-run and the quarantine wait for it.
    settings = make_settings(lease_seconds=1.5)
    slow = {"delay_seconds": 5, "content": "never read"}
    await harness.script([slow, slow, slow, {"content": "fourth worker's answer"}])
    quarantined = counter(MESSAGES_QUARANTINED, "general")
    message = await harness.submit()

    async def back_in_queue() -> bool:
        return await harness.bus.work_depth() == 1

    async with running_worker(settings, "general") as first:
        await harness.wait_llm_calls(1)
        # Had the message been acked on receipt, the crash would lose it with the task stuck `running`.
        await crash(first)
    await eventually(back_in_queue, what="the unacked message back in the queue")
    assert (await harness.store.get(message.task_id)).result is None  # type: ignore[union-attr]

    # One crash makes no suspect: the redelivery goes back to the main queue (after the dead worker's lease)
    # with its crash counted, and runs there among the others, not alone.
    async with running_worker(settings, "general") as second:
        await wait_outcome(second, "rerun_after_crash")
        assert second.handler.outcomes["quarantined"] == 0
        await harness.wait_llm_calls(2)
        flight = second.handler.flights[message.task_id]
        assert (flight.source, flight.crashes) == ("main", 1)
        await crash(second)
    await eventually(back_in_queue, what="the message back in the queue after its second crash")

    # In flight for a second crash: a suspect. It goes round a delay tier until the dead worker's lease is
    # over, then to the quarantine queue, where it runs alone at once.
    async with running_worker(settings, "general") as third:
        await wait_outcome(third, "suspect_waits")
        await wait_outcome(third, "quarantined")
        await harness.wait_llm_calls(3)
        flight = third.handler.flights[message.task_id]
        assert (flight.source, flight.crashes) == ("quarantine", 2)
        await crash(third)
    assert counter(MESSAGES_QUARANTINED, "general") == quarantined + 1

    async def back_in_quarantine() -> bool:
        return await harness.bus.quarantine_depth() == 1

    await eventually(back_in_quarantine, what="the message back in the quarantine queue")
    # A redelivery from quarantine counts a third crash and goes round a delay tier too (nothing waits in
    # quarantine for a lease), then back to quarantine, where it runs and completes.
    async with running_worker(settings, "general") as fourth:
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
        await wait_outcome(fourth, "completed")
    assert fourth.handler.outcomes["suspect_waits"] == fourth.handler.outcomes["quarantined"] == 1
    assert fourth.handler.outcomes["rerun_after_crash"] == fourth.handler.outcomes["waited_for_lease"] == 0
    assert record.result is not None and record.result["output"] == "fourth worker's answer"
    # Crashes are not charged attempts: the delivery limit bounds them.
    assert record.attempts == 1 and record.attempt_log == []
    assert len(await harness.llm_requests()) == 4
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.quarantine_depth() == 0
    assert await harness.bus.dead_letters() == 0


async def test_a_long_task_is_acked_early_and_still_completes_once(
    harness: Harness, make_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.script([{"delay_seconds": 3, "content": "slow answer"}])
    message = await harness.submit()
    async with running_worker(make_settings(settle_after_seconds=1), "general") as worker:
        await wait_outcome(worker, "settled_early")
        assert (await harness.store.get(message.task_id)).status is TaskStatus.RUNNING  # type: ignore[union-attr]
        # Proof of the ack: the consuming channel goes away, and nothing comes back to the queue.
        await worker.resources.main_channel.close()
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
        await wait_outcome(worker, "completed")
    assert record.result is not None and record.result["output"] == "slow answer"
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.quarantine_depth() == 0
    assert len(await harness.llm_requests()) == 1
    assert worker.handler.outcomes["settled_early"] == 1


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
    assert record.error is not None and record.error.type == "misrouted"
    assert await harness.llm_requests() == []


async def test_early_acks_never_let_a_worker_run_more_than_its_concurrency(
    harness: Harness, make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> None:
    # Each task outlives the early settle: its ack lets the broker deliver the next one at once, which must
    # wait for the running one (the autoscaler counts on concurrency tasks per worker, no more).
    await harness.script([{"delay_seconds": 1.2, "content": "slow answer"}], repeat_last=True)
    messages = [await harness.submit(f"long task {i}") for i in range(3)]
    settings = make_settings(catalog=write_catalog(concurrency=1), settle_after_seconds=0.3)
    in_flight = counter(TASK_START_DEFERRALS, "general", "in_flight")
    async with running_worker(settings, "general") as worker:
        try:
            records = [await harness.wait(m.task_id, TaskStatus.COMPLETED, within=60) for m in messages]
        except AssertionError as exc:
            # Say where each task was: a timeout here once came from a copy sent round for a whole lease.
            tasks = [await harness.store.get(m.task_id) for m in messages]
            seen = [(t.status.value, t.attempts) for t in tasks if t is not None]
            raise AssertionError(f"{exc}; outcomes {dict(worker.handler.outcomes)}; tasks {seen}") from exc
    assert worker.handler.outcomes["settled_early"] == 3, dict(worker.handler.outcomes)
    # A waiting delivery sends its copy round: the copy, delivered before the publish's confirm resumes the
    # old flight, must not find its task "in flight here" (that sends it round for a whole lease).
    assert counter(TASK_START_DEFERRALS, "general", "in_flight") == in_flight
    spans = sorted((r.started_at, r.finished_at) for r in records)
    for (_, finished), (started, _) in itertools.pairwise(spans):
        assert finished is not None and started is not None and started >= finished, "one at a time"


async def test_a_delivery_sent_round_is_not_taken_for_a_duplicate_of_itself(
    harness: Harness,
    make_settings: Callable[..., ServiceSettings],
    write_catalog: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A delivery that finds no free slot publishes its copy and only then ends. On a loaded machine the
    # broker delivers the copy before the publish's confirm resumes the old delivery: played here by a
    # real publish whose return is late. The copy must run as soon as a slot frees, not be taken for a
    # duplicate of a task "in flight here" and sent round for a whole lease.
    await harness.script([{"delay_seconds": 1.2, "content": "slow answer"}], repeat_last=True)
    settings = make_settings(catalog=write_catalog(concurrency=1), settle_after_seconds=0.3)
    in_flight = counter(TASK_START_DEFERRALS, "general", "in_flight")
    no_slot = counter(TASK_START_DEFERRALS, "general", "no_slot")
    async with running_worker(settings, "general") as worker:
        publisher = worker.context.publisher
        publish = publisher.publish

        async def confirmed_late(*args: Any, **kwargs: Any) -> None:
            await publish(*args, **kwargs)
            await asyncio.sleep(0.5)

        monkeypatch.setattr(publisher, "publish", confirmed_late)
        messages = [await harness.submit(f"long task {i}") for i in range(2)]
        for m in messages:
            await harness.wait(m.task_id, TaskStatus.COMPLETED, within=60)
    assert counter(TASK_START_DEFERRALS, "general", "no_slot") > no_slot, "no delivery was sent round"
    assert counter(TASK_START_DEFERRALS, "general", "in_flight") == in_flight

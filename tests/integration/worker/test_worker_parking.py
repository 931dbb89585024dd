"""A worker's refused start parks the task (issue 15, "park, don't churn"): the message is acked and nothing
goes round the delay queues; the task waits in the store until its tenant has room, then the feeder's
release publishes it again and it runs."""

from __future__ import annotations

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import WorkMessage
from taskyard_common.store import DEFAULT_TENANT
from taskyard_common.store.tenant_limits import TenantLimitStore
from taskyard_worker.app import running_worker
from tests.integration.worker.helpers import Harness, wait_outcome


async def test_a_start_refused_at_the_cap_is_parked_and_runs_once_released(harness: Harness) -> None:
    await TenantLimitStore(harness.store.pool).put(DEFAULT_TENANT, max_running=1)
    await harness.script([{"delay_seconds": 1.0, "content": "done"}], repeat_last=True)
    first, *rest = [await harness.submit(f"Task number {i}") for i in range(3)]
    async with running_worker(harness.settings, "general") as worker:
        await wait_outcome(worker, "parked", 2)
        # Parked and acked: no message of theirs anywhere, nothing charged.
        assert await harness.bus.work_depth() == 0 and await harness.bus.delayed() == 0
        assert await harness.store.parked_count("general", DEFAULT_TENANT) == 2
        for message in rest:
            record = await harness.store.get(message.task_id)
            assert record is not None and record.status is TaskStatus.QUEUED and record.attempts == 0
            assert record.attempt_log[-1]["reason"] == "tenant_max_running"
        await harness.wait(first.task_id, TaskStatus.COMPLETED)
        # The running task ended: the feeder's release has room for one (the cap), then for the other.
        for message in rest:
            [released] = await harness.store.release_parked({"general": 10}, limit=10)
            assert released.id == message.task_id
            await harness.bus.send_work(WorkMessage.from_record(released))
            await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert worker.handler.outcomes["completed"] == 3

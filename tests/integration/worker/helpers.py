"""Helpers of the worker's integration tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg
from prometheus_client import Counter

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import ControlMessage, WorkMessage
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore, TaskRecord
from taskyard_common.topology import DELAY_TIERS
from taskyard_devkit.devllm import DevLlm
from taskyard_worker.app import Worker
from taskyard_worker.settings import ServiceSettings
from tests.support.bus import Bus as SharedBus
from tests.support.polling import eventually

# submit(task_input=..., specialist=...) → the published WorkMessage
Submit = Callable[..., Awaitable[WorkMessage]]


class Bus(SharedBus):
    """Publishes work and control messages and reads queue depths."""

    async def cancel(self, task_id: UUID) -> None:
        """Publish the control message the API sends after ``store.cancel``."""
        await self.publisher.publish(self.topology.control_exchange, "", ControlMessage(task_id=task_id))

    async def work_depth(self, specialist: str = "general") -> int:
        return await self.depth(self.topology.specialist_queue(specialist))

    async def dead_letters(self) -> int:
        return await self.depth(self.topology.dead_letter_queue)

    async def quarantine_depth(self, specialist: str = "general") -> int:
        return await self.depth(self.topology.quarantine_queue(specialist))

    async def delayed(self) -> int:
        """Messages waiting in any delay tier."""
        return sum([await self.depth(self.topology.delay_queue(tier)) for tier in DELAY_TIERS])


async def wait_status(
    store: PostgresTaskStore, task_id: UUID, status: TaskStatus, *, within: float = 20
) -> TaskRecord:
    async def reached() -> bool:
        record = await store.get(task_id)
        return record is not None and record.status is status

    await eventually(reached, timeout=within, what=f"task {task_id} {status}")
    record = await store.get(task_id)
    assert record is not None
    return record


async def wait_outcome(worker: Worker, outcome: str, count: int = 1, *, within: float = 20) -> None:
    """Until the worker's handler has seen ``count`` deliveries end in ``outcome``."""

    async def reached() -> bool:
        return worker.handler.outcomes[outcome] >= count

    await eventually(reached, timeout=within, what=f"{count} deliveries {outcome}")


async def crash(worker: Worker) -> None:
    """What a killed process does, in-process: the connection drops with every delivery unacked (the
    broker requeues them as redelivered), and the work in flight dies with it: nothing is recorded, nothing
    handed back, the leases are left to run out."""
    await worker.resources.connection.close()
    for task in worker.flights.in_flight():
        task.cancel()


def counter(metric: Counter, *labels: str) -> float:
    """A counter's current value (metrics are process-wide: compare before and after)."""
    return metric.labels(*labels)._value.get()


@dataclass
class Harness:
    """What a worker test drives: the worker's settings, the store, the bus and this test's LLM model."""

    settings: ServiceSettings
    store: PostgresTaskStore
    bus: Bus
    devllm: DevLlm
    model: str
    submit: Submit
    db: DbSettings

    async def script(self, steps: list[dict[str, Any]], *, repeat_last: bool = False) -> None:
        await self.devllm.script(self.model, steps, repeat_last=repeat_last)

    async def llm_requests(self) -> list[dict[str, Any]]:
        return await self.devllm.requests(self.model)

    async def wait(self, task_id: UUID, status: TaskStatus, *, within: float = 20) -> TaskRecord:
        return await wait_status(self.store, task_id, status, within=within)

    async def wait_llm_calls(self, count: int) -> None:
        async def reached() -> bool:
            return len(await self.llm_requests()) >= count

        await eventually(reached, what=f"{count} LLM calls")

    async def count(self, status: TaskStatus, specialist: str = "general") -> int:
        return len(await self.store.list(status=status, specialist=specialist, limit=1000, after=None))

    async def steal_lease(self, task_id: UUID, owner: str = "another-worker") -> None:
        """What a takeover leaves in the store: the task running under another owner's live lease (after
        this worker stalled past its lease, the reaper or another worker took the task)."""
        conn = await asyncpg.connect(self.db.url.get_secret_value())
        try:
            await conn.execute(
                f'UPDATE "{self.db.db_schema}".tasks SET lease_owner = $2,'
                " lease_expires_at = clock_timestamp() + interval '60 seconds' WHERE id = $1",
                task_id,
                owner,
            )
        finally:
            await conn.close()

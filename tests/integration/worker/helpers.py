"""Helpers of the worker's integration tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from aio_pika.abc import AbstractChannel

from taskyard_common.amqp import Publisher
from taskyard_common.messages import TaskStatus, WorkMessage
from taskyard_common.store import PostgresTaskStore, TaskRecord
from taskyard_common.topology import Topology
from taskyard_worker.settings import ServiceSettings
from tests.support.devllm import DevLlm
from tests.support.processes import eventually

# submit(task_input=..., specialist=...) → the published WorkMessage
Submit = Callable[..., Awaitable[WorkMessage]]


class Bus:
    """The test's side of the broker: publishes work messages and reads queue depths."""

    def __init__(self, channel: AbstractChannel, publisher: Publisher, topology: Topology) -> None:
        self.channel = channel
        self.publisher = publisher
        self.topology = topology

    async def publish(self, message: WorkMessage) -> None:
        await self.publisher.publish(self.topology.tasks_exchange, message.specialist, message)

    async def depth(self, queue: str) -> int:
        """Ready messages (not the ones a consumer holds unacked)."""
        declared = await self.channel.declare_queue(queue, passive=True)
        count = declared.declaration_result.message_count
        assert count is not None
        return count

    async def work_depth(self, specialist: str = "general") -> int:
        return await self.depth(self.topology.specialist_queue(specialist))

    async def dead_letters(self) -> int:
        return await self.depth(self.topology.dead_letter_queue)


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


@dataclass
class Harness:
    """What a worker test drives: the worker's settings, the store, the bus and this test's LLM model."""

    settings: ServiceSettings
    store: PostgresTaskStore
    bus: Bus
    devllm: DevLlm
    model: str
    submit: Submit

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

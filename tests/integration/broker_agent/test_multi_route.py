"""multi_route through the broker agent in-process, with the real broker, database and development model
server: a request of two jobs becomes a group of two parts whose combine step is the task itself; the same
answer with multi_route off routes the task to one specialist, as before."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

from taskyard_broker_agent.agent import BrokerAgent
from taskyard_broker_agent.settings import ServiceSettings
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutedPart, RoutingMethod, Usage
from taskyard_common.settings import CatalogSettings
from taskyard_common.store import PostgresTaskStore, TaskRecord

pytestmark = pytest.mark.integration

REQUEST = "Summarize the attached report in five bullet points, and find sources on the history of Raft."
PARTS = [
    {"specialist": "summarizer", "job": "summarize the report in five bullet points"},
    {"specialist": "researcher", "job": "find sources on the history of Raft"},
]


def route_task(parts: list[dict[str, str]]) -> dict[str, Any]:
    arguments = {"reason": "a summary and a literature search", "specialist": "summarizer",
                 "confidence": 0.9, "parts": parts}  # fmt: skip
    return {"tool_calls": [{"name": "route_task", "arguments": arguments}]}


@pytest.fixture
def multi_catalog(catalog_path: Path, tmp_path: Path) -> Path:
    data = yaml.safe_load(catalog_path.read_text())
    data["multi_route"] = True
    path = tmp_path / "specialists.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def run_multi(make_settings: Callable[..., ServiceSettings], multi_catalog: Path):
    @asynccontextmanager
    async def run(**kwargs: Any) -> AsyncIterator[BrokerAgent]:
        settings = make_settings(**kwargs).model_copy(update={"catalog": CatalogSettings(path=multi_catalog)})
        async with BrokerAgent(settings) as agent:
            yield agent

    return run


async def finish(store: PostgresTaskStore, task_id: uuid.UUID, output: str) -> None:
    """What a worker records: the lease, then the answer."""
    started = await store.start(task_id, owner="test-worker", lease_seconds=30, attempt=1)
    assert started.record is not None, started
    assert await store.complete(task_id, {"output": output}, Usage(), "test-worker")


async def test_a_request_of_two_jobs_becomes_a_group_of_two_parts_and_a_combine_step(
    run_multi, bus, new_task, store: PostgresTaskStore, devllm, llm_settings
):
    model = devllm.new_model()
    await devllm.script(model, [route_task(PARTS)])
    message = await new_task(REQUEST, metadata={"team": "a"})
    async with run_multi(llm=llm_settings(model)):
        await bus.send(message)
        works = {
            w.specialist: w for w in [await bus.wait_work("summarizer"), await bus.wait_work("researcher")]
        }
    [request] = await devllm.requests(model)
    assert "parts" in request["tools"][0]["function"]["parameters"]["properties"]

    task = await store.get(message.task_id)
    assert task is not None and task.status is TaskStatus.WAITING
    # The decision records the split and why; the combining specialist (the fallback) is the task's.
    assert task.routing is not None and task.routing.method is RoutingMethod.LLM
    assert (task.specialist, task.routing.specialist) == ("general", "general")
    assert task.routing.reason == "a summary and a literature search"
    assert task.routing.parts == tuple(RoutedPart.model_validate(p) for p in PARTS)
    assert task.group_id is not None and task.group_role == "reduce"
    group = await store.get_group(task.group_id)
    assert group is not None
    assert (group.status, group.total, group.reduce_task_id) == ("running", 2, task.id)
    assert group.counts == {"queued": 2} and group.metadata == {"team": "a"}
    assert group.reduce == {"specialist": "general"}  # as the API reads a reduce request
    # Each part is a child of the group that reads the whole request and is told its job.
    for part in PARTS:
        child = await store.get(works[part["specialist"]].task_id)
        assert child is not None and (child.group_id, child.group_role) == (task.group_id, "child")
        assert child.input == REQUEST and child.metadata == {"team": "a"}
        assert child.instructions is not None and json.dumps(part["job"]) in child.instructions
    assert (await store.workflow_counts()).waiting_parts == 1

    # The first part's end changes nothing; the last one's queues the task with both outcomes.
    await finish(store, works["summarizer"].task_id, "SUMMARY-1")
    assert (await store.get(task.id)).status is TaskStatus.WAITING  # type: ignore[union-attr]
    await finish(store, works["researcher"].task_id, "SOURCES-2")
    combine: TaskRecord | None = await store.get(task.id)
    assert combine is not None and combine.status is TaskStatus.QUEUED and combine.published_at is None
    assert combine.instructions is not None
    outcomes = json.loads(combine.instructions.split("\n\n", 1)[1])["parts"]
    assert sorted((o["specialist"], o["status"], o["output"]) for o in outcomes) == [
        ("researcher", "completed", "SOURCES-2"),
        ("summarizer", "completed", "SUMMARY-1"),
    ]
    assert "parts_finished" in [e.type for e in await store.events(task.id)]

    # The combine step's end ends the group, once, and counts its fan-in latency.
    before = REGISTRY.get_sample_value("taskyard_group_reduce_latency_seconds_count") or 0.0
    await finish(store, task.id, "COMBINED")
    group = await store.get_group(task.group_id)
    assert group is not None and group.status == "completed"
    assert REGISTRY.get_sample_value("taskyard_group_reduce_latency_seconds_count") == before + 1
    assert (await store.settle_group(task.group_id)) == "completed"
    counts = await store.workflow_counts()
    assert (counts.groups, counts.waiting_parts) == (0, 0)


async def test_cancelling_a_split_task_cancels_its_parts(run_multi, bus, new_task, store: PostgresTaskStore):
    # The rules router (no LLM) splits a request whose sentences start distinct jobs.
    message = await new_task(
        "Summarize this report in five bullet points. Also find sources on Raft consensus."
    )
    async with run_multi():
        await bus.send(message)
        await bus.wait_work("summarizer")
        await bus.wait_work("researcher")
    task = await store.get(message.task_id)
    assert task is not None and task.status is TaskStatus.WAITING and task.group_id is not None
    assert task.routing is not None and task.routing.method is RoutingMethod.RULES
    assert task.routing.reason.startswith("distinct jobs: summarizer")

    cancelled = await store.cancel(task.id)
    assert cancelled is not None and cancelled.status is TaskStatus.CANCELLED
    assert await store.cancel_descendants(task.id) == []  # nothing was running
    group = await store.get_group(task.group_id)
    assert group is not None and (group.status, group.counts) == ("cancelled", {"cancelled": 2})


async def test_with_multi_route_off_the_same_answer_routes_to_one_specialist(
    run_agent, bus, new_task, store: PostgresTaskStore, devllm, llm_settings
):
    model = devllm.new_model()
    await devllm.script(model, [route_task(PARTS)])
    message = await new_task(REQUEST)
    async with run_agent(llm=llm_settings(model)):
        await bus.send(message)
        work = await bus.wait_work("summarizer")
    [request] = await devllm.requests(model)
    assert "parts" not in request["tools"][0]["function"]["parameters"]["properties"]
    assert work.task_id == message.task_id and work.routing.parts == ()
    task = await store.get(message.task_id)
    assert task is not None and task.status is TaskStatus.QUEUED and task.group_id is None
    assert await bus.depth(bus.topology.specialist_queue("researcher")) == 0


async def test_a_settlement_a_crash_skipped_is_found_and_queues_the_combine_step(
    run_multi, bus, new_task, store: PostgresTaskStore
):
    message = await new_task(
        "Summarize this report in five bullet points. Also find sources on Raft consensus."
    )
    async with run_multi():
        await bus.send(message)
        await bus.wait_work("summarizer")
        await bus.wait_work("researcher")
    task = await store.get(message.task_id)
    assert task is not None and task.group_id is not None
    # The parts ended, and the process that ended the last one died before settling the group.
    await store.pool.execute(
        "UPDATE tasks SET status = 'failed', finished_at = clock_timestamp() WHERE group_id = $1"
        " AND group_role = 'child'",
        task.group_id,
    )
    assert task.group_id in await store.unsettled_groups()
    await store.settle_groups(await store.unsettled_groups())
    combine = await store.get(task.id)
    assert combine is not None and combine.status is TaskStatus.QUEUED
    assert task.group_id not in await store.unsettled_groups()

"""Delegation: a parent waits for its child holding no worker slot, and resumes with the child's answer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, RoutingDecision, RoutingMethod, WorkMessage
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, wait_outcome
from tests.support.polling import eventually

pytestmark = pytest.mark.integration

DELEGATE = {
    "tool_calls": [
        {"name": "delegate", "arguments": {"task": "child job: count to three", "specialist": "general"}}
    ]
}


async def route_children(harness: Harness, parent_id) -> list:
    """Play the broker agent for the parent's children: route each, send its work message."""
    children = []
    for link in await harness.store.children(parent_id):
        decision = RoutingDecision(
            method=RoutingMethod.EXPLICIT, specialist="general", reason="t", confidence=1
        )
        if await harness.store.route(link["id"], decision):
            child = await harness.store.get(link["id"])
            await harness.bus.send_work(WorkMessage.from_record(child))
            children.append(child)
    return children


async def test_a_parent_waits_without_a_slot_and_resumes_with_its_childs_answer(
    harness: Harness, make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> None:
    await harness.devllm.script(
        harness.model, [DELEGATE, {"content": "parent done"}], by_turn=True, when="parent task"
    )
    await harness.devllm.script(harness.model, [{"content": "one two three"}], by_turn=True, when="child job")
    settings = make_settings(catalog=write_catalog(concurrency=1, tools=("calculator", "delegate")))
    parent = await harness.submit("parent task: please delegate", priority=Priority.HIGH)
    async with running_worker(settings, "general") as worker:
        waiting = await harness.wait(parent.task_id, TaskStatus.WAITING)
        await wait_outcome(worker, "delegated")
        assert waiting.lease_owner is None and waiting.waiting_children == 1

        async def no_flight() -> bool:
            return len(worker.flights) == 0

        await eventually(no_flight, what="the parent's delivery done: a waiting parent holds no slot")
        # The one slot (concurrency 1) runs the child while the parent waits.
        [child] = await route_children(harness, parent.task_id)
        assert child.parent_id == parent.task_id and child.depth == 1
        assert child.priority is Priority.HIGH, "delegated work waits at its parent's priority"
        done_child = await harness.wait(child.id, TaskStatus.COMPLETED)
        done = await harness.wait(parent.task_id, TaskStatus.COMPLETED)
    assert done_child.result is not None and done_child.result["output"] == "one two three"
    assert done.result is not None and done.result["output"] == "parent done"
    assert [c["name"] for c in done.result["tool_calls"]] == ["delegate"]
    results = [s for s in await harness.store.steps(parent.task_id) if s.call_id]
    assert [r.message["content"] for r in results] == ["one two three"]
    assert [e["event"] for e in done.attempt_log if "event" in e] == ["resumed"]


async def test_cancelling_a_waiting_parent_cancels_its_child(
    harness: Harness, make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> None:
    await harness.devllm.script(harness.model, [DELEGATE], by_turn=True, when="parent task")
    settings = make_settings(catalog=write_catalog(tools=("delegate",)))
    parent = await harness.submit("parent task: delegate and wait")
    async with running_worker(settings, "general"):
        await harness.wait(parent.task_id, TaskStatus.WAITING)
        [link] = await harness.store.children(parent.task_id)
        assert (await harness.store.cancel(parent.task_id)).status is TaskStatus.CANCELLED
        assert await harness.store.cancel_descendants(parent.task_id) == []

        async def child_cancelled() -> bool:
            child = await harness.store.get(link["id"])
            return child is not None and child.status is TaskStatus.CANCELLED

        await eventually(child_cancelled, what="the child cancelled")


async def test_delegation_beyond_the_depth_limit_is_an_error_the_model_reads(
    harness: Harness, make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> None:
    await harness.devllm.script(harness.model, [DELEGATE, {"content": "did it myself"}], by_turn=True)
    settings = make_settings(catalog=write_catalog(tools=("delegate",)), max_delegation_depth=0)
    task = await harness.submit("parent task: may not delegate")
    async with running_worker(settings, "general"):
        done = await harness.wait(task.task_id, TaskStatus.COMPLETED)
    assert done.result is not None and done.result["output"] == "did it myself"
    assert await harness.store.children(task.task_id) == []
    [result] = [s for s in await harness.store.steps(task.task_id) if s.call_id]
    assert result.message["content"].startswith("error: delegation refused")

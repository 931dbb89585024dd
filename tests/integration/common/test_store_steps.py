"""Step checkpoints in the real store: recorded only under the lease, once per (step, call), read back in
conversation order, forgotten on a run from scratch."""

import asyncio
import uuid

import pytest

from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, Step
from taskyard_common.store.steps import step_bytes

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1.0)


async def running(store, owner="w"):
    task = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    assert await store.route(task.id, DECISION)
    assert (await store.start(task.id, owner=owner, lease_seconds=30, attempt=1)).record is not None
    return task.id


def reply(task_id, step, calls=()):
    message = {"role": "assistant", "content": None if calls else f"answer {step}"}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "calculator", "arguments": "{}"}}
            for c in calls
        ]
    return Step(task_id=task_id, step=step, message=message, usage=Usage(prompt_tokens=3, total_tokens=3))


def result(task_id, step, call_id, text="42"):
    message = {"role": "tool", "tool_call_id": call_id, "content": text}
    return Step(task_id=task_id, step=step, call_id=call_id, message=message, ok=True)


async def test_steps_of_several_tasks_in_one_batch_come_back_in_order(store):
    one, two = await running(store), await running(store)
    batch = [result(one, 1, "b"), reply(one, 1, ["a", "b"]), result(one, 1, "a"), reply(two, 1)]
    assert await store.record_steps(batch, owner="w") == {one, two}
    steps = await store.steps(one)
    # The reply first, then its tool results (in the order they were recorded).
    assert [(s.step, s.call_id) for s in steps] == [(1, ""), (1, "b"), (1, "a")]
    assert steps[0].usage == Usage(prompt_tokens=3, total_tokens=3) and steps[1].ok is True
    assert steps[1].message == {"role": "tool", "tool_call_id": "b", "content": "42"}
    assert (await store.get(one)).checkpoint_bytes == sum(step_bytes(s) for s in batch[:3])
    assert [s.message["content"] for s in await store.steps(two)] == ["answer 1"]


async def test_a_recorded_step_is_kept_as_it_was(store):
    task_id = await running(store)
    assert await store.record_steps([result(task_id, 1, "a", "first")], owner="w") == {task_id}
    size = (await store.get(task_id)).checkpoint_bytes
    # The same tool call recorded again (a resumed attempt that ran it anyway): the first result stays.
    assert await store.record_steps([result(task_id, 1, "a", "second")], owner="w") == {task_id}
    assert [s.message["content"] for s in await store.steps(task_id)] == ["first"]
    assert (await store.get(task_id)).checkpoint_bytes == size


async def test_only_the_lease_owner_records(store):
    task_id = await running(store, owner="w")
    assert await store.record_steps([reply(task_id, 1)], owner="other") == set()
    assert await store.steps(task_id) == []
    await store.release(task_id, "w")
    assert await store.record_steps([reply(task_id, 1)], owner="w") == set(), "released: no lease any more"
    assert await store.steps(task_id) == []


async def test_discard_forgets_the_steps_and_their_size(store):
    task_id = await running(store)
    await store.record_steps([reply(task_id, 1, ["a"]), result(task_id, 1, "a")], owner="w")
    assert await store.discard_steps(task_id) == 2
    assert await store.steps(task_id) == [] and (await store.get(task_id)).checkpoint_bytes == 0


async def test_usage_counts_each_call_once_steps_then_outcomes(store):
    task_id = await running(store)
    # Steps add their calls' usage when recorded (once, however often they are recorded)...
    await store.record_steps([reply(task_id, 1, ["a"]), result(task_id, 1, "a")], owner="w")
    await store.record_steps([reply(task_id, 1, ["a"])], owner="w")
    assert (await store.get(task_id)).usage == Usage(prompt_tokens=3, total_tokens=3)
    # ...and an outcome adds what the attempt used beyond them.
    extra = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    assert await store.complete(task_id, {"output": "x"}, extra, owner="w")
    assert (await store.get(task_id)).usage == Usage(prompt_tokens=4, completion_tokens=2, total_tokens=6)


async def test_a_resumed_attempt_notes_it_in_the_history(store):
    task_id = await running(store)
    entry = {"event": "resumed", "attempt": 1, "resumed_from_step": 3}
    assert await store.append_attempt_log(task_id, "w", entry)
    assert not await store.append_attempt_log(task_id, "other", entry), "only under the lease"
    assert (await store.get(task_id)).attempt_log == [entry]


async def test_concurrent_batches_of_the_same_tasks_never_deadlock(store):
    # Many statements at once, each adding steps to the same tasks: with a share lock taken first, two of
    # them could each hold it and wait for the other to update the task (PostgreSQL then fails one).
    tasks = [await running(store) for _ in range(3)]
    batches = [[result(t, step, "a") for t in tasks] for step in range(1, 25)]
    held = await asyncio.gather(*(store.record_steps(batch, owner="w") for batch in batches))
    assert all(h == set(tasks) for h in held)
    for task_id in tasks:
        assert len(await store.steps(task_id)) == len(batches)

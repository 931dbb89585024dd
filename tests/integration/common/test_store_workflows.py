"""Workflows in the real store: a chain's next step created with the completion, a waiting parent resumed
by its last child, a group's reduce step created exactly once however its children end."""

import asyncio
import time
import uuid

import pytest

from taskyard_common.ids import uuid7_time_ms
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, TaskRecord
from taskyard_common.task_errors import TaskErrorType, task_error

pytestmark = pytest.mark.integration


def decision(specialist: str = "general") -> RoutingDecision:
    return RoutingDecision(method=RoutingMethod.EXPLICIT, specialist=specialist, reason="r", confidence=1.0)


async def running(store, task: NewTask, owner: str = "w") -> TaskRecord:
    await store.create(task)
    assert await store.route(task.id, decision())
    started = await store.start(task.id, owner=owner, lease_seconds=30, attempt=1)
    assert started.record is not None
    return started.record


def new(**fields) -> NewTask:
    return NewTask(
        id=uuid.uuid4(), input=fields.pop("input", "x"), metadata=fields.pop("metadata", {}), **fields
    )


@pytest.fixture
def announced(store):
    records: list[TaskRecord] = []
    store.on_follow_up = records.append
    return records


async def test_a_completed_chain_step_creates_the_next_one_with_its_output(store, announced):
    steps = [{"specialist": "summarizer", "instructions": "Summarize it."}, {"instructions": "Translate."}]
    first = await running(
        store, new(chain_rest=steps, webhook={"url": "https://e.com/h", "events": ["completed", "failed"]})
    )
    assert first.chain_root_id == first.id and first.chain_index == 0
    assert await store.complete(first.id, {"output": "the research"}, Usage(), owner="w")
    [second] = announced
    assert (second.status, second.input, second.parent_id) == (TaskStatus.PENDING, "the research", first.id)
    assert (second.requested_specialist, second.instructions) == ("summarizer", "Summarize it.")
    assert (second.chain_root_id, second.chain_index, second.chain_rest) == (first.id, 1, steps[1:])
    assert second.webhook == first.webhook, "the chain's webhook moves along"
    assert [s["id"] for s in await store.chain(first.id)] == [first.id, second.id]
    # The store makes the next step's id itself: a time-ordered UUIDv7 of now, like the ones Python makes.
    assert second.id.version == 7 and abs(uuid7_time_ms(second.id) / 1000 - time.time()) < 60
    # A step that completes with steps to come announces nothing to the webhook; the chain's end does.
    assert (
        await store.pool.fetchval("SELECT count(*) FROM webhook_deliveries WHERE task_id = $1", first.id) == 0
    )


async def test_a_failed_chain_step_ends_the_chain(store, announced):
    first = await running(store, new(chain_rest=[{"instructions": "next"}]))
    assert await store.fail(first.id, task_error(TaskErrorType.AGENT_ERROR, "no"), Usage(), owner="w")
    assert announced == [] and [s["id"] for s in await store.chain(first.id)] == [first.id]


def child_of(parent: TaskRecord, call_id: str, step: int = 1) -> NewTask:
    delegation = {"parent_id": str(parent.id), "call_id": call_id, "step": step}
    return new(
        input=f"sub-task {call_id}", parent_id=parent.id, delegation=delegation, depth=parent.depth + 1
    )


async def test_a_parent_waits_for_its_children_and_resumes_with_their_outcomes(store, announced):
    parent = await running(store, new())
    children = await store.delegate(parent.id, "w", [child_of(parent, "a"), child_of(parent, "b")])
    assert children is not None and len(children) == 2
    waiting = await store.get(parent.id)
    assert (
        waiting.status is TaskStatus.WAITING and waiting.lease_owner is None and waiting.waiting_children == 2
    )
    assert await store.delegate(parent.id, "w", [child_of(parent, "c")]) is None, "not running any more"
    one, two = children
    for child in children:
        assert await store.route(child.id, decision())
        await store.start(child.id, owner="w2", lease_seconds=30, attempt=1)
    assert await store.complete(one.id, {"output": "found it"}, Usage(), owner="w2")
    assert (await store.get(parent.id)).status is TaskStatus.WAITING and announced == []
    assert await store.fail(two.id, task_error(TaskErrorType.AGENT_ERROR, "broken"), Usage(), owner="w2")
    [resumed] = announced
    assert resumed.id == parent.id and resumed.status is TaskStatus.QUEUED and resumed.published_at is None
    results = {s.call_id: s for s in await store.steps(parent.id)}
    assert results["a"].message["content"] == "found it" and results["a"].ok is True
    assert results["b"].message["content"].startswith(f"error: the delegated task {two.id} ended failed")
    assert results["b"].ok is False
    assert [c["id"] for c in await store.children(parent.id)] == [one.id, two.id]
    types = [e.type for e in await store.events(parent.id)]
    assert types[-3:] == ["delegated", "child_finished", "child_finished"]


async def test_cancelling_a_parent_cancels_its_tree(store):
    parent = await running(store, new())
    [child] = await store.delegate(parent.id, "w", [child_of(parent, "a")])
    assert await store.route(child.id, decision())
    await store.start(child.id, owner="w2", lease_seconds=30, attempt=1)
    [grandchild] = await store.delegate(child.id, "w2", [child_of(child, "g")])
    assert (await store.cancel(parent.id)).status is TaskStatus.CANCELLED, "a waiting parent: at once"
    assert await store.cancel_descendants(parent.id) == []
    for task_id in (child.id, grandchild.id):
        assert (await store.get(task_id)).status is TaskStatus.CANCELLED


async def group(store, n: int, reduce: dict | None) -> tuple[uuid.UUID, list[TaskRecord]]:
    group_id = uuid.uuid4()
    tasks = [new(input=f"item {i}", group_id=group_id, group_role="child") for i in range(n)]
    records = await store.create_group(group_id, tenant="default", tasks=tasks, reduce=reduce, metadata={})
    for record in records:
        assert await store.route(record.id, decision())
        await store.start(record.id, owner="w", lease_seconds=30, attempt=1)
    return group_id, records


async def test_the_reduce_step_is_created_once_when_the_last_child_ends(store, announced):
    group_id, children = await group(store, 20, {"instructions": "Count them."})
    # Children end concurrently, on different connections.
    outcomes = [
        store.complete(c.id, {"output": f"out {i}"}, Usage(), owner="w")
        if i % 5
        else store.fail(c.id, task_error(TaskErrorType.AGENT_ERROR, "no"), Usage(), owner="w")
        for i, c in enumerate(children)
    ]
    assert all(await asyncio.gather(*outcomes))
    [reduce] = announced
    assert reduce.group_role == "reduce" and reduce.instructions == "Count them."
    assert len(reduce.input["children"]) == 20
    assert sum(1 for c in reduce.input["children"] if c["status"] == "failed") == 4
    record = await store.get_group(group_id)
    assert record.reduce_task_id == reduce.id and record.status == "running"
    assert record.counts == {"completed": 16, "failed": 4}
    assert await store.unsettled_groups() == [] or group_id not in await store.unsettled_groups()
    await store.settle_group(group_id)
    assert len(announced) == 1, "settling again creates nothing"
    assert await store.route(reduce.id, decision())
    await store.start(reduce.id, owner="w", lease_seconds=30, attempt=1)
    assert await store.complete(reduce.id, {"output": "20 items"}, Usage(), owner="w")
    assert (await store.get_group(group_id)).status == "completed"


async def test_a_group_without_reduce_ends_with_its_children_and_can_be_cancelled(store, announced):
    group_id, children = await group(store, 3, None)
    for child in children:
        assert await store.complete(child.id, {"output": "ok"}, Usage(), owner="w")
    assert (await store.get_group(group_id)).status == "completed" and announced == []
    cancelled_id, pending = await group(store, 3, {"instructions": "never"})
    assert set(await store.cancel_group(cancelled_id)) == {c.id for c in pending}, "running: asked to stop"
    for child in pending:
        assert await store.cancel_running(child.id, "w", Usage())
    assert (await store.get_group(cancelled_id)).status == "cancelled" and announced == []


async def test_a_tasks_links_come_in_one_read(store, announced):
    first = await running(store, new(chain_rest=[{"specialist": "summarizer"}]))
    [child] = await store.delegate(first.id, "w", [child_of(first, "a")])
    steps, children = await store.links(first.id, first.chain_root_id)
    assert [s["id"] for s in steps] == [first.id] and [c["id"] for c in children] == [child.id]
    assert children[0]["specialist"] is None and children[0]["status"] == "pending"
    plain = await running(store, new(requested_specialist="general"))
    assert await store.links(plain.id, None) == ([], [])


async def test_a_group_refused_half_way_is_taken_back(store, announced):
    group_id = uuid.uuid4()
    tasks = [new(input=f"item {i}", group_id=group_id, group_role="child") for i in range(3)]
    created, _, _, records = await store.create_group_idempotent(
        group_id,
        tenant="default",
        tasks=tasks,
        reduce=None,
        metadata={},
        key="k",
        request_hash="h",
        retention_seconds=60,
    )
    assert created and (await store.get_group(group_id)).unannounced == 3
    await store.mark_published(records[0].id)
    assert (await store.get_group(group_id)).unannounced == 2
    # Nothing routed yet: all of it goes, the key too.
    assert await store.discard_group(group_id) == []
    assert await store.get_group(group_id) is None and await store.get(records[0].id) is None
    assert await store.pool.fetchval("SELECT count(*) FROM group_idempotency_keys") == 0

    # One child was routed from an early publish, another is running: those are cancelled, the rest go.
    kept_id = uuid.uuid4()
    tasks = [new(input=f"item {i}", group_id=kept_id, group_role="child") for i in range(3)]
    records = await store.create_group(kept_id, tenant="default", tasks=tasks, reduce={}, metadata={})
    assert await store.route(records[0].id, decision()) and await store.route(records[1].id, decision())
    await store.start(records[1].id, owner="w", lease_seconds=30, attempt=1)
    assert await store.discard_group(kept_id) == [records[1].id]
    assert (await store.get(records[0].id)).status is TaskStatus.CANCELLED
    assert (await store.get(records[1].id)).cancel_requested_at is not None
    assert await store.get(records[2].id) is None
    assert await store.cancel_running(records[1].id, "w", Usage())
    group = await store.get_group(kept_id)
    assert group.status == "cancelled" and group.reduce_task_id is None and announced == []


async def test_group_keys_expire(store):
    group_id = uuid.uuid4()
    await store.create_group_idempotent(
        group_id,
        tenant="default",
        tasks=[new(group_id=group_id, group_role="child")],
        reduce=None,
        metadata={},
        key="k",
        request_hash="h",
        retention_seconds=60,
    )
    now = await store.pool.fetchval("SELECT clock_timestamp()")
    assert await store.expire_group_idempotency_keys(now) == 1
    assert await store.get_group(group_id) is not None, "the group stays; only its key is forgotten"

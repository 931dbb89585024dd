"""The event log in the real store: every transition appends its event in the same statement, numbered
per task in order, and a terminal status a webhook asks for writes its delivery to the outbox."""

import asyncio
import uuid

import pytest

from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, Step
from taskyard_common.store.events import MAX_EVENTS_PER_TASK
from taskyard_common.task_errors import TaskErrorType, task_error
from tests.support.polling import eventually

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.LLM, specialist="general", reason="r", confidence=0.8)


async def types(store, task_id):
    events = await store.events(task_id)
    assert [e.seq for e in events] == list(range(1, len(events) + 1)), "numbered 1, 2, 3, ... without gaps"
    return [e.type for e in events]


async def test_a_task_tells_its_story_in_order(store):
    changed: list[uuid.UUID] = []
    store.on_change = changed.append
    task = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    assert changed == [], "a new task: nobody watches it yet"
    await store.versions([task.id], watch_seconds=60)  # now someone does
    assert await store.route(task.id, DECISION)
    await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
    reply = Step(
        task_id=task.id,
        step=1,
        message={"role": "assistant", "content": None, "tool_calls": [{"id": "a"}]},
        usage=Usage(total_tokens=9, cost=0.25, model="m1"),
        latency_ms=12.5,
    )
    result = Step(task_id=task.id, step=1, call_id="a", message={"role": "tool"}, ok=True, name="calculator")
    await store.record_steps([result, reply], owner="w")
    assert await store.append_events(task.id, "w", [("token", {"text": "4"}), ("token", {"text": "2"})])
    assert await store.complete(task.id, {"output": "42"}, Usage(total_tokens=1), owner="w")
    assert await types(store, task.id) == [
        "accepted",
        "routed",
        "attempt_started",
        "llm_call",
        "tool_call",
        "token",
        "token",
        "completed",
    ]
    events = {e.type: e for e in await store.events(task.id)}
    assert events["routed"].data == {
        "method": "llm",
        "specialist": "general",
        "confidence": 0.8,
        "cached": False,
    }
    assert events["llm_call"].data == {
        "step": 1,
        "tokens": 9,
        "latency_ms": 12.5,
        "model": "m1",
        "cost": 0.25,
    }
    assert events["tool_call"].data == {"step": 1, "name": "calculator", "ok": True, "call_id": "a"}
    assert events["completed"].data["result"] == {"output": "42"}
    assert [e.type for e in await store.events(task.id, after=5, limit=2)] == ["token", "token"]
    recorded = await store.get(task.id)
    assert recorded.event_seq == 8
    # The step's cost and model, then the outcome's, added up on the task.
    assert recorded.usage == Usage(total_tokens=10, cost=0.25, model="m1")
    assert changed == [task.id] * 5, "every change of a watched task told to on_change"


async def test_only_the_lease_owner_appends_and_the_log_is_bounded(store):
    task = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    await store.route(task.id, DECISION)
    await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
    assert not await store.append_events(task.id, "other", [("token", {"text": "x"})])
    many = [("token", {"text": "x"})] * MAX_EVENTS_PER_TASK
    assert not await store.append_events(task.id, "w", many), "past the bound: refused whole"
    assert await store.append_events(task.id, "w", many[: MAX_EVENTS_PER_TASK - 10])
    # Transitions are always logged, past the bound too.
    assert await store.fail(task.id, task_error(TaskErrorType.AGENT_ERROR, "no"), Usage(), owner="w")
    assert (await store.events(task.id, after=MAX_EVENTS_PER_TASK - 10))[-1].type == "failed"


async def test_a_terminal_status_the_webhook_asks_for_is_put_in_the_outbox(store):
    hooked = await store.create(
        NewTask(
            id=uuid.uuid4(),
            input="x",
            metadata={"k": "v"},
            webhook={"url": "https://example.com/hook", "events": ["completed", "failed"]},
        )
    )
    not_asked = await store.create(
        NewTask(
            id=uuid.uuid4(), input="x", metadata={}, webhook={"url": "https://e.com", "events": ["failed"]}
        )
    )
    for task in (hooked, not_asked):
        await store.route(task.id, DECISION)
        await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
        assert await store.complete(task.id, {"output": "done"}, Usage(), owner="w")
    rows = await store.pool.fetch("SELECT * FROM webhook_deliveries ORDER BY created_at")
    mine = [r for r in rows if r["task_id"] in (hooked.id, not_asked.id)]
    assert len(mine) == 1
    delivery = mine[0]
    assert delivery["task_id"] == hooked.id and delivery["event"] == "completed"
    assert delivery["url"] == "https://example.com/hook" and delivery["status"] == "pending"
    assert delivery["id"] == f"msg_{hooked.id.hex}_{(await store.get(hooked.id)).event_seq}"
    payload = delivery["payload"]
    assert payload["type"] == "task.completed"
    assert payload["data"]["result"] == {"output": "done"} and payload["data"]["metadata"] == {"k": "v"}


async def test_versions_say_which_of_many_tasks_changed_in_one_read(store):
    quiet = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    busy = await store.create(NewTask(id=uuid.uuid4(), input="y", metadata={}))
    before = await store.versions([quiet.id, busy.id, uuid.uuid4()])
    assert set(before) == {quiet.id, busy.id}, "an unknown task is absent"
    assert before[busy.id] == (1, busy.updated_at)
    assert await store.route(busy.id, DECISION)
    after = await store.versions([quiet.id, busy.id])
    assert after[quiet.id] == before[quiet.id]
    assert after[busy.id][0] == 2 and after[busy.id][1] > before[busy.id][1]


async def test_only_the_changes_of_a_watched_task_wake_anyone(store):
    changed: list[uuid.UUID] = []
    store.on_change = changed.append
    unwatched = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    watched = await store.create(NewTask(id=uuid.uuid4(), input="y", metadata={}))
    await store.versions([watched.id], watch_seconds=60)
    for task in (unwatched, watched):
        assert await store.route(task.id, DECISION)
        await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
        assert await store.append_events(task.id, "w", [("token", {"text": "x"})])
        assert await store.complete(task.id, {"output": "x"}, Usage(), owner="w")
    assert set(changed) == {watched.id} and len(changed) == 4
    # Every event is written all the same.
    assert [e.type for e in await store.events(unwatched.id)][-1] == "completed"


async def test_a_change_committed_while_the_watch_mark_waits_is_seen_by_the_mark(store):
    """The race of a transition and the first mark: the transition holds the row (it sees no mark, so it
    wakes nobody); the mark waits for it and must then read the version the transition left, not the one
    its statement started with, or the watcher would miss the change until its next poll."""
    task = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))
    async with store.pool.acquire() as conn:
        transition = conn.transaction()
        await transition.start()
        await conn.execute("UPDATE tasks SET event_seq = event_seq + 1 WHERE id = $1", task.id)
        mark = asyncio.create_task(store.versions([task.id], watch_seconds=60))

        async def mark_waits() -> bool:
            return bool(
                await store.pool.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%watched_until%'"
                )
            )

        await eventually(mark_waits, what="the mark's statement to wait for the row")
        assert not mark.done()
        await transition.commit()
    versions = await asyncio.wait_for(mark, timeout=10)
    assert versions[task.id][0] == task.event_seq + 1

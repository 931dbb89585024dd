"""Retention and deletion in the real store: exactly the finished tasks past their tenant's limit go, with
every row attached to them; unfinished tasks, recent ones and those a workflow still needs stay."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, Step, TaskRecord
from taskyard_common.store.retention import Deletion, RetentionStore

pytestmark = pytest.mark.integration

HOOK = {"url": "https://example.com/hook", "events": ["completed", "failed", "dead_lettered"]}
CHILD_TABLES = ("task_events", "task_steps", "webhook_deliveries", "dead_letters", "idempotency_keys")


def new(tenant: str = "default", **fields) -> NewTask:
    return NewTask(id=uuid.uuid4(), input="x", metadata={}, tenant=tenant, webhook=HOOK, **fields)


def decision() -> RoutingDecision:
    return RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1.0)


async def running(store, task: NewTask, *, key: str | None = None) -> TaskRecord:
    if key is None:
        await store.create(task)
    else:
        assert (await store.create_idempotent(task, key=key, request_hash="h", retention_seconds=60)).created
    assert await store.route(task.id, decision())
    started = await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
    assert started.record is not None
    step = Step(task_id=task.id, step=1, message={"role": "assistant", "content": "hi"}, usage=Usage())
    assert await store.record_steps([step], owner="w") == {task.id}
    return started.record


async def completed(store, task: NewTask, *, key: str | None = None) -> uuid.UUID:
    await running(store, task, key=key)
    assert await store.complete(task.id, {"output": "done"}, Usage(), owner="w")
    return task.id


async def age(store, task_id: uuid.UUID, days: float) -> None:
    """Pretend the task was created and finished ``days`` ago."""
    await store.pool.execute(
        "UPDATE tasks SET created_at = clock_timestamp() - make_interval(days => $2),"
        " finished_at = CASE WHEN finished_at IS NULL THEN NULL"
        " ELSE clock_timestamp() - make_interval(days => $2) END WHERE id = $1",
        task_id,
        days,
    )


async def rows(store, task_id: uuid.UUID) -> dict[str, int]:
    counts = {
        t: await store.pool.fetchval(f"SELECT count(*) FROM {t} WHERE task_id = $1", task_id)
        for t in CHILD_TABLES
    }
    counts["tasks"] = await store.pool.fetchval("SELECT count(*) FROM tasks WHERE id = $1", task_id)
    return counts


@pytest.fixture
def retention(store) -> RetentionStore:
    return RetentionStore(store.pool)


async def test_retention_removes_exactly_the_finished_tasks_past_the_limit_and_what_hangs_off_them(
    store, retention
):
    old_done = await completed(store, new(), key="k-old")
    old_dead = new()
    await running(store, old_dead)
    assert await store.dead_letter(
        old_dead.id,
        reason="rejected",
        queue="q",
        deaths=[],
        message={"task_id": str(old_dead.id)},
        specialist="general",
    )
    old_running = (await running(store, new())).id
    recent_done = await completed(store, new())
    for task_id in (old_done, old_dead.id, old_running):
        await age(store, task_id, 40)
    await age(store, recent_done, 5)
    before = await rows(store, old_done)
    assert all(
        before[t] >= 1 for t in ("task_events", "task_steps", "webhook_deliveries", "idempotency_keys")
    )
    dead_before = await rows(store, old_dead.id)
    assert dead_before["dead_letters"] == 1

    cutoff = datetime.now(UTC) - timedelta(days=30)
    assert await retention.overdue_seconds(cutoff, tenant=None, exclude=()) > 9 * 86400
    first = await retention.expire_batch(cutoff, 1)
    assert first.tasks == 1, "bounded by the batch size"
    rest = await retention.expire_batch(cutoff, 100)
    rest.add(first)
    assert rest.tasks == 2
    assert rest.rows["dead_letters"] == 1 and rest.rows["idempotency_keys"] == 1
    for table in CHILD_TABLES:
        assert rest.rows[table] == before[table] + dead_before[table], table
    for gone in (old_done, old_dead.id):
        assert set((await rows(store, gone)).values()) == {0}, "the task and everything attached"
    for kept in (old_running, recent_done):
        assert (await rows(store, kept))["tasks"] == 1
    assert (await retention.expire_batch(cutoff, 100)).tasks == 0
    assert await retention.overdue_seconds(cutoff, tenant=None, exclude=()) == 0.0


async def test_a_tenants_own_retention_replaces_the_default(store, retention):
    short = await completed(store, new("short"))
    long_ = await completed(store, new("long"))
    default = await completed(store, new())
    for task_id in (short, long_, default):
        await age(store, task_id, 10)
    await retention.set_retention("short", 7)
    await retention.set_retention("long", 365)
    assert await retention.retention_overrides() == {"short": 7, "long": 365}
    now = datetime.now(UTC)
    overrides = await retention.retention_overrides()
    assert (await retention.expire_batch(now - timedelta(days=30), 100, exclude=list(overrides))).tasks == 0
    assert (await retention.expire_batch(now - timedelta(days=7), 100, tenant="short")).tasks == 1
    assert (await retention.expire_batch(now - timedelta(days=365), 100, tenant="long")).tasks == 0
    assert [await store.get(t) is None for t in (short, long_, default)] == [True, False, False]
    await retention.set_retention("short", None)
    assert await retention.retention_overrides() == {"long": 365}


async def test_deleting_a_task_removes_it_and_frees_its_idempotency_key(store, retention):
    done = await completed(store, new(), key="again")
    assert (await retention.delete_task(done, "other")).outcome is Deletion.NOT_FOUND, "another tenant's"
    live = await running(store, new())
    refused = await retention.delete_task(live.id, "default")
    assert (refused.outcome, refused.status) == (Deletion.UNFINISHED, "running")
    deleted = await retention.delete_task(done, "default")
    assert deleted.outcome is Deletion.DELETED and deleted.removed.rows["idempotency_keys"] == 1
    assert set((await rows(store, done)).values()) == {0}
    assert (await retention.delete_task(done, "default")).outcome is Deletion.NOT_FOUND
    again = new()
    made = await store.create_idempotent(again, key="again", request_hash="h", retention_seconds=60)
    assert made.created and made.record.id == again.id, "the old key names nothing: a new task"


async def test_a_child_its_waiting_parent_needs_stays_and_a_finished_group_goes_with_its_last_task(
    store, retention
):
    parent = await running(store, new())
    child_task = new(parent_id=parent.id, delegation={"parent_id": str(parent.id), "call_id": "a", "step": 1})
    [child, other] = await store.delegate(
        parent.id,
        "w",
        [
            child_task,
            new(parent_id=parent.id, delegation={"parent_id": str(parent.id), "call_id": "b", "step": 1}),
        ],
    )
    for task in (child, other):
        assert await store.route(task.id, decision())
        await store.start(task.id, owner="w2", lease_seconds=30, attempt=1)
    assert await store.complete(child.id, {"output": "x"}, Usage(), owner="w2")
    assert (await store.get(parent.id)).status is TaskStatus.WAITING
    assert (await retention.delete_task(child.id, "default")).outcome is Deletion.NEEDED
    await age(store, child.id, 40)
    assert (await retention.expire_batch(datetime.now(UTC) - timedelta(days=30), 100)).tasks == 0

    group_id = uuid.uuid4()
    members = [
        NewTask(id=uuid.uuid4(), input="i", metadata={}, group_id=group_id, group_role="child")
        for _ in range(2)
    ]
    await store.create_group(group_id, tenant="default", tasks=members, reduce=None, metadata={})
    for member in members:
        assert await store.route(member.id, decision())
        await store.start(member.id, owner="w", lease_seconds=30, attempt=1)
        assert await store.complete(member.id, {"output": "ok"}, Usage(), owner="w")
    assert (await store.get_group(group_id)).status == "completed"
    purged = await retention.purge_tenant_batch("default", 100)
    assert purged.rows["task_groups"] == 1 and await store.get_group(group_id) is None
    # Everything removable went; the parent (waiting), its running child and the child it needs stay.
    assert await retention.remaining("default") == 3

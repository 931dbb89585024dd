"""The one-statement transitions of the hot path: routing, starting one task, starting a batch."""

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, StartOutcome
from taskyard_common.task_errors import TaskErrorType, task_error

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1.0)
PAST = datetime.now(UTC) - timedelta(minutes=1)


async def pending(store, **kwargs):
    return (await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}, **kwargs))).id


async def queued(store, **kwargs):
    task_id = await pending(store, **kwargs)
    assert await store.route(task_id, DECISION) is not None
    return task_id


async def test_route_records_the_decision_once_and_returns_the_limits(store):
    deadline = datetime.now(UTC) + timedelta(hours=1)
    task_id = await pending(store, deadline=deadline, timeout_seconds=42.5)
    routed = await store.route(task_id, DECISION)
    assert (routed.deadline, routed.timeout_seconds) == (deadline, 42.5)
    task = await store.get(task_id)
    assert task.status is TaskStatus.QUEUED and task.routing == DECISION and task.routed_at is not None
    assert await store.route(task_id, DECISION) is None, "routing twice must not apply"
    assert await store.route(uuid.uuid4(), DECISION) is None


async def test_route_refuses_a_task_past_its_deadline_the_rows_or_the_messages(store):
    expired = await pending(store, deadline=PAST)
    assert await store.route(expired, DECISION) is None
    assert (await store.get(expired)).status is TaskStatus.PENDING
    no_deadline = await pending(store)
    assert await store.route(no_deadline, DECISION, PAST) is None
    # The row's own deadline wins over the message's.
    later = await pending(store, deadline=datetime.now(UTC) + timedelta(hours=1))
    assert await store.route(later, DECISION, PAST) is not None


async def test_start_many_starts_the_startable_and_leaves_the_rest_to_start(store):
    plain, retried = await queued(store), await queued(store)
    cancelled = await queued(store)
    await store.cancel(cancelled)  # queued: cancelled at once
    # Routed while its deadline was ahead, then the deadline moved into the past (as time would move it).
    expired = await queued(store, deadline=datetime.now(UTC) + timedelta(hours=1))
    await store.pool.execute(
        "UPDATE tasks SET deadline = clock_timestamp() - interval '1 second' WHERE id = $1", expired
    )
    leased = await queued(store)
    assert (
        await store.start(leased, owner="other", lease_seconds=30, attempt=1)
    ).outcome is StartOutcome.STARTED
    attempts = {plain: 1, retried: 3, cancelled: 1, expired: 1, leased: 1, uuid.uuid4(): 1}
    started = await store.start_many(attempts, owner="w", lease_seconds=30)
    assert set(started) == {plain, retried}
    assert started[retried].attempts == 3 and started[retried].lease_owner == "w"
    assert started[plain].status is TaskStatus.RUNNING and started[plain].lease_expires_at is not None
    # What it left, ``start`` tells apart as before.
    assert (
        await store.start(cancelled, owner="w", lease_seconds=30, attempt=1)
    ).outcome is StartOutcome.FINISHED
    assert (
        await store.start(expired, owner="w", lease_seconds=30, attempt=1)
    ).outcome is StartOutcome.EXPIRED
    assert (await store.start(leased, owner="w", lease_seconds=30, attempt=1)).outcome is StartOutcome.LEASED
    assert await store.start_many({}, owner="w", lease_seconds=30) == {}


async def test_concurrent_batches_start_each_task_once(store):
    tasks = [await queued(store) for _ in range(40)]
    forward = dict.fromkeys(tasks, 1)
    backward = dict.fromkeys(reversed(tasks), 1)
    first, second = await asyncio.gather(
        store.start_many(forward, owner="a", lease_seconds=30),
        store.start_many(backward, owner="b", lease_seconds=30),
    )
    assert not set(first) & set(second)
    # A task skipped because the other batch held its lock is started by that batch, or left queued.
    for task_id in tasks:
        task = await store.get(task_id)
        assert task.status is TaskStatus.RUNNING
        assert task.lease_owner == ("a" if task_id in first else "b")


async def test_expire_fails_only_a_task_not_started_yet(store):
    waiting = await pending(store)
    assert await store.expire(waiting, "the deadline passed")
    task = await store.get(waiting)
    assert task.status is TaskStatus.FAILED
    assert task.error is not None and (task.error.type, task.error.message) == (
        "expired",
        "the deadline passed",
    )
    # A task a worker runs is the worker's to finish: an intake redelivery cannot expire it under the worker.
    running = await queued(store)
    await store.start(running, owner="w", lease_seconds=30, attempt=1)
    assert not await store.expire(running, "too late")
    assert (await store.get(running)).status is TaskStatus.RUNNING
    assert not await store.expire(waiting, "again"), "finished already"


async def test_fail_unstarted_never_fails_a_task_a_worker_started(store):
    """The broker agent's failures (routing gave up, unknown specialist) are conditional in the statement:
    a worker that started the task after the agent read it keeps it (no read-then-fail race)."""
    error = task_error(TaskErrorType.ROUTING_FAILED, "routing failed 5 times")
    running = await queued(store)
    await store.start(running, owner="w", lease_seconds=30, attempt=1)
    assert not await store.fail_unstarted(running, error)
    task = await store.get(running)
    assert (task.status, task.lease_owner, task.error) == (TaskStatus.RUNNING, "w", None)
    for waiting in (await pending(store), await queued(store)):
        assert await store.fail_unstarted(waiting, error)
        assert (await store.get(waiting)).error == error
        assert not await store.fail_unstarted(waiting, error), "finished already"


async def test_fail_with_an_owner_needs_the_lease_without_one_any_unfinished_task(store):
    error = task_error(TaskErrorType.AGENT_ERROR, "no")
    running = await queued(store)
    await store.start(running, owner="w", lease_seconds=30, attempt=1)
    assert not await store.fail(running, error, Usage(), owner="other")
    assert await store.fail(running, error, Usage(), owner="w")
    routed = await queued(store)
    assert await store.fail(routed, task_error(TaskErrorType.MISROUTED, "elsewhere"), Usage())
    assert (await store.get(routed)).error == task_error(TaskErrorType.MISROUTED, "elsewhere")

"""Leases, retries, cancellation, deadlines, reclaiming and dead letters in the real PostgreSQL store."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, StartOutcome
from taskyard_common.store.records import LEASE_ENDED_BY_SUPERVISOR

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.4)


async def queued(store, **kwargs):
    task = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}, **kwargs))
    assert await store.route(task.id, DECISION)
    return task.id


async def test_a_live_lease_is_not_taken_over_an_expired_one_is(store):
    task_id = await queued(store)
    assert (
        await store.start(task_id, owner="a", lease_seconds=30, attempt=1)
    ).outcome is StartOutcome.STARTED
    leased = await store.start(task_id, owner="b", lease_seconds=30, attempt=1)
    assert leased.outcome is StartOutcome.LEASED and 0 < leased.lease_remaining_seconds <= 30
    # The owner itself may start again (a redelivery to the same worker).
    assert (
        await store.start(task_id, owner="a", lease_seconds=30, attempt=1)
    ).outcome is StartOutcome.STARTED
    other = await queued(store)
    await store.start(other, owner="a", lease_seconds=0, attempt=1)
    taken = await store.start(other, owner="b", lease_seconds=30, attempt=1)
    assert taken.outcome is StartOutcome.STARTED and taken.record.lease_owner == "b"
    assert not await store.complete(other, {}, Usage(), owner="a"), "the old owner lost the task"


async def test_heartbeat_extends_and_reports_cancellation(store):
    one, two = await queued(store), await queued(store)
    for task_id in (one, two):
        await store.start(task_id, owner="w", lease_seconds=5, attempt=1)
    held, cancel = await store.heartbeat("w", [one, two], 60)
    assert held == {one, two} and cancel == set()
    assert (await store.cancel(one)).status is TaskStatus.RUNNING
    held, cancel = await store.heartbeat("w", [one, two, uuid.uuid4()], 60)
    assert held == {one, two} and cancel == {one}
    assert await store.cancel_running(one, "w", Usage())
    assert (await store.get(one)).status is TaskStatus.CANCELLED


async def test_a_dead_owners_leases_are_ended_and_the_next_start_takes_its_task_over_at_once(store):
    # A worker's supervisor saw the child die (supervisor.py): its tasks stay running, their leases end.
    dead, other = await queued(store), await queued(store)
    await store.start(dead, owner="dead", lease_seconds=600, attempt=1)
    await store.start(other, owner="alive", lease_seconds=600, attempt=1)
    assert (
        await store.start(dead, owner="next", lease_seconds=600, attempt=1)
    ).outcome is StartOutcome.LEASED
    assert await store.expire_leases("dead") == 1
    assert await store.expire_leases("dead") == 0, "already over: nothing to end"
    ended = await store.get(dead)
    assert ended.status is TaskStatus.RUNNING and ended.lease_owner == "dead"
    # Ended, not run out: it reads the epoch (the worker's crash routing tells a proven poison task by it).
    assert ended.lease_expires_at == LEASE_ENDED_BY_SUPERVISOR
    assert (
        await store.start(dead, owner="next", lease_seconds=600, attempt=1)
    ).outcome is StartOutcome.STARTED
    # Owner-checked: another worker's lease is untouched.
    assert (
        await store.start(other, owner="next", lease_seconds=600, attempt=1)
    ).outcome is StartOutcome.LEASED
    assert await store.heartbeat("alive", [other], 600) == ({other}, set())


async def test_cancel_before_running_is_immediate_and_terminal_is_unchanged(store):
    task_id = await queued(store)
    assert (await store.cancel(task_id)).status is TaskStatus.CANCELLED
    assert (
        await store.start(task_id, owner="w", lease_seconds=5, attempt=1)
    ).outcome is StartOutcome.FINISHED
    assert (await store.cancel(task_id)).status is TaskStatus.CANCELLED
    assert await store.cancel(uuid.uuid4()) is None


async def test_retry_records_the_attempt_and_the_next_start_counts_it(store):
    task_id = await queued(store)
    await store.start(task_id, owner="w", lease_seconds=5, attempt=1)
    due = datetime.now(UTC) + timedelta(seconds=2)
    entry = {"attempt": 1, "error": "LLM answered HTTP 500", "delay_seconds": 2, "charged": True}
    assert await store.schedule_retry(task_id, "w", entry=entry, next_attempt_at=due, usage=Usage())
    retrying = await store.get(task_id)
    assert retrying.status is TaskStatus.RETRYING and retrying.next_attempt_at == due
    assert retrying.attempt_log == [entry] and retrying.lease_owner is None
    await backoff_over(store, task_id)
    second = await store.start(task_id, owner="w2", lease_seconds=5, attempt=2)
    assert second.outcome is StartOutcome.STARTED and second.record.attempts == 2
    assert second.record.next_attempt_at is None


async def backoff_over(store, task_id) -> None:
    await store.pool.execute(
        "UPDATE tasks SET next_attempt_at = clock_timestamp() - interval '1 second' WHERE id = $1", task_id
    )


async def retrying(store, *, charged: bool, due_in: timedelta):
    """A task whose first attempt failed: a retry due ``due_in`` from now, charged or not."""
    task_id = await queued(store)
    await store.start(task_id, owner="w", lease_seconds=5, attempt=1)
    entry = {"attempt": 1, "error": "e", "delay_seconds": 60, "charged": charged}
    due = datetime.now(UTC) + due_in
    assert await store.schedule_retry(task_id, "w", entry=entry, next_attempt_at=due, usage=Usage())
    return task_id


async def test_a_retrying_task_starts_only_from_its_next_attempts_message_once_due(store):
    task_id = await retrying(store, charged=True, due_in=timedelta(seconds=60))
    # A copy of the failed attempt's message (its ack was lost): never runs, before or after the backoff.
    assert (await store.start(task_id, owner="x", lease_seconds=5, attempt=1)).outcome is StartOutcome.STALE
    # The retry's own message, early: not before its backoff is over.
    early = await store.start(task_id, owner="x", lease_seconds=5, attempt=2)
    assert early.outcome is StartOutcome.NOT_DUE and 0 < early.retry_due_in_seconds <= 60
    assert await store.start_many({task_id: 2}, owner="x", lease_seconds=5) == {}
    task = await store.get(task_id)
    assert (task.status, task.attempts, task.lease_owner) == (TaskStatus.RETRYING, 1, None)
    await backoff_over(store, task_id)
    assert await store.start_many({task_id: 1}, owner="x", lease_seconds=5) == {}
    assert (await store.start(task_id, owner="x", lease_seconds=5, attempt=1)).outcome is StartOutcome.STALE
    started = await store.start_many({task_id: 2}, owner="x", lease_seconds=5)
    assert started[task_id].attempts == 2 and started[task_id].status is TaskStatus.RUNNING


async def test_an_uncharged_retry_starts_from_a_message_of_the_same_attempt(store):
    task_id = await retrying(store, charged=False, due_in=timedelta(seconds=60))
    early = await store.start(task_id, owner="x", lease_seconds=5, attempt=1)
    assert early.outcome is StartOutcome.NOT_DUE
    await backoff_over(store, task_id)
    started = await store.start(task_id, owner="x", lease_seconds=5, attempt=1)
    assert started.outcome is StartOutcome.STARTED and started.record.attempts == 1


async def test_deadline_passed_before_start_fails_as_expired(store):
    task_id = await queued(store, deadline=datetime.now(UTC) + timedelta(hours=1))
    # Routed in time; the deadline passes while it waits in its queue.
    await store.pool.execute(
        "UPDATE tasks SET deadline = clock_timestamp() - interval '1 second' WHERE id = $1", task_id
    )
    assert (await store.start(task_id, owner="w", lease_seconds=5, attempt=1)).outcome is StartOutcome.EXPIRED
    task = await store.get(task_id)
    assert task.status is TaskStatus.FAILED and task.error.type == "expired"


async def test_release_hands_back_without_charging(store):
    task_id = await queued(store)
    await store.start(task_id, owner="w", lease_seconds=5, attempt=1)
    assert await store.release(task_id, "w")
    task = await store.get(task_id)
    assert task.status is TaskStatus.QUEUED and task.attempts == 1 and task.lease_owner is None


async def test_reclaim_requeues_then_dead_letters_after_the_limit(store):
    task_id = await queued(store)
    for expected in (TaskStatus.QUEUED, TaskStatus.QUEUED, TaskStatus.DEAD_LETTERED):
        await store.start(task_id, owner="w", lease_seconds=0, attempt=1)
        # Unsettled, its message comes back from the broker: not the reaper's to take.
        assert await store.expired_leases(10) == []
        assert await store.reclaim(task_id, max_expirations=2) is None
        assert await store.settle(task_id, "w")
        assert [t.id for t in await store.expired_leases(10)] == [task_id]
        assert await store.reclaim(task_id, max_expirations=2) is expected
    task = await store.get(task_id)
    assert task.dead_letter["reason"] == "delivery_limit" and task.lease_expirations == 3


async def test_dead_letter_record_list_replay_discard(store):
    one, two = await queued(store), await queued(store)
    deaths = [{"reason": "delivery_limit", "queue": "p.work.general", "count": 1}]
    for task_id in (one, two):
        assert await store.dead_letter(
            task_id,
            reason="delivery_limit",
            queue="p.work.general",
            deaths=deaths,
            message={"task_id": str(task_id)},
            specialist="general",
        )
    assert not await store.dead_letter(
        uuid.uuid4(), reason="rejected", queue="q", deaths=[], message={}, specialist=None
    ), "an unknown task records nothing"
    letters = await store.list_dead_letters(
        specialist="general", reason="delivery_limit", limit=10, after=None
    )
    assert {d.task_id for d in letters} == {one, two}
    assert all(d.task_status is TaskStatus.DEAD_LETTERED for d in letters)
    assert await store.list_dead_letters(specialist=None, reason="expired", limit=10, after=None) == []

    replayed = await store.replay(one, specialist="summarizer")
    assert replayed.status is TaskStatus.QUEUED and replayed.attempts == 0
    assert replayed.specialist == "summarizer" and replayed.routing.method is RoutingMethod.EXPLICIT
    assert await store.replay(one, specialist=None) is None, "replayed once"

    assert await store.discard_dead_letter(two)
    assert not await store.discard_dead_letter(two)
    assert (await store.get(two)).status is TaskStatus.DEAD_LETTERED
    assert await store.list_dead_letters(specialist=None, reason=None, limit=10, after=None) == []


async def test_stale_queued_finds_replays_whose_publish_is_unconfirmed(store):
    # All announced once, as the API and the broker agent leave them.
    waiting, replayed, running = await queued(store), await queued(store), await queued(store)
    unrouted = (await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={}))).id
    for task_id in (waiting, replayed, running, unrouted):
        await store.mark_published(task_id)
    for task_id in (replayed, running):
        await store.start(task_id, owner="w", lease_seconds=5, attempt=1)
    for task_id, specialist in ((replayed, "general"), (unrouted, None)):
        assert await store.dead_letter(
            task_id, reason="rejected", queue="q", deaths=[], message={}, specialist=specialist
        )
    requeued = await store.replay(replayed, None)
    pending = await store.replay(unrouted, None)
    assert requeued.status is TaskStatus.QUEUED and requeued.published_at is None
    assert pending.status is TaskStatus.PENDING and pending.published_at is None

    # Not the task waiting in its queue, nor the running one: only the replay, once its grace is over.
    later, far = pending.updated_at + timedelta(microseconds=1), pending.updated_at.replace(year=3000)
    assert [t.id for t in await store.stale_queued(older_than=later, limit=10)] == [replayed]
    assert await store.stale_queued(older_than=requeued.updated_at, limit=10) == []
    # A never-routed replay goes back to intake: the unpublished duty finds it, by its last change.
    assert [t.id for t in await store.unpublished(older_than=later, limit=10)] == [unrouted]
    assert await store.unpublished(older_than=pending.updated_at, limit=10) == []

    await store.mark_published(replayed)
    await store.mark_published(unrouted)
    assert await store.stale_queued(older_than=far, limit=10) == []
    assert await store.unpublished(older_than=far, limit=10) == []

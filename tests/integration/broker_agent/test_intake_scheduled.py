"""Tasks with a not_before: the broker agent sends their intake messages back through the delay queues,
uncharged and holding nothing, until they are due; then it routes them as any other."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage
from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.topology import DELAY_TIERS
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def delayed() -> float:
    return REGISTRY.get_sample_value("taskyard_intake_delayed_total") or 0.0


async def scheduled_task(
    store: PostgresTaskStore,
    seconds_ahead: float,
    *,
    requested: str | None = "summarizer",
    deadline: datetime | None = None,
) -> tuple[uuid.UUID, datetime]:
    task_id, not_before = uuid.uuid4(), datetime.now(UTC) + timedelta(seconds=seconds_ahead)
    record = await store.create(
        NewTask(
            id=task_id,
            input="Please summarize this",
            metadata={},
            requested_specialist=requested,
            not_before=not_before,
            deadline=deadline,
        )
    )
    assert record.status is TaskStatus.SCHEDULED
    return task_id, not_before


async def parked(bus) -> int:
    return sum([await bus.depth(bus.topology.delay_queue(t)) for t in DELAY_TIERS])


async def nothing_held(bus) -> bool:
    queues = [bus.topology.intake_queue, *(bus.topology.delay_queue(t) for t in DELAY_TIERS)]
    return all([await bus.depth(q) == 0 for q in queues])


@pytest.mark.parametrize("carries_not_before", [True, False], ids=["message-says", "row-says"])
async def test_an_explicit_task_is_recorded_only_once_due(
    run_agent, bus, store: PostgresTaskStore, carries_not_before: bool
):
    # Without not_before in the message the explicit path tries to record at once: the store refuses (not
    # due by its clock), and the handler must delay it rather than drop it as a duplicate.
    task_id, not_before = await scheduled_task(store, 4)
    before = delayed()
    message = IntakeMessage(
        task_id=task_id,
        input="Please summarize this",
        requested_specialist="summarizer",
        not_before=not_before if carries_not_before else None,
    )
    async with run_agent():
        await bus.send(message)

        async def waiting() -> bool:
            return await parked(bus) == 1 and await bus.depth(bus.topology.intake_queue) == 0

        await eventually(waiting, timeout=10, what="the message parked in a delay queue")
        work = await bus.wait_work("summarizer")
    task = await store.get(task_id)
    assert task is not None and task.status is TaskStatus.QUEUED
    assert task.routed_at is not None and task.routed_at >= not_before
    # Uncharged: the work message is still the first attempt, and no routing retry was counted.
    assert (work.task_id, work.attempt) == (task_id, 1)
    assert delayed() >= before + 1
    events = [e.type for e in await store.events(task_id)]
    assert events[:2] == ["accepted", "routed"]
    assert (await store.events(task_id))[0].data["not_before"] is not None


async def test_a_routed_task_waits_for_its_not_before_too(run_agent, bus, store: PostgresTaskStore):
    task_id, not_before = await scheduled_task(store, 2, requested=None)
    async with run_agent():
        await bus.send(IntakeMessage(task_id=task_id, input="Please summarize this"))
        await bus.wait_work("summarizer")
    task = await store.get(task_id)
    assert task is not None and task.routed_at is not None and task.routed_at >= not_before


async def test_a_scheduled_task_cancelled_meanwhile_stops_coming_back(run_agent, bus, store, catalog):
    task_id, not_before = await scheduled_task(store, 1)
    async with run_agent():
        await bus.send(IntakeMessage(task_id=task_id, input="x", not_before=not_before))
        cancelled = await store.cancel(task_id)
        assert cancelled is not None and cancelled.status is TaskStatus.CANCELLED
        # Back from its delay queue, seen cancelled, acknowledged: nothing left anywhere.
        await eventually(
            lambda: nothing_held(bus), timeout=10, what="the cancelled task's message gone for good"
        )
        await eventually(lambda: _past(not_before, 1.5), timeout=5, what="its not_before long past")
        assert await nothing_held(bus)
    for name in catalog.names:
        assert await bus.depth(bus.topology.specialist_queue(name)) == 0
    assert (await store.get(task_id)).status is TaskStatus.CANCELLED


async def test_a_deadline_passing_while_scheduled_fails_it_as_expired(run_agent, bus, store):
    # The API refuses a deadline before not_before; a task written otherwise (or a hop that overshoots)
    # still expires instead of waiting forever.
    deadline = datetime.now(UTC) + timedelta(seconds=1)
    task_id, not_before = await scheduled_task(store, 3, deadline=deadline)
    async with run_agent():
        await bus.send(IntakeMessage(task_id=task_id, input="x", not_before=not_before))

        async def failed() -> bool:
            task = await store.get(task_id)
            return task is not None and task.status is TaskStatus.FAILED

        await eventually(failed, timeout=15, what="the scheduled task expired")
    task = await store.get(task_id)
    assert task is not None and task.error is not None and task.error.type == "expired"


async def _past(moment: datetime, margin: float) -> bool:
    return datetime.now(UTC) > moment + timedelta(seconds=margin)

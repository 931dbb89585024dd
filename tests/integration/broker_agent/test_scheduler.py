"""The scheduler against the real database and broker: due schedules create one announced task per
occurrence, however many schedulers run at once; overlap, missed occurrences and announcement failures."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.scheduling.scheduler import Scheduler
from taskyard_broker_agent.settings import SchedulerSettings
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage
from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.store.schedule_records import NewSchedule, Overlap, ScheduleOutcome, TaskTemplate
from taskyard_common.store.schedules import ScheduleStore
from taskyard_common.topology import declare
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def skipped(reason: str) -> float:
    return REGISTRY.get_sample_value("taskyard_schedule_occurrences_skipped_total", {"reason": reason}) or 0.0


@pytest.fixture
def schedules(store: PostgresTaskStore) -> ScheduleStore:
    return ScheduleStore(store.pool, acquire_timeout=10)


@pytest.fixture
async def declared(bus, amqp_settings, catalog) -> None:
    """The queues the scheduler announces to (no agent runs here to declare them)."""
    await declare(bus.channel, bus.topology, catalog.names, amqp_settings)


@pytest.fixture
def scheduler(
    make_context: Callable[..., AgentContext], bus, schedules, declared
) -> Callable[..., Scheduler]:
    def make(**settings) -> Scheduler:
        context = make_context(bus.publisher, scheduler=SchedulerSettings(**settings))
        return Scheduler(context, schedules)

    return make


async def early_in_a_minute() -> None:
    """Start well before the next minute: two rounds of one test must meet the same latest occurrence."""

    async def early() -> bool:
        return datetime.now(UTC).second < 50

    await eventually(early, timeout=15, what="the first 50 seconds of a minute")


def minute_ago() -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)


async def create(schedules: ScheduleStore, *, next_run_at: datetime, **fields) -> NewSchedule:
    schedule = NewSchedule(
        id=uuid.uuid4(),
        tenant="acme",
        cron="* * * * *",
        timezone="UTC",
        task=TaskTemplate(input="tick", specialist="summarizer"),
        next_run_at=next_run_at,
        **fields,
    )
    await schedules.create(schedule)
    return schedule


async def intake_messages(bus, count: int) -> list[IntakeMessage]:
    queue = await bus.queue(bus.topology.intake_queue)
    got: list[IntakeMessage] = []
    for _ in range(count):
        message = await queue.get(no_ack=True, fail=False)
        if message is None:
            break
        got.append(IntakeMessage.model_validate_json(message.body))
    return got


async def test_concurrent_schedulers_create_one_announced_task_per_occurrence(
    scheduler, schedules, store, bus
):
    due_at = minute_ago()
    made = [await create(schedules, next_run_at=due_at) for _ in range(30)]
    # Small batches, so the two schedulers interleave their claims.
    first, second = scheduler(batch_size=4), scheduler(batch_size=4)
    rounds = await asyncio.gather(first.run_once(), second.run_once())
    created = [task_id for done in rounds for task_id in done.created]
    assert len(created) == len(set(created)) == 30
    assert sum(done.due for done in rounds) == 30
    messages = await intake_messages(bus, 100)
    assert sorted(m.task_id for m in messages) == sorted(created)
    by_schedule = {}
    for task_id in created:
        task = await store.get(task_id)
        assert task is not None and task.status is TaskStatus.PENDING and task.published_at is not None
        by_schedule[task.metadata["schedule_id"]] = task
    assert set(by_schedule) == {str(s.id) for s in made}
    for schedule in made:
        record = await schedules.get(schedule.id, "acme")
        assert record is not None
        task = by_schedule[str(schedule.id)]
        assert (record.last_task_id, record.last_outcome) == (task.id, "created")
        assert record.next_run_at is not None and record.next_run_at > due_at
    # Nothing is due any more: another round does nothing.
    again = await first.run_once()
    assert (again.due, again.created) == (0, [])


async def previous_task(store, schedules: ScheduleStore, schedule: NewSchedule) -> uuid.UUID:
    """As if the previous occurrence created a task that is still pending; the schedule is due again."""
    task = await store.create(NewTask(id=uuid.uuid4(), tenant="acme", input="tick", metadata={}))
    async with schedules.claim_due(100) as batch:
        await batch.advance(
            schedule.id,
            next_run_at=minute_ago(),
            last_run_at=minute_ago() - timedelta(minutes=1),
            last_task_id=task.id,
            outcome=ScheduleOutcome.CREATED,
        )
    return task.id


async def test_overlap_skip_waits_for_the_previous_task_and_allow_does_not(scheduler, schedules, store):
    await early_in_a_minute()
    skip = await create(schedules, next_run_at=minute_ago())
    allow = await create(schedules, next_run_at=minute_ago(), overlap=Overlap.ALLOW)
    previous = {s.id: await previous_task(store, schedules, s) for s in (skip, allow)}
    run = scheduler()
    before = skipped("overlap")
    first = await run.run_once()
    assert len(first.created) == 1 and first.skipped == 1
    assert skipped("overlap") == before + 1
    skipped_record = await schedules.get(skip.id, "acme")
    assert skipped_record is not None and skipped_record.last_outcome == "skipped_overlap"
    # It still points at the unfinished task, which the next occurrence checks again.
    assert skipped_record.last_task_id == previous[skip.id]
    allowed_record = await schedules.get(allow.id, "acme")
    assert allowed_record is not None and allowed_record.last_outcome == "created"
    assert allowed_record.last_task_id == first.created[0]

    # The previous task finished: the skip schedule's next occurrence creates its task. The allow schedule
    # meets its occurrence again (next_run_at set back): its key finds the task, nothing new is made.
    await store.cancel(previous[skip.id])
    before_existing = skipped("existing")
    for schedule in (skip, allow):
        await schedules.pause(schedule.id, "acme")
        await schedules.resume(schedule.id, "acme", minute_ago())
    second = await run.run_once()
    assert second.due == 2 and len(second.created) == 1
    assert (await store.get(second.created[0])).metadata["schedule_id"] == str(skip.id)
    assert skipped("existing") == before_existing + 1
    again = await schedules.get(allow.id, "acme")
    assert again is not None and again.last_task_id == first.created[0]


async def test_missed_occurrences_make_one_task_and_count_as_missed(scheduler, schedules, store):
    schedule = await create(schedules, next_run_at=minute_ago() - timedelta(minutes=3))
    before = skipped("missed")
    done = await scheduler().run_once()
    [task_id] = done.created
    assert skipped("missed") >= before + 3
    task = await store.get(task_id)
    record = await schedules.get(schedule.id, "acme")
    assert task is not None and record is not None and record.last_run_at is not None
    assert task.metadata["schedule_occurrence"] == record.last_run_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert record.last_run_at >= minute_ago()


async def test_a_paused_schedule_creates_nothing(scheduler, schedules):
    schedule = await create(schedules, next_run_at=minute_ago())
    await schedules.pause(schedule.id, "acme")
    done = await scheduler().run_once()
    assert (done.due, done.created) == (0, [])

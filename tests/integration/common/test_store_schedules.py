"""Cron schedules in the real store: tenant-scoped reads and changes, and the scheduler's claim, whose
concurrent claimers never hold the same schedule and whose occurrence keys let one task through."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_common.cron import occurrence_key, occurrence_text
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.store.schedule_records import (
    NewSchedule,
    Overlap,
    ScheduleOutcome,
    TaskTemplate,
)
from taskyard_common.store.schedules import ScheduleStore

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
async def schedules(store: PostgresTaskStore) -> AsyncIterator[ScheduleStore]:
    yield ScheduleStore(store.pool, acquire_timeout=10)


def new_schedule(tenant: str = "acme", *, due_in: float = -60, **fields) -> NewSchedule:
    return NewSchedule(
        id=uuid.uuid4(),
        tenant=tenant,
        cron="* * * * *",
        timezone="UTC",
        task=TaskTemplate(input="tick", metadata={"team": "ops"}),
        next_run_at=NOW + timedelta(seconds=due_in),
        **fields,
    )


def occurrence_task(schedule: NewSchedule, occurrence: datetime) -> NewTask:
    return NewTask(
        id=uuid.uuid4(),
        tenant=schedule.tenant,
        input=schedule.task.input,
        metadata={"schedule_id": str(schedule.id)},
    )


async def test_reads_and_changes_are_scoped_to_the_tenant(schedules: ScheduleStore):
    mine = await schedules.create(new_schedule("acme", overlap=Overlap.ALLOW, metadata={"k": "v"}))
    theirs = await schedules.create(new_schedule("globex"))
    assert (mine.overlap, mine.paused, mine.metadata, mine.task["input"]) == (
        Overlap.ALLOW,
        False,
        {"k": "v"},
        "tick",
    )
    assert await schedules.get(mine.id, "acme") == mine
    assert await schedules.get(theirs.id, "acme") is None
    assert await schedules.pause(theirs.id, "acme") is None
    assert await schedules.resume(theirs.id, "acme", NOW) is None
    assert not await schedules.delete(theirs.id, "acme")
    assert [s.id for s in await schedules.list("acme", limit=10, after=None)] == [mine.id]

    paused = await schedules.pause(mine.id, "acme")
    assert paused is not None and paused.paused and paused.next_run_at is None
    assert await schedules.pause(mine.id, "acme") is not None  # idempotent
    later = NOW + timedelta(minutes=5)
    resumed = await schedules.resume(mine.id, "acme", later)
    assert resumed is not None and not resumed.paused and resumed.next_run_at == later
    # Resuming a running schedule changes nothing.
    again = await schedules.resume(mine.id, "acme", NOW + timedelta(days=1))
    assert again is not None and again.next_run_at == later
    assert await schedules.delete(mine.id, "acme")
    assert await schedules.get(mine.id, "acme") is None


async def test_list_pages_newest_first(schedules: ScheduleStore):
    made = [await schedules.create(new_schedule()) for _ in range(5)]
    first = await schedules.list("acme", limit=3, after=None)
    second = await schedules.list("acme", limit=3, after=(first[-1].created_at, first[-1].id))
    assert [s.id for s in first + second] == [s.id for s in reversed(made)]


async def test_two_claimers_never_hold_the_same_schedule(schedules: ScheduleStore):
    due = {(await schedules.create(new_schedule())).id for _ in range(10)}
    await schedules.create(new_schedule(due_in=3600))  # not due
    paused = await schedules.create(new_schedule())
    await schedules.pause(paused.id, "acme")
    held_first = asyncio.Event()
    release_first = asyncio.Event()
    seen: dict[str, set[uuid.UUID]] = {}

    async def first() -> None:
        async with schedules.claim_due(6) as batch:
            seen["first"] = {s.id for s in batch.schedules}
            held_first.set()
            await release_first.wait()
            for s in batch.schedules:
                await batch.advance(
                    s.id,
                    next_run_at=NOW + timedelta(hours=1),
                    last_run_at=s.next_run_at,
                    last_task_id=None,
                    outcome=ScheduleOutcome.SKIPPED_OVERLAP,
                )

    async def second() -> None:
        await held_first.wait()
        # Skips what the first claim holds instead of waiting for it.
        async with asyncio.timeout(5), schedules.claim_due(100) as batch:
            seen["second"] = {s.id for s in batch.schedules}
        release_first.set()

    await asyncio.gather(first(), second())
    assert len(seen["first"]) == 6 and len(seen["second"]) == 4
    assert seen["first"].isdisjoint(seen["second"])
    assert seen["first"] | seen["second"] == due
    # The first claim moved its six on; the second one's four were left as they were (it wrote nothing).
    async with schedules.claim_due(100) as batch:
        assert {s.id for s in batch.schedules} == seen["second"]


async def test_an_occurrence_makes_one_task_whoever_meets_it(schedules: ScheduleStore, store):
    schedule = new_schedule()
    await schedules.create(schedule)
    occurrence = schedule.next_run_at
    assert occurrence is not None
    key = occurrence_key(schedule.id, occurrence)
    made = []
    for _ in range(2):  # the second claim meets the same occurrence (next_run_at left where it was)
        async with schedules.claim_due(10) as batch:
            [due] = batch.schedules
            assert due.next_run_at == occurrence and due.last_task_status is None
            made.append(
                await batch.create_task(
                    occurrence_task(schedule, occurrence),
                    key=key,
                    request_hash="h",
                    retention_seconds=86400,
                    schedule_id=schedule.id,
                    occurrence=occurrence_text(occurrence),
                )
            )
    assert made[0].created and made[0].record is not None
    assert not made[1].created and made[1].record is None
    assert made[1].task_id == made[0].task_id
    record = made[0].record
    assert record.status is TaskStatus.PENDING and record.tenant == "acme"
    [accepted] = await store.events(record.id)
    assert accepted.type == "accepted"
    assert accepted.data["schedule_id"] == str(schedule.id)
    assert accepted.data["occurrence"] == occurrence_text(occurrence)
    # The claim sees the last task's status, for the overlap rule.
    async with schedules.claim_due(10) as batch:
        [due] = batch.schedules
        await batch.advance(
            due.id,
            next_run_at=NOW - timedelta(seconds=1),
            last_run_at=occurrence,
            last_task_id=record.id,
            outcome=ScheduleOutcome.CREATED,
        )
    async with schedules.claim_due(10) as batch:
        [due] = batch.schedules
        assert (due.last_task_id, due.last_task_status) == (record.id, TaskStatus.PENDING)


async def test_a_claim_that_fails_leaves_nothing_behind(schedules: ScheduleStore, store):
    schedule = new_schedule()
    await schedules.create(schedule)
    task = occurrence_task(schedule, NOW)
    with pytest.raises(RuntimeError):
        async with schedules.claim_due(10) as batch:
            await batch.create_task(
                task,
                key="k",
                request_hash="h",
                retention_seconds=86400,
                schedule_id=schedule.id,
                occurrence=occurrence_text(NOW),
            )
            raise RuntimeError("the scheduler died here")
    assert await store.get(task.id) is None
    async with schedules.claim_due(10) as batch:
        assert [s.next_run_at for s in batch.schedules] == [schedule.next_run_at]

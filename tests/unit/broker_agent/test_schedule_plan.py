"""What the scheduler does with one due schedule: the occurrence it runs (missed ones collapse into the
latest), the next one, the overlap rule, and the task it creates."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from taskyard_broker_agent.scheduling.plan import OCCURRENCE_KEY, SCHEDULE_ID_KEY, plan_occurrence
from taskyard_common.lifecycle import TERMINAL, TaskStatus
from taskyard_common.messages import Priority
from taskyard_common.store.schedule_records import DueSchedule, Overlap, ScheduleOutcome

SCHEDULE_ID = uuid.UUID("5c4ed5a1-0000-4000-8000-000000000001")
MINUTE = datetime(2030, 5, 1, 9, 0, tzinfo=UTC)
TEMPLATE = {
    "input": {"report": "daily"},
    "specialist": "summarizer",
    "metadata": {"team": "ops"},
    "timeout_seconds": 60.0,
    "webhook": {"url": "https://example.com/hook", "events": ["completed"]},
    "priority": "high",
}


def due(
    next_run_at: datetime = MINUTE,
    *,
    cron: str = "* * * * *",
    timezone: str = "UTC",
    overlap: Overlap = Overlap.SKIP,
    last: TaskStatus | None = None,
    task: dict[str, Any] | None = None,
) -> DueSchedule:
    return DueSchedule(
        id=SCHEDULE_ID,
        tenant="acme",
        cron=cron,
        timezone=timezone,
        task=TEMPLATE if task is None else task,
        overlap=overlap,
        next_run_at=next_run_at,
        last_task_id=uuid.uuid4() if last is not None else None,
        last_task_status=last,
    )


def test_an_occurrence_on_time_creates_its_task_and_moves_on():
    plan = plan_occurrence(due(), MINUTE + timedelta(seconds=2))
    assert (plan.occurrence, plan.missed, plan.outcome) == (MINUTE, 0, ScheduleOutcome.CREATED)
    assert plan.next_run_at == MINUTE + timedelta(minutes=1)
    assert plan.key == f"schedule:{SCHEDULE_ID}:2030-05-01T09:00:00Z"
    task = plan.task
    assert task is not None
    assert (task.tenant, task.input, task.requested_specialist, task.timeout_seconds, task.priority) == (
        "acme",
        {"report": "daily"},
        "summarizer",
        60.0,
        Priority.HIGH,
    )
    assert task.metadata == {
        "team": "ops",
        SCHEDULE_ID_KEY: str(SCHEDULE_ID),
        OCCURRENCE_KEY: "2030-05-01T09:00:00Z",
    }
    assert task.webhook == TEMPLATE["webhook"]
    assert task.not_before is None and task.deadline is None


def test_the_same_occurrence_always_has_the_same_key_but_each_plan_a_new_task_id():
    first, second = (plan_occurrence(due(), MINUTE + timedelta(seconds=s)) for s in (1, 40))
    assert (first.key, first.request_hash) == (second.key, second.request_hash)
    assert first.task is not None and second.task is not None and first.task.id != second.task.id


def test_missed_occurrences_collapse_into_the_latest_one():
    # Three minutes and a half late: 09:00, 09:01, 09:02 and 09:03 are due; only 09:03 runs.
    plan = plan_occurrence(due(), MINUTE + timedelta(minutes=3, seconds=30))
    assert plan.occurrence == MINUTE + timedelta(minutes=3)
    assert plan.missed == 3
    assert plan.next_run_at == MINUTE + timedelta(minutes=4)
    assert plan.key.endswith(":2030-05-01T09:03:00Z")
    # Exactly on an occurrence: that one runs, the next is strictly after it.
    plan = plan_occurrence(due(), MINUTE + timedelta(minutes=2))
    assert (plan.occurrence, plan.missed) == (MINUTE + timedelta(minutes=2), 2)
    assert plan.next_run_at == MINUTE + timedelta(minutes=3)


@pytest.mark.parametrize("status", [TaskStatus.PENDING, TaskStatus.QUEUED, TaskStatus.RUNNING])
def test_overlap_skip_creates_nothing_while_the_previous_task_runs(status: TaskStatus):
    plan = plan_occurrence(due(last=status), MINUTE)
    assert (plan.outcome, plan.task) == (ScheduleOutcome.SKIPPED_OVERLAP, None)
    assert plan.next_run_at == MINUTE + timedelta(minutes=1)
    allowed = plan_occurrence(due(last=status, overlap=Overlap.ALLOW), MINUTE)
    assert allowed.outcome is ScheduleOutcome.CREATED and allowed.task is not None


@pytest.mark.parametrize("status", [None, *sorted(TERMINAL)])
def test_overlap_skip_creates_the_task_once_the_previous_one_finished(status: TaskStatus | None):
    assert plan_occurrence(due(last=status), MINUTE).outcome is ScheduleOutcome.CREATED


def test_a_template_that_no_longer_parses_fails_the_occurrence_but_not_the_schedule():
    plan = plan_occurrence(due(task={"input": "x", "colour": "red"}), MINUTE)
    assert (plan.outcome, plan.task) == (ScheduleOutcome.FAILED, None)
    assert plan.next_run_at == MINUTE + timedelta(minutes=1)
    assert "template" in plan.reason


def test_an_expression_that_no_longer_parses_stops_the_schedule():
    plan = plan_occurrence(due(timezone="Mars/Olympus"), MINUTE)
    assert (plan.outcome, plan.task, plan.next_run_at) == (ScheduleOutcome.FAILED, None, None)
    assert plan.occurrence == MINUTE


def test_daylight_saving_changes_follow_the_schedules_time_zone():
    # A daily 02:30 in Berlin: on 2030-03-31 02:30 does not exist and the occurrence is 03:00 CEST.
    spring = datetime(2030, 3, 31, 1, 0, tzinfo=UTC)
    plan = plan_occurrence(due(spring, cron="30 2 * * *", timezone="Europe/Berlin"), spring)
    assert (plan.occurrence, plan.missed) == (spring, 0)
    assert plan.next_run_at == datetime(2030, 4, 1, 0, 30, tzinfo=UTC)  # 02:30 CEST
    # On 2030-10-27 02:30 happens twice; it runs once, the next is the following day's (CET).
    autumn = datetime(2030, 10, 27, 0, 30, tzinfo=UTC)
    plan = plan_occurrence(due(autumn, cron="30 2 * * *", timezone="Europe/Berlin"), autumn)
    assert plan.next_run_at == datetime(2030, 10, 28, 1, 30, tzinfo=UTC)
    # Late by a day across the change: one run (the latest), one missed.
    late = plan_occurrence(
        due(spring, cron="30 2 * * *", timezone="Europe/Berlin"), datetime(2030, 4, 1, 6, tzinfo=UTC)
    )
    assert (late.occurrence, late.missed) == (datetime(2030, 4, 1, 0, 30, tzinfo=UTC), 1)

"""The schedule documents and checks, without a server: what a schedule request may hold, where a refused
task field is located, and the template every occurrence submits."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from taskyard_api.http.problems import VALIDATION_ERROR, FieldError
from taskyard_api.schedules.checks import _within_task, template
from taskyard_api.schedules.documents import ScheduleDocument, ScheduleRequest
from taskyard_common.messages import Priority
from taskyard_common.store.schedule_records import Overlap, ScheduleRecord


def request(**fields) -> ScheduleRequest:
    return ScheduleRequest.model_validate({"cron": "*/5 * * * *", "task": {"input": "x"}, **fields})


def test_defaults_utc_and_skip():
    made = request()
    assert (made.timezone, made.overlap, made.metadata) == ("UTC", Overlap.SKIP, {})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "* * * * * *"}, "5 fields"),
        ({"timezone": "Nowhere/Town"}, "time zone"),
        ({"task": {"input": "x", "not_before": "2030-01-01T00:00:00Z"}}, "not_before"),
        ({"task": {"input": "x", "deadline": "2030-01-01T00:00:00Z"}}, "deadline"),
        ({"task": {"input": "x", "metadata": {"schedule_occurrence": "x"}}}, "schedule_occurrence"),
        ({"task": {"input": "x", "metadata": {str(i): "v" for i in range(63)}}}, "at most 62"),
    ],
)
def test_what_a_schedule_refuses(fields, message):
    with pytest.raises(ValidationError, match=message):
        request(**fields)


def test_the_template_keeps_what_repeats():
    made = request(
        task={
            "input": {"q": 1},
            "specialist": "summarizer",
            "metadata": {"a": "b"},
            "timeout_seconds": 30,
            "priority": "low",
            "webhook": {"url": "https://example.com/h", "events": ["failed"]},
        }
    )
    kept = template(made.task)
    assert (kept.input, kept.specialist, kept.metadata, kept.timeout_seconds, kept.priority) == (
        {"q": 1},
        "summarizer",
        {"a": "b"},
        30,
        Priority.LOW,
    )
    assert kept.webhook == {"url": "https://example.com/h", "events": ["failed"]}


def test_a_refused_task_field_is_located_under_task():
    problem = VALIDATION_ERROR(
        "too long", errors=[FieldError(loc=["body", "timeout_seconds"], msg="m", type="less_than_equal")]
    )
    assert _within_task(problem).errors[0].loc == ["body", "task", "timeout_seconds"]
    bare = VALIDATION_ERROR("no errors")
    assert _within_task(bare) == bare


def test_the_document_links_the_last_task():
    task_id, now = uuid.uuid4(), datetime.now(UTC)
    record = ScheduleRecord(
        id=uuid.uuid4(),
        tenant="acme",
        cron="* * * * *",
        timezone="UTC",
        task={"input": "x"},
        overlap=Overlap.ALLOW,
        paused=False,
        next_run_at=now,
        last_run_at=now,
        last_task_id=task_id,
        last_outcome="created",
        metadata={},
        created_at=now,
        updated_at=now,
    )
    links = ScheduleDocument.from_record(record).model_dump(by_alias=True)["links"]
    assert links == {"self": f"/v1/schedules/{record.id}", "last_task": f"/v1/tasks/{task_id}"}

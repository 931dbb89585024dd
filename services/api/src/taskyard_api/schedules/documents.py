"""The JSON documents of ``/v1/schedules``: what a client sends to create a schedule, and what it reads."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, field_validator

from taskyard_api.json_values import MAX_METADATA_ENTRIES, MetadataKey, MetadataValue
from taskyard_api.models import TaskSubmission
from taskyard_common import cron
from taskyard_common.store.schedule_records import Overlap, ScheduleRecord

# Every occurrence's task carries these two metadata entries (the broker agent's scheduler writes them).
RESERVED_METADATA = ("schedule_id", "schedule_occurrence")


def schedule_path(schedule_id: UUID) -> str:
    return f"/v1/schedules/{schedule_id}"


class ScheduleRequest(BaseModel):
    """``POST /v1/schedules``: a cron expression and the task each occurrence creates."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "cron": "*/5 * * * *",
                    "timezone": "UTC",
                    "task": {"input": "Summarize the support queue of the last five minutes."},
                    "overlap": "skip",
                },
                {
                    "cron": "0 9 * * MON-FRI",
                    "timezone": "Europe/Berlin",
                    "task": {"input": {"report": "daily"}, "specialist": "summarizer", "priority": "low"},
                    "metadata": {"team": "ops"},
                },
            ]
        },
    )

    cron: str = Field(
        min_length=1,
        max_length=cron.MAX_CRON_LENGTH,
        description="Five fields: minute hour day-of-month month day-of-week (`*/5 * * * *`, "
        "`0 9 * * MON-FRI`, `0 0 L * *`); a minute is the finest step",
    )
    timezone: str = Field(
        default="UTC",
        max_length=64,
        description="The IANA time zone the expression is read in (`Europe/Berlin`); daylight saving "
        "changes follow Debian cron (see the API documentation)",
    )
    task: TaskSubmission = Field(
        description="What each occurrence submits: a POST /v1/tasks body, without not_before or deadline"
    )
    overlap: Overlap = Field(
        default=Overlap.SKIP,
        description="skip: an occurrence whose previous task has not finished creates nothing; allow: it "
        "creates its task anyway",
    )
    metadata: dict[MetadataKey, MetadataValue] = Field(
        default_factory=dict,
        max_length=MAX_METADATA_ENTRIES,
        description="Free-form string labels of the schedule itself",
    )

    @field_validator("cron")
    @classmethod
    def _cron_is_valid(cls, value: str) -> str:
        cron.check(value, "UTC")  # InvalidCron is a ValueError: a 422 naming the field
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone_is_known(cls, value: str) -> str:
        cron.zone(value)
        return value

    @field_validator("task")
    @classmethod
    def _task_repeats(cls, value: TaskSubmission) -> TaskSubmission:
        if value.not_before is not None:
            raise ValueError("a schedule's task has no not_before: the cron expression says when it runs")
        if value.deadline is not None:
            raise ValueError("a schedule's task has no deadline: an instant would expire every later run")
        reserved = sorted(set(RESERVED_METADATA) & set(value.metadata))
        if reserved:
            raise ValueError(f"task.metadata may not set {', '.join(reserved)}: each task gets them")
        if len(value.metadata) > MAX_METADATA_ENTRIES - len(RESERVED_METADATA):
            limit = MAX_METADATA_ENTRIES - len(RESERVED_METADATA)
            raise ValueError(f"task.metadata may hold at most {limit} entries in a schedule")
        return value


class ScheduleLinks(BaseModel):
    self_: str = Field(alias="self", description="This schedule")
    last_task: str | None = Field(description="The task of the last occurrence that created one")


class ScheduleDocument(BaseModel):
    """A schedule as clients see it."""

    id: UUID
    cron: str
    timezone: str
    task: dict[str, Any] = Field(description="What each occurrence submits")
    overlap: Overlap
    paused: bool
    metadata: dict[str, str]
    next_run_at: datetime | None = Field(
        description="The next occurrence (null while paused, or when the expression has no further one)"
    )
    last_run_at: datetime | None = Field(description="The last occurrence handled (null: none yet)")
    last_task_id: UUID | None = Field(description="The task of the last occurrence that created one")
    last_outcome: str | None = Field(
        description="What the last occurrence did: created, skipped_overlap or failed (null: none yet)"
    )
    created_at: datetime
    updated_at: datetime
    links: ScheduleLinks

    @classmethod
    def from_record(cls, record: ScheduleRecord) -> ScheduleDocument:
        return cls(
            id=record.id,
            cron=record.cron,
            timezone=record.timezone,
            task=record.task,
            overlap=record.overlap,
            paused=record.paused,
            metadata=record.metadata,
            next_run_at=record.next_run_at,
            last_run_at=record.last_run_at,
            last_task_id=record.last_task_id,
            last_outcome=record.last_outcome,
            created_at=record.created_at,
            updated_at=record.updated_at,
            links=ScheduleLinks.model_validate(
                {
                    "self": schedule_path(record.id),
                    "last_task": f"/v1/tasks/{record.last_task_id}" if record.last_task_id else None,
                }
            ),
        )


class SchedulePage(BaseModel):
    """One page of schedules, newest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[ScheduleDocument]
    next_cursor: str | None

"""Cron schedules as stored: what the API writes (``NewSchedule``), reads (``ScheduleRecord``), and what the
broker agent's scheduler claims (``DueSchedule``). Plain data; the queries are in ``schedules.py``."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, TaskInput


class Overlap(StrEnum):
    # An occurrence whose previous task has not finished creates nothing (last_outcome "skipped_overlap").
    SKIP = "skip"
    # Every occurrence creates its task.
    ALLOW = "allow"


class ScheduleOutcome(StrEnum):
    """What happened to a schedule's last occurrence (its ``last_outcome``)."""

    CREATED = "created"  # its task was created (or had been, by a scheduler that died before moving on)
    SKIPPED_OVERLAP = "skipped_overlap"  # overlap "skip" and the previous task was not finished
    FAILED = "failed"  # its task could not be created (logged by the scheduler); the schedule moved on


class TaskTemplate(BaseModel):
    """The submission each occurrence creates a task from: ``POST /v1/tasks``'s fields that make sense
    again and again (no deadline, no not_before: both are instants)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: TaskInput
    specialist: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    timeout_seconds: float | None = None
    webhook: dict[str, Any] | None = None
    priority: Priority = Priority.NORMAL


class NewSchedule(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant: str
    cron: str
    timezone: str
    task: TaskTemplate
    overlap: Overlap = Overlap.SKIP
    metadata: dict[str, str] = Field(default_factory=dict)
    # The first occurrence after creation.
    next_run_at: datetime | None


class ScheduleRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant: str
    cron: str
    timezone: str
    # As stored (a ``TaskTemplate``'s JSON); kept raw so that one written by a newer release stays readable.
    task: dict[str, Any]
    overlap: Overlap
    paused: bool
    # The next occurrence to handle; None while paused or when the expression has no future occurrence.
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_task_id: UUID | None
    last_outcome: str | None
    metadata: dict[str, str]
    created_at: datetime
    updated_at: datetime


class DueSchedule(BaseModel):
    """A schedule whose next occurrence is due, locked by the claiming scheduler until it commits."""

    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant: str
    cron: str
    timezone: str
    task: dict[str, Any]
    overlap: Overlap
    next_run_at: datetime
    last_task_id: UUID | None
    # The last task's status now (None: no last task, or it is gone).
    last_task_status: TaskStatus | None

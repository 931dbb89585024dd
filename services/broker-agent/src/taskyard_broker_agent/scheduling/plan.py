"""What to do with one due schedule: pure, so every case is unit-tested without a database.

- **Missed occurrences collapse into one.** After an outage (no scheduler running, the database away) every
  occurrence between the schedule's ``next_run_at`` and now is due; only the latest of them runs, and the
  schedule continues with the first occurrence after now. A missed run is late, never repeated.
- **Overlap.** ``skip``: when the previous occurrence's task has not finished, this occurrence creates
  nothing (``skipped_overlap``); ``allow``: it creates its task anyway.
- **The task** is the schedule's template, owned by the schedule's tenant, with ``metadata`` naming the
  schedule and the occurrence (``schedule_id``, ``schedule_occurrence``), created under the occurrence's
  idempotency key (``cron.occurrence_key``).
- A schedule whose stored expression or template no longer parses (written by another release, a time zone
  gone from the system's database) records ``failed``; a broken expression stops it (no ``next_run_at``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from pydantic import ValidationError

from taskyard_common import cron
from taskyard_common.ids import uuid7
from taskyard_common.store import NewTask
from taskyard_common.store.schedule_records import DueSchedule, Overlap, ScheduleOutcome, TaskTemplate

# What every occurrence's task carries in its metadata (the API refuses them in a schedule's template).
SCHEDULE_ID_KEY = "schedule_id"
OCCURRENCE_KEY = "schedule_occurrence"


@dataclass(frozen=True)
class Plan:
    # The occurrence handled: the latest one due.
    occurrence: datetime
    # Earlier due occurrences collapsed into it (0 but after an outage; counting stops at cron's cap).
    missed: int
    # The first occurrence after now; None: the expression has no further one (or no longer parses).
    next_run_at: datetime | None
    outcome: ScheduleOutcome
    # The task to create (outcome ``created``), else None.
    task: NewTask | None = None
    key: str = ""
    request_hash: str = ""
    # Why the outcome is ``failed``, for the log.
    reason: str = ""


def request_hash(template: TaskTemplate) -> str:
    """SHA-256 of the template's canonical JSON, kept with the occurrence's idempotency key."""
    canonical = json.dumps(template.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def occurrence_task(due: DueSchedule, template: TaskTemplate, occurrence: datetime, task_id: UUID) -> NewTask:
    metadata = {
        **template.metadata,
        SCHEDULE_ID_KEY: str(due.id),
        OCCURRENCE_KEY: cron.occurrence_text(occurrence),
    }
    return NewTask(
        id=task_id,
        tenant=due.tenant,
        input=template.input,
        metadata=metadata,
        requested_specialist=template.specialist,
        timeout_seconds=template.timeout_seconds,
        webhook=template.webhook,
        priority=template.priority,
    )


def plan_occurrence(due: DueSchedule, now: datetime, *, new_id: Callable[[], UUID] = uuid7) -> Plan:
    """The plan for ``due`` (its ``next_run_at`` <= ``now``, both by the database's clock)."""
    try:
        latest = cron.latest_until(due.cron, due.timezone, now)
        # The stored next_run_at is an occurrence itself; the reverse search may disagree with it around a
        # daylight saving change, and the later of the two is the one that is due.
        occurrence = max(due.next_run_at, latest) if latest is not None else due.next_run_at
        missed = cron.count_between(due.cron, due.timezone, due.next_run_at, occurrence)
        if occurrence > due.next_run_at:
            missed += 1  # next_run_at itself
        next_run_at = cron.next_after(due.cron, due.timezone, max(now, occurrence))
    except cron.InvalidCron as exc:
        return Plan(due.next_run_at, 0, None, ScheduleOutcome.FAILED, reason=f"cron: {exc}")
    try:
        template = TaskTemplate.model_validate(due.task)
    except ValidationError as exc:
        reason = f"task template: {exc.error_count()} invalid field(s)"
        return Plan(occurrence, missed, next_run_at, ScheduleOutcome.FAILED, reason=reason)
    if due.overlap is Overlap.SKIP and due.last_task_status is not None and not due.last_task_status.terminal:
        return Plan(occurrence, missed, next_run_at, ScheduleOutcome.SKIPPED_OVERLAP)
    return Plan(
        occurrence,
        missed,
        next_run_at,
        ScheduleOutcome.CREATED,
        task=occurrence_task(due, template, occurrence, new_id()),
        key=cron.occurrence_key(due.id, occurrence),
        request_hash=request_hash(template),
    )

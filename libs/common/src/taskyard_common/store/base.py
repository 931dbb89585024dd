"""What the services need from a task store, independent of the database behind it.

Every state change is one conditional statement (``... WHERE status IN (...)``), so a duplicate or late
message can never move a task backwards or complete it twice; the boolean results say whether it applied.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from taskyard_common.messages import RoutingDecision, TaskInput, TaskStatus, Usage


class NewTask(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    input: TaskInput
    metadata: dict[str, str]
    requested_specialist: str | None = None


class TaskRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    status: TaskStatus
    input: TaskInput
    metadata: dict[str, str]
    requested_specialist: str | None
    specialist: str | None
    routing: RoutingDecision | None
    attempts: int
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    usage: Usage
    created_at: datetime
    published_at: datetime | None
    routed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime


# A page position: the (created_at, id) of the last task seen, newest first.
Cursor = tuple[datetime, UUID]


class TaskStore(Protocol):
    async def ping(self) -> None: ...

    async def create(self, task: NewTask) -> TaskRecord: ...

    async def mark_published(self, task_id: UUID) -> None: ...

    async def discard_unpublished(self, task_id: UUID) -> bool:
        """Delete a task whose intake publish failed, so nothing runs that the client was told failed."""
        ...

    async def unpublished(self, older_than: datetime, limit: int) -> list[TaskRecord]:
        """Pending tasks that were committed but never confirmed published (a producer died in between)."""
        ...

    async def get(self, task_id: UUID) -> TaskRecord | None: ...

    async def list(
        self, *, status: TaskStatus | None, specialist: str | None, limit: int, after: Cursor | None
    ) -> list[TaskRecord]: ...

    async def record_routing(self, task_id: UUID, decision: RoutingDecision) -> bool:
        """pending → queued with the decision; False when the task is no longer pending."""
        ...

    async def start(self, task_id: UUID) -> TaskRecord | None:
        """queued/running → running, one more attempt; None when the task is unknown or already terminal."""
        ...

    async def complete(self, task_id: UUID, result: dict[str, Any], usage: Usage) -> bool:
        """running → completed; False when it was not running (a duplicate delivery finished it already)."""
        ...

    async def fail(self, task_id: UUID, error: dict[str, Any], usage: Usage) -> bool:
        """Any non-terminal status → failed; False when the task is already terminal."""
        ...

    async def close(self) -> None: ...

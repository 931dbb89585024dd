"""The documents the API answers, as the SDK reads them.

Every model keeps the fields it does not know (``model_extra``) without checking them, so a newer API that
adds fields never breaks an older client; the fields it does read are checked against the API's OpenAPI document by a test
(tests/unit/client/test_openapi_contract.py). Statuses, event types and reasons are plain strings for the
same reason: an API that learns a new status must not make documents unreadable. ``TERMINAL`` and the
``TaskStatus`` constants name the ones known today.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field


class TaskStatus(StrEnum):
    SCHEDULED = "scheduled"
    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"


# A task in one of these has nothing more to say (unless an operator replays a dead letter).
TERMINAL = frozenset(
    {TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.DEAD_LETTERED}
)


class _Document(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True)


class Usage(_Document):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0  # USD
    model: str | None = None


class Routing(_Document):
    """How the broker agent chose the specialist."""

    method: str
    reason: str
    confidence: float
    latency_ms: float | None = None
    llm_calls: int = 0
    tokens: int = 0
    cached: bool = False
    guard: str | None = None
    fallback: str | None = None
    model: str | None = None
    cost: float = 0.0  # USD


class TaskError(_Document):
    """Why a task failed: a stable ``type`` and a readable ``message``. The API's schema promises only an
    object here, so neither is required."""

    type: str | None = None
    message: str | None = None
    attempts: int | None = None


class DeadLetterInfo(_Document):
    """Why the broker gave up on a task's message (on a task while it is ``dead_lettered``)."""

    reason: str
    queue: str
    count: int = 0
    deaths: list[dict[str, Any]] = Field(default_factory=list)
    at: datetime | None = None


def _output(result: dict[str, Any] | None) -> str | None:
    value = (result or {}).get("output")
    return value if isinstance(value, str) else None


class Task(_Document):
    """A task document (``GET /v1/tasks/{id}``)."""

    id: UUID
    status: str
    specialist: str | None = None
    requested_specialist: str | None = None
    routing: Routing | None = None
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    result: dict[str, Any] | None = None
    error: TaskError | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: float = 0.0  # USD, routing and agent
    input: str | dict[str, Any]
    metadata: dict[str, str] = Field(default_factory=dict)
    next_attempt_at: datetime | None = None
    deadline: datetime | None = None
    timeout_seconds: float | None = None
    cancel_requested_at: datetime | None = None
    attempt_history: list[dict[str, Any]] = Field(default_factory=list)
    dead_letter: DeadLetterInfo | None = None
    priority: str = "normal"
    not_before: datetime | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def output(self) -> str | None:
        """The answer's text (``result.output``) when the specialist produced one."""
        return _output(self.result)


class TaskPage(_Document):
    items: list[Task]
    next_cursor: str | None = None


class TaskResult(_Document):
    """``GET /v1/tasks/{id}/result``: a completed task's result."""

    task_id: UUID
    result: dict[str, Any]
    usage: Usage = Field(default_factory=Usage)

    @property
    def output(self) -> str | None:
        return _output(self.result)


class UsageFigures(_Document):
    """Tasks, tokens and cost (USD) of one group of ``GET /v1/usage`` (``key`` None: the total)."""

    key: str | None = None
    tasks: int
    prompt_tokens: int
    completion_tokens: int
    routing_tokens: int
    total_tokens: int
    cost: float


class UsageReport(_Document):
    """``GET /v1/usage``: the tenant's LLM spend over ``[from, to)``."""

    from_: datetime = Field(alias="from")
    to: datetime
    group_by: str | None = None
    total: UsageFigures
    groups: list[UsageFigures] = Field(default_factory=list)


class TaskEvent(_Document):
    """One entry of a task's event log; ``data`` depends on ``type`` (see docs/api.md)."""

    seq: int
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    at: datetime

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL


class EventPage(_Document):
    items: list[TaskEvent]
    next_after: int


class DeadLetter(_Document):
    """An open dead letter (``GET /v1/dead-letters``): to replay or discard."""

    task_id: UUID
    specialist: str | None = None
    reason: str
    queue: str
    deaths: list[dict[str, Any]] = Field(default_factory=list)
    recorded_at: datetime
    task_status: str


class DeadLetterPage(_Document):
    items: list[DeadLetter]
    next_cursor: str | None = None


class Specialist(_Document):
    name: str
    description: str
    keywords: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    model: str | None = None
    max_steps: int
    timeout_seconds: float
    max_timeout_seconds: float
    concurrency: int
    # The JSON Schema of its answers' ``result.data`` (None: text answers).
    output_schema: dict[str, Any] | None = None


class SpecialistList(_Document):
    items: list[Specialist]


class ChildLink(_Document):
    """A group's child (or a delegated task): its id, status and specialist."""

    id: UUID
    status: str
    specialist: str | None = None


class GroupChildren(_Document):
    """A page of a group's children, oldest first (``next_cursor``: more to read)."""

    items: list[ChildLink] = Field(default_factory=list)
    next_cursor: str | None = None


class Group(_Document):
    """A task group (``POST /v1/task-groups``): a page of its children, how many are in each status, and the
    reduce task started once they all finished (if the group asked for one)."""

    id: UUID
    status: str
    total: int = 0
    children: GroupChildren = Field(default_factory=GroupChildren)
    counts: dict[str, int] = Field(default_factory=dict)
    reduce_task_id: UUID | None = None

    @property
    def child_ids(self) -> list[UUID]:
        """The ids of the children on this page."""
        return [child.id for child in self.children.items]


class Problem(_Document):
    """An RFC 9457 problem document: every error the API answers. Extension members are kept."""

    type: str = "about:blank"
    title: str = ""
    status: int
    detail: str | None = None
    instance: str | None = None
    errors: list[dict[str, Any]] | None = None
    task_status: str | None = None
    known_specialists: list[str] | None = None
    unavailable: list[str] | None = None
    request_id: str | None = None

    @property
    def slug(self) -> str:
        """The part of ``type`` after ``https://taskyard.dev/problems/`` (``about:blank`` as it is)."""
        return self.type.rsplit("/", 1)[-1]

"""The JSON documents of the task endpoints: what a client sends, and what it gets back."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any
from uuid import UUID

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from taskyard_api.json_values import (
    MAX_METADATA_ENTRIES,
    MetadataKey,
    MetadataValue,
    storable_metadata,
    usable_input,
)
from taskyard_api.webhooks.documents import WebhookRequest
from taskyard_api.workflows.documents import MAX_CHAIN_STEPS, ChainLink, ChainStep, ChildLink, GroupRef
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, RoutingMethod, TaskInput, Usage, utcnow
from taskyard_common.store.records import TaskRecord
from taskyard_common.task_errors import TaskError

# How far ahead ``not_before`` may be: further is more likely a mistake (a year typed wrong) than a plan.
MAX_NOT_BEFORE_DAYS = 366


# RFC 3339 ``date-time``: the offset is mandatory. Pydantic alone would also take a bare Unix time.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def _rfc3339(value: Any) -> Any:
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        raise ValueError("must be an RFC 3339 date-time with an offset, e.g. 2030-05-01T18:00:00Z")
    return value


class TaskSubmission(BaseModel):
    """``POST /v1/tasks``: the work to do, optionally for a named specialist."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"input": "Summarize: the meeting moved the launch to May.", "metadata": {"team": "ops"}},
                {
                    "input": {"ticket": 4211, "text": "I was charged twice"},
                    "specialist": "support-analyst",
                    "timeout_seconds": 120,
                    "deadline": "2030-05-01T18:00:00Z",
                },
            ]
        },
    )

    input: TaskInput = Field(description="The task: non-empty text, or a non-empty JSON object")
    specialist: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="Run on this specialist (see GET /v1/specialists) instead of letting the router choose",
    )
    metadata: dict[MetadataKey, MetadataValue] = Field(
        default_factory=dict,
        max_length=MAX_METADATA_ENTRIES,
        description="Free-form string labels, returned with the task",
    )
    timeout_seconds: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Run time of one attempt, at most the specialist's max_timeout_seconds (without a "
        "specialist: the largest in the catalog); default: the specialist's timeout_seconds",
    )
    deadline: Annotated[AwareDatetime, BeforeValidator(_rfc3339)] | None = Field(
        default=None,
        description="RFC 3339 date-time with an offset; a task not started by then fails as expired",
    )
    webhook: WebhookRequest | None = Field(
        default=None,
        description="Announce the task's terminal status to this URL (see the webhook-deliveries routes)",
    )
    priority: Priority = Field(
        default=Priority.NORMAL,
        description="high, normal or low: higher ones are consumed first, lower ones keep a guaranteed share",
    )
    not_before: Annotated[AwareDatetime, BeforeValidator(_rfc3339)] | None = Field(
        default=None,
        description="RFC 3339 date-time with an offset, at most 366 days ahead: the task stays scheduled "
        "(holding nothing) and is not routed or started before then; a time already past runs it now",
    )

    @field_validator("not_before")
    @classmethod
    def _not_before_is_near(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValueError("not_before is out of range") from None
        if value - utcnow() > timedelta(days=MAX_NOT_BEFORE_DAYS):
            raise ValueError(f"not_before may be at most {MAX_NOT_BEFORE_DAYS} days ahead")
        return value

    @model_validator(mode="after")
    def _deadline_after_not_before(self) -> TaskSubmission:
        if self.deadline is not None and self.not_before is not None and self.deadline <= self.not_before:
            raise ValueError("deadline must be later than not_before (the task could never start)")
        return self

    then: list[ChainStep] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_CHAIN_STEPS,
        description="Steps to run after this task, one after the other, each with the previous one's output "
        "as its input (at most 20); a step that does not complete ends the chain",
    )

    @field_validator("deadline")
    @classmethod
    def _deadline_is_ahead(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            # Stored and carried in UTC; an offset can push the year past 9999, which nothing can store.
            value = value.astimezone(UTC)
        except OverflowError:
            raise ValueError("deadline is out of range") from None
        if value <= utcnow():
            raise ValueError("deadline must be in the future")
        return value

    _input_is_usable = field_validator("input")(usable_input)
    _metadata_is_storable = field_validator("metadata")(storable_metadata)


class RoutedPartInfo(BaseModel):
    """One job of a request split by the router (catalog ``multi_route``)."""

    specialist: str = Field(description="The specialist that does it")
    job: str = Field(description="What the part is, as the router put it")


class RoutingInfo(BaseModel):
    """How the broker agent chose the specialist."""

    method: RoutingMethod
    reason: str
    confidence: float
    latency_ms: float | None = Field(default=None, description="Time the router took (null: not recorded)")
    llm_calls: int = Field(default=0, description="LLM calls the decision made (0: explicit, rules, cached)")
    tokens: int = Field(default=0, description="LLM tokens the decision used")
    cached: bool = Field(default=False, description="Reused for an identical earlier request")
    guard: str | None = Field(default=None, description="Routing directives found in the input, if any")
    fallback: str | None = Field(default=None, description="Why the rules decided instead of the LLM")
    parts: list[RoutedPartInfo] = Field(
        default_factory=list,
        description="The distinct jobs the request was split into (catalog multi_route), each a child of the "
        "task's group, which the task's specialist combines; empty: routed whole",
    )
    model: str | None = Field(default=None, description="The model the router called (null: none)")
    cost: float = Field(default=0.0, description="USD the routing call cost (the catalog's prices)")


class DeadLetterInfo(BaseModel):
    """Why and where the broker gave up on the task's message (set while ``dead_lettered``)."""

    reason: str = Field(description="delivery_limit, rejected, expired or maxlen (unknown: none of these)")
    queue: str = Field(description="The queue it died in (``lease``: its worker's lease expired too often)")
    count: int = Field(default=0, description="How many deaths the broker counted")
    deaths: list[dict[str, Any]] = Field(default_factory=list, description="The broker's x-death entries")
    at: datetime | None = Field(default=None, description="When it was recorded")


class TaskLinks(BaseModel):
    self_: str = Field(alias="self", description="This task")
    result: str = Field(description="The task's result (409 until it completes)")


def task_path(task_id: UUID) -> str:
    # Relative links: correct behind any proxy or ingress without knowing the public host.
    return f"/v1/tasks/{task_id}"


class TaskDocument(BaseModel):
    """A task as clients see it."""

    id: UUID
    status: TaskStatus
    specialist: str | None = Field(description="The specialist it was routed to; null until routed")
    requested_specialist: str | None = Field(description="The specialist the client asked for, if any")
    routing: RoutingInfo | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None = Field(description="Set when completed")
    error: TaskError | None = Field(description="Set when failed: a stable type and a message")
    usage: Usage
    cost: float = Field(
        default=0.0,
        description="USD spent on the task's LLM calls, routing and agent (the catalog's prices): "
        "routing.cost + usage.cost",
    )
    input: TaskInput
    metadata: dict[str, str]
    next_attempt_at: datetime | None = Field(description="When the next attempt is due (set when retrying)")
    deadline: datetime | None = Field(description="Not started by then: failed as expired")
    timeout_seconds: float | None = Field(
        description="Run time of one attempt asked for; null: the specialist's timeout_seconds"
    )
    cancel_requested_at: datetime | None = Field(description="When cancellation was requested")
    attempt_history: list[dict[str, Any]] = Field(
        description="One entry per failed, deferred or replayed attempt, oldest first "
        "(e.g. {attempt, error, delay_seconds, charged, at})"
    )
    dead_letter: DeadLetterInfo | None = Field(description="Set when dead_lettered")
    webhook: WebhookRequest | None = Field(
        default=None, description="Where its terminal status is announced, as submitted (null: nowhere)"
    )
    priority: Priority = Field(default=Priority.NORMAL, description="high, normal or low")
    not_before: datetime | None = Field(
        default=None, description="Not routed or started before then (scheduled until it passes)"
    )
    instructions: str | None = Field(
        default=None,
        description="Extra instructions for its agent, after the specialist's own (a chain step's, a reduce "
        "step's, a delegated task's)",
    )
    parent: UUID | None = Field(
        default=None,
        description="The task that created it: the previous step of its chain, or the task that delegated it",
    )
    group: GroupRef | None = Field(default=None, description="The group it belongs to, and its role there")
    chain: list[ChainLink] | None = Field(
        default=None,
        description="Its chain's steps created so far, first to last (null: not a chain's; null in lists)",
    )
    next: UUID | None = Field(
        default=None, description="The next step of its chain, once created (null in lists)"
    )
    children: list[ChildLink] | None = Field(
        default=None, description="The tasks it delegated to, oldest first (null in lists)"
    )
    links: TaskLinks

    @classmethod
    def from_record(
        cls,
        record: TaskRecord,
        *,
        chain: list[ChainLink] | None = None,
        children: list[ChildLink] | None = None,
    ) -> TaskDocument:
        """``chain`` and ``children``, read apart (``workflows.links``), only for a single task's document."""
        routing = record.routing
        path = task_path(record.id)
        following = [s.id for s in chain or () if s.index == (record.chain_index or 0) + 1]
        group = (
            GroupRef.model_validate({"id": record.group_id, "role": record.group_role})
            if record.group_id is not None and record.group_role is not None
            else None
        )
        return cls(
            id=record.id,
            status=record.status,
            specialist=record.specialist,
            requested_specialist=record.requested_specialist,
            routing=RoutingInfo(**routing.model_dump(exclude={"specialist"})) if routing else None,
            attempts=record.attempts,
            created_at=record.created_at,
            started_at=record.started_at,
            finished_at=record.finished_at,
            result=record.result,
            error=record.error,
            usage=record.usage,
            cost=record.cost,
            input=record.input,
            metadata=record.metadata,
            next_attempt_at=record.next_attempt_at,
            deadline=record.deadline,
            timeout_seconds=record.timeout_seconds,
            cancel_requested_at=record.cancel_requested_at,
            attempt_history=record.attempt_log,
            dead_letter=_dead_letter_info(record),
            webhook=_webhook_info(record),
            priority=record.priority,
            not_before=record.not_before,
            instructions=record.instructions,
            parent=record.parent_id,
            group=group,
            chain=chain,
            next=following[0] if following else None,
            children=children,
            links=TaskLinks.model_validate({"self": path, "result": f"{path}/result"}),
        )


def _dead_letter_info(record: TaskRecord) -> DeadLetterInfo | None:
    # Shown only while dead-lettered: after a replay the row keeps the summary, but it no longer applies.
    if record.status is not TaskStatus.DEAD_LETTERED or record.dead_letter is None:
        return None
    try:
        return DeadLetterInfo.model_validate(record.dead_letter)
    except ValidationError:
        # Written by another component; a malformed summary must not make the task unreadable.
        return DeadLetterInfo(reason=str(record.dead_letter.get("reason", "unknown")), queue="unknown")


def _webhook_info(record: TaskRecord) -> WebhookRequest | None:
    if record.webhook is None:
        return None
    try:
        return WebhookRequest.model_validate(record.webhook)
    except ValidationError:
        # Stored before today's rules, or by another component: shown as stored, never unreadable.
        return WebhookRequest.model_construct(
            url=str(record.webhook.get("url", "")), events=list(record.webhook.get("events", []))
        )


class TaskResult(BaseModel):
    """A completed task's result."""

    task_id: UUID
    result: dict[str, Any]
    usage: Usage


class TaskPage(BaseModel):
    """One page of tasks, newest first; pass ``next_cursor`` as ``cursor`` for the next page. With
    ``fields``, each item holds only those fields (and ``id``)."""

    items: list[TaskDocument]
    next_cursor: str | None
    truncated: bool = Field(
        default=False,
        description="The page stopped before its limit because its items reached the API's byte bound "
        "(TASKYARD_API_MAX_PAGE_BYTES); next_cursor continues after its last item",
    )


class TaskEventDocument(BaseModel):
    """One entry of a task's event log (also the ``data`` of its Server-Sent Event)."""

    seq: int = Field(description="Its number: from 1, one more per event, in the order they happened")
    type: str = Field(
        description="accepted, routed, attempt_started, llm_call, tool_call, token, retry_scheduled, resumed, "
        "handed_back, cancel_requested, lease_expired, replayed, delegated, child_finished, parts_finished, or a "
        "terminal status (completed, failed, cancelled, dead_lettered)"
    )
    data: dict[str, Any] = Field(description="What the type says happened (see the API documentation)")
    at: str = Field(
        description="When it was written (RFC 3339, UTC)", json_schema_extra={"format": "date-time"}
    )


class TaskEventPage(BaseModel):
    """A task's events numbered above ``after``, oldest first; pass ``next_after`` as ``after`` for the next."""

    items: list[TaskEventDocument]
    next_after: int = Field(description="The number of the last event here (``after`` again when none)")

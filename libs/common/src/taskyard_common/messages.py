"""Every message taskyard puts on the bus: pydantic v2 models, JSON only, one envelope and one model per kind.

``schema_version`` lets a consumer refuse (dead-letter) a message written by a newer producer instead of
misreading it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, TypeVar
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from taskyard_common.errors import InvalidMessage, NotAnnounceable

if TYPE_CHECKING:
    # Only for the annotations of ``from_record``: the store's records are built on these messages' models.
    from taskyard_common.store.records import TaskRecord

SCHEMA_VERSION: Final = 1

SpecialistName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,62}$")]
# A task's input: free text, or a JSON object for structured requests.
TaskInput = str | dict[str, Any]


class Priority(StrEnum):
    """How soon a task is consumed relative to others on the same queue; lower ones keep a guaranteed share."""

    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class RoutingMethod(StrEnum):
    LLM = "llm"
    RULES = "rules"
    EXPLICIT = "explicit"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# The most parts one multi-routed request is split into.
MAX_ROUTED_PARTS: Final = 5


class RoutedPart(_Model):
    """One job of a request that holds several (``multi_route``): who does it, and what it is."""

    specialist: SpecialistName
    job: str = Field(min_length=1, max_length=500)


class RoutingDecision(_Model):
    method: RoutingMethod
    # With ``parts``: the specialist that combines them.
    specialist: SpecialistName
    reason: str = Field(max_length=2000)
    confidence: float = Field(ge=0.0, le=1.0)
    # What the decision cost and how it was reached (defaults: decisions recorded before these existed).
    # Time the router took, LLM calls made and their tokens (0 for explicit, rules-only and cached ones).
    latency_ms: float | None = Field(default=None, ge=0)
    llm_calls: int = Field(default=0, ge=0)
    tokens: int = Field(default=0, ge=0)
    # Reused from the decision cache (an identical normalized request routed earlier).
    cached: bool = False
    # The kinds of routing directive the guard found in the request ("route_directive+injection"), if any.
    guard: str | None = Field(default=None, max_length=200)
    # Why the rules decided although an LLM is configured: llm_error, invalid_answer, no_llm or guard.
    fallback: str | None = Field(default=None, max_length=64)
    # A request split into distinct jobs (catalog ``multi_route``): each part runs as a child task of a group,
    # then ``specialist`` combines their outcomes. Empty: the usual single route, and left out of the JSON, so
    # that a single route reads as before to services that do not know the field yet (a rolling upgrade).
    parts: tuple[RoutedPart, ...] = Field(default=(), max_length=MAX_ROUTED_PARTS, exclude_if=lambda v: not v)
    # The model the router called and what its call cost in USD (the catalog's prices; 0 without an LLM
    # call or a price).
    model: str | None = Field(default=None, max_length=200)
    cost: float = Field(default=0.0, ge=0)


class Usage(_Model):
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    total_tokens: int = Field(default=0, ge=0)
    # USD, priced by the model that answered when the usage was recorded (the catalog's ``models``).
    cost: float = Field(default=0.0, ge=0)
    # The model that answered the last call counted here (None: no call, or recorded before this existed).
    model: str | None = Field(default=None, max_length=200)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
            cost=self.cost + other.cost,
            model=other.model or self.model,
        )


def utcnow() -> datetime:
    return datetime.now(UTC)


class Envelope(_Model):
    schema_version: Literal[1] = SCHEMA_VERSION
    task_id: UUID
    attempt: int = Field(default=1, ge=1)
    traceparent: str | None = Field(default=None, max_length=256)
    sent_at: datetime = Field(default_factory=utcnow)


class _TaskLimits(_Model):
    priority: Priority = Priority.NORMAL
    # Not started by then → failed with reason "expired".
    deadline: datetime | None = None
    # Per-attempt run time; None: the specialist's timeout_seconds.
    timeout_seconds: float | None = Field(default=None, gt=0)


class IntakeMessage(Envelope, _TaskLimits):
    """API → broker agent: a new task to route."""

    kind: Literal["intake"] = "intake"
    input: TaskInput
    requested_specialist: SpecialistName | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    # Not routed before then: the broker agent sends the message back through the delay queues until it is due.
    not_before: datetime | None = None

    @classmethod
    def from_record(cls, record: TaskRecord) -> IntakeMessage:
        """The intake message of a stored task (a submission, a replay of a task never routed, a sweep)."""
        return cls(
            task_id=record.id,
            input=record.input,
            requested_specialist=record.requested_specialist,
            metadata=record.metadata,
            priority=record.priority,
            deadline=record.deadline,
            timeout_seconds=record.timeout_seconds,
            not_before=record.not_before,
        )


class WorkMessage(Envelope, _TaskLimits):
    """Broker agent → specialist worker: a routed task to run. ``attempt`` counts charged attempts."""

    kind: Literal["work"] = "work"
    specialist: SpecialistName
    input: TaskInput
    routing: RoutingDecision
    metadata: dict[str, str] = Field(default_factory=dict)
    # Its tenant, for the worker's fair share and tenant caps (None: written before tenants were carried).
    tenant: str | None = Field(default=None, max_length=200)

    @classmethod
    def from_record(cls, record: TaskRecord) -> WorkMessage:
        """The work message of a routed task, rebuilt from the store (a replay, a reclaim, a stale queued
        task); ``attempt`` is the task's charged attempts so far (at least 1: a replay reset them).
        Raises ``NotAnnounceable`` for a task that was never routed."""
        if record.routing is None:
            raise NotAnnounceable(f"task {record.id} has no routing decision")
        return cls(
            task_id=record.id,
            attempt=max(1, record.attempts),
            specialist=record.routing.specialist,
            input=record.input,
            routing=record.routing,
            metadata=record.metadata,
            tenant=record.tenant,
            priority=record.priority,
            deadline=record.deadline,
            timeout_seconds=record.timeout_seconds,
        )


class ControlMessage(Envelope):
    """API → every worker (fanout): stop running this task now."""

    kind: Literal["cancel"] = "cancel"


M = TypeVar("M", bound=Envelope)


def encode(message: Envelope) -> bytes:
    return message.model_dump_json().encode()


def decode(model: type[M], body: bytes) -> M:
    """Parse a message body; anything that is not exactly ``model`` is permanent (it would never parse)."""
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        # Only the error types and locations: the body may hold user data and must not reach the logs.
        summary = "; ".join(f"{'.'.join(map(str, e['loc'])) or '<root>'}: {e['type']}" for e in exc.errors())
        raise InvalidMessage(f"not a valid {model.__name__}: {summary}") from None

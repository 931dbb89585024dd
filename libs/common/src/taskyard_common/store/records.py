"""The task store's records: what goes in (``NewTask``) and what comes out of it.

Plain data, no database: the services and the store's interface share them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, RoutingDecision, TaskInput, Usage
from taskyard_common.task_errors import TaskError

# The tenant of every task written without authentication (and of the rows older than tenants).
DEFAULT_TENANT = "default"
# When a lease that a worker's supervisor ended ends (``TaskStore.expire_leases``: its holder is known dead):
# the epoch, which no lease that ran out has.
LEASE_ENDED_BY_SUPERVISOR = datetime(1970, 1, 1, tzinfo=UTC)


class NewTask(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant: str = DEFAULT_TENANT
    input: TaskInput
    metadata: dict[str, str]
    requested_specialist: str | None = None
    deadline: datetime | None = None
    timeout_seconds: float | None = None
    # Where to announce its terminal status: {"url": ..., "events": [...]}.
    webhook: dict[str, Any] | None = None
    # Extra instructions for its agent, after the specialist's own.
    instructions: str | None = None
    # The steps of a chain that follow this task: [{"specialist"?, "instructions"?}, ...].
    chain_rest: list[dict[str, Any]] | None = None
    # A group's child or reduce task.
    group_id: UUID | None = None
    group_role: str | None = None
    # A delegated child: its parent, and where its result goes back ({parent_id, call_id, step}).
    parent_id: UUID | None = None
    delegation: dict[str, Any] | None = None
    depth: int = 0
    priority: Priority = Priority.NORMAL
    # Not routed before then; a time still ahead stores the task as scheduled.
    not_before: datetime | None = None


class TaskRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    status: TaskStatus
    tenant: str = DEFAULT_TENANT
    input: TaskInput
    metadata: dict[str, str]
    requested_specialist: str | None
    specialist: str | None
    routing: RoutingDecision | None
    attempts: int
    result: dict[str, Any] | None
    error: TaskError | None
    usage: Usage
    created_at: datetime
    published_at: datetime | None
    routed_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    next_attempt_at: datetime | None = None
    lease_owner: str | None = None
    lease_expires_at: datetime | None = None
    lease_expirations: int = 0
    cancel_requested_at: datetime | None = None
    deadline: datetime | None = None
    timeout_seconds: float | None = None
    attempt_log: list[dict[str, Any]] = []
    dead_letter: dict[str, Any] | None = None
    # The size of its step checkpoints (0: nothing to resume from).
    checkpoint_bytes: int = 0
    # The number of its last event (the event log's length).
    event_seq: int = 0
    webhook: dict[str, Any] | None = None
    # Workflows (see NewTask): a chain's first task has chain_root_id = its own id and chain_index 0.
    instructions: str | None = None
    parent_id: UUID | None = None
    chain_root_id: UUID | None = None
    chain_index: int | None = None
    chain_rest: list[dict[str, Any]] | None = None
    group_id: UUID | None = None
    group_role: str | None = None
    delegation: dict[str, Any] | None = None
    depth: int = 0
    waiting_children: int = 0
    priority: Priority = Priority.NORMAL
    not_before: datetime | None = None
    # Queued but kept in the store, not in the broker queue, since then (a full lane, a refused start): the
    # broker agent's feeder publishes it when its tenant's lane has room (store/parking.py).
    parked_at: datetime | None = None

    @property
    def cost(self) -> float:
        """USD its LLM calls cost so far: its routing call's and its agent's (``/v1/usage`` makes the same
        sum in SQL)."""
        return (self.routing.cost if self.routing is not None else 0.0) + self.usage.cost


class StartOutcome(StrEnum):
    STARTED = "started"  # the caller now holds the lease and runs the task
    FINISHED = "finished"  # already terminal (a duplicate or late delivery): nothing to run
    LEASED = "leased"  # another worker holds a live lease: try again once it may have expired
    EXPIRED = "expired"  # its deadline passed before it started: now failed with reason "expired"
    CANCELLED = "cancelled"  # cancellation was requested before it started: now cancelled
    NOT_ROUTED = "not_routed"  # still pending: the routing commit is not visible yet
    WAITING = "waiting"  # it waits for the child tasks it delegated to: a stray duplicate, nothing to run
    # Retrying: a copy of an earlier attempt's message (the retry sent its own): nothing to run.
    STALE = "stale"
    # Retrying: the message of its next attempt came before the backoff is over: start it later.
    NOT_DUE = "not_due"
    # Not started now, and the refusal is in its attempt history: send it round again (uncharged).
    DEFERRED = "deferred"
    UNKNOWN = "unknown"


class DeferralReason(StrEnum):
    """Why a startable task was not started now (an attempt history entry ``start_deferred``)."""

    TENANT_MAX_RUNNING = "tenant_max_running"  # its tenant runs its max_running tasks already
    FAIR_SHARE = "fair_share"  # its tenant holds its share of the worker's slots while others wait


@dataclass(frozen=True)
class StartResult:
    outcome: StartOutcome
    record: TaskRecord | None = None
    # For LEASED: seconds until the other worker's lease runs out.
    lease_remaining_seconds: float = 0.0
    # For NOT_DUE: seconds until the retry's backoff is over.
    retry_due_in_seconds: float = 0.0
    # For DEFERRED: why, and how many times in a row (this one included) it was deferred for that reason.
    reason: DeferralReason | None = None
    deferrals: int = 0
    # For DEFERRED: the task was parked (a queued task: the feeder publishes it again when its tenant has
    # room); False for a retrying one, whose message goes round a delay queue as before.
    parked: bool = False


@dataclass(frozen=True)
class RoutedTask:
    """What ``route`` returns once the decision is recorded: what its work message carries besides the
    intake message's fields."""

    deadline: datetime | None
    timeout_seconds: float | None
    tenant: str = DEFAULT_TENANT
    priority: Priority = Priority.NORMAL
    # Parked instead of published: its tenant's lane for the specialist was full (store/parking.py).
    parked: bool = False


class DeadLetterRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    task_id: UUID
    specialist: str | None
    reason: str
    queue: str
    deaths: list[dict[str, Any]]
    message: dict[str, Any]
    recorded_at: datetime
    task_status: TaskStatus
    tenant: str = DEFAULT_TENANT


@dataclass(frozen=True)
class IdempotentCreate:
    """What ``create_idempotent`` found: the task it created, or the one the key already names."""

    created: bool
    # The stored submission's hash: a different one means the key was reused for another request.
    request_hash: str
    # None when the key's task is gone or not yet written (never the case after a commit, but be safe).
    record: TaskRecord | None


@dataclass(frozen=True)
class WaitingAges:
    """How long the oldest waiting task of each queue has waited, in seconds, by the database's clock."""

    # The oldest task not routed yet (it waits in the intake queue); None when there is none.
    pending_seconds: float | None
    # Per specialist, the oldest task waiting to start in its work queue: queued since it was routed (or
    # handed back, reclaimed, replayed), or retrying and past its due time. Specialists without any: absent.
    queued_seconds: dict[str, float]


@dataclass(frozen=True)
class WorkflowCounts:
    """Workflows in progress, by the database: what the workflow gauges show."""

    # Task groups still running (multi-routed tasks' groups included).
    groups: int
    # Chains with a step not finished.
    chains: int
    # Tasks waiting for the tasks they delegated to, and multi-routed tasks waiting for their parts.
    waiting_delegation: int
    waiting_parts: int


# A page position: the (created_at, id) of the last task seen, newest first.
Cursor = tuple[datetime, UUID]


class Step(BaseModel):
    """One checkpointed step of an agent run: what it appended to the conversation.

    An LLM call is step ``n`` with ``call_id`` ``""`` (the assistant's reply and the call's ``usage``); the
    result of each tool call it asked for is step ``n`` with that call's id (and ``ok``).
    """

    model_config = ConfigDict(frozen=True)

    task_id: UUID
    step: int
    call_id: str = ""
    message: dict[str, Any]
    usage: Usage | None = None
    ok: bool | None = None
    # For the task's event log only (not kept with the step): the tool's name, the LLM call's latency.
    name: str | None = None
    latency_ms: float | None = None

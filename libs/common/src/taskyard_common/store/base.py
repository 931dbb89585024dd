"""What the services need from a task store, independent of the database behind it.

Every state change is one conditional statement (``... WHERE status IN (...)``), so a duplicate or late
message can never move a task backwards or complete it twice; the boolean results say whether it applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from taskyard_common.messages import RoutingDecision, TaskInput, TaskStatus, Usage

# The tenant of every task written without authentication (and of the rows older than tenants).
DEFAULT_TENANT = "default"


class NewTask(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: UUID
    tenant: str = DEFAULT_TENANT
    input: TaskInput
    metadata: dict[str, str]
    requested_specialist: str | None = None
    deadline: datetime | None = None
    timeout_seconds: float | None = None


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
    error: dict[str, Any] | None
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


class StartOutcome(StrEnum):
    STARTED = "started"  # the caller now holds the lease and runs the task
    FINISHED = "finished"  # already terminal (a duplicate or late delivery): nothing to run
    LEASED = "leased"  # another worker holds a live lease: try again once it may have expired
    EXPIRED = "expired"  # its deadline passed before it started: now failed with reason "expired"
    CANCELLED = "cancelled"  # cancellation was requested before it started: now cancelled
    NOT_ROUTED = "not_routed"  # still pending: the routing commit is not visible yet
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class StartResult:
    outcome: StartOutcome
    record: TaskRecord | None = None
    # For LEASED: seconds until the other worker's lease runs out.
    lease_remaining_seconds: float = 0.0


@dataclass(frozen=True)
class RoutedTask:
    """What ``route`` returns once the decision is recorded: the task's limits, for its work message."""

    deadline: datetime | None
    timeout_seconds: float | None


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


# A page position: the (created_at, id) of the last task seen, newest first.
Cursor = tuple[datetime, UUID]


class TaskStore(Protocol):
    async def ping(self) -> None: ...

    async def create(self, task: NewTask) -> TaskRecord: ...

    async def create_idempotent(
        self, task: NewTask, *, key: str, request_hash: str, retention_seconds: float
    ) -> IdempotentCreate:
        """Claim ``(task.tenant, key)`` and insert ``task`` in one transaction; when the key is already
        claimed (and younger than ``retention_seconds``), insert nothing and return what it names. A
        concurrent claim of the same key waits for the first one's commit (primary key)."""
        ...

    async def expire_idempotency_keys(self, older_than: datetime) -> int:
        """Delete the idempotency keys created before ``older_than``; returns how many."""
        ...

    async def mark_published(self, task_id: UUID) -> None:
        """Record that the task's current message (intake or work) was confirmed by the broker."""
        ...

    async def discard_unpublished(self, task_id: UUID) -> bool:
        """Delete a task whose intake publish failed, so nothing runs that the client was told failed."""
        ...

    async def unpublished(self, older_than: datetime, limit: int) -> list[TaskRecord]:
        """Pending tasks last changed before ``older_than`` whose intake message was never confirmed
        published (a producer died in between, or the publish of a replay failed)."""
        ...

    async def stale_queued(self, older_than: datetime, limit: int) -> list[TaskRecord]:
        """Queued tasks (no lease, no retry pending) last changed before ``older_than`` whose work message
        is not known to be published: a step that re-queues a task and must then publish it (a dead-letter
        replay) sets ``published_at`` to NULL in its commit, ``mark_published`` sets it after the confirm.
        A task merely waiting in a long queue has ``published_at`` set, so it is never announced twice."""
        ...

    async def oldest_waiting(self) -> WaitingAges:
        """The age of the oldest waiting task per queue, in one query (a metrics collector calls it)."""
        ...

    async def get(self, task_id: UUID) -> TaskRecord | None: ...

    async def list(
        self,
        *,
        status: TaskStatus | None,
        specialist: str | None,
        limit: int,
        after: Cursor | None,
        tenant: str | None = None,
    ) -> list[TaskRecord]:
        """Newest first; ``tenant`` None means every tenant (internal callers only, never the API)."""
        ...

    async def record_routing(self, task_id: UUID, decision: RoutingDecision) -> bool:
        """pending → queued with the decision; False when the task is no longer pending."""
        ...

    async def route(
        self, task_id: UUID, decision: RoutingDecision, deadline: datetime | None = None
    ) -> RoutedTask | None:
        """pending → queued with the decision, in one statement, unless the task's deadline (else
        ``deadline``) has passed. None when it did not apply: not pending any more, unknown, or expired
        (the caller reads the task to tell which)."""
        ...

    async def start(self, task_id: UUID, *, owner: str, lease_seconds: float, attempt: int) -> StartResult:
        """Take the task's lease: queued/retrying (or running with an expired lease, or already ours) →
        running. Checks cancellation and the deadline first."""
        ...

    async def start_many(
        self, attempts: dict[UUID, int], *, owner: str, lease_seconds: float
    ) -> dict[UUID, TaskRecord]:
        """``start``'s usual case for many tasks (task id → message attempt) in one statement: those queued or
        retrying, not cancelled, not past their deadline and not locked by another transaction become
        running under ``owner``'s lease. Returns the started ones; the rest need ``start``."""
        ...

    async def heartbeat(
        self, owner: str, task_ids: list[UUID], lease_seconds: float
    ) -> tuple[set[UUID], set[UUID]]:
        """Extend ``owner``'s leases; returns (ids still held, ids whose cancellation was requested)."""
        ...

    async def complete(self, task_id: UUID, result: dict[str, Any], usage: Usage, owner: str) -> bool:
        """running (leased by ``owner``) → completed; False when another delivery finished it already."""
        ...

    async def fail(
        self, task_id: UUID, error: dict[str, Any], usage: Usage, owner: str | None = None
    ) -> bool:
        """→ failed: from running leased by ``owner``, or from any non-terminal status when no owner."""
        ...

    async def mark_settled(self, task_id: UUID, owner: str) -> bool:
        """Record that the running task's message is about to be acked early: from now on an expired
        lease is the reaper's to reclaim (the broker will not redeliver the message)."""
        ...

    async def schedule_retry(
        self, task_id: UUID, owner: str, *, entry: dict[str, Any], next_attempt_at: datetime, usage: Usage
    ) -> bool:
        """running (``owner``) → retrying until ``next_attempt_at``; ``entry`` is appended to attempt_log."""
        ...

    async def release(self, task_id: UUID, owner: str) -> bool:
        """running (``owner``) → queued, lease dropped: a graceful hand-back, no attempt charged."""
        ...

    async def cancel_running(self, task_id: UUID, owner: str, usage: Usage) -> bool:
        """running (``owner``) → cancelled, after the worker stopped it."""
        ...

    async def request_cancel(self, task_id: UUID) -> TaskRecord | None:
        """pending/queued/retrying → cancelled at once; running → cancel requested (the worker stops it);
        terminal → unchanged. None when unknown. Returns the task as it is now."""
        ...

    async def expired_leases(self, limit: int) -> list[TaskRecord]: ...

    async def reclaim(
        self, task_id: UUID, max_expirations: int, message: dict[str, Any] | None = None
    ) -> TaskStatus | None:
        """A running task whose lease expired → queued with ``published_at`` cleared (the caller publishes
        it again, then calls ``mark_published``), or dead_lettered with reason ``delivery_limit`` (queue
        ``lease``) once its leases expired more than ``max_expirations`` times; then its ``dead_letters``
        row, keeping ``message`` for a replay, is written in the same transaction. None if it was not
        expired (another reaper took it, or its worker renewed the lease)."""
        ...

    async def record_dead_letter(
        self,
        task_id: UUID,
        *,
        reason: str,
        queue: str,
        deaths: list[dict[str, Any]],
        message: dict[str, Any],
        specialist: str | None,
    ) -> bool:
        """A non-terminal task → dead_lettered, keeping the message for replay; False if the task is
        unknown or already terminal (a stray duplicate died: nothing to do)."""
        ...

    async def list_dead_letters(
        self,
        *,
        specialist: str | None,
        reason: str | None,
        limit: int,
        after: tuple[datetime, UUID] | None,
        tenant: str | None = None,
    ) -> list[DeadLetterRecord]:
        """Most recent first; ``tenant`` None means every tenant (internal callers only)."""
        ...

    async def get_dead_letter(self, task_id: UUID) -> DeadLetterRecord | None: ...

    async def replay_dead_letter(self, task_id: UUID, specialist: str | None) -> TaskRecord | None:
        """Take the dead letter back: the task becomes queued (pending when it was never routed and no
        specialist is given) with attempts reset and ``published_at`` cleared until the caller publishes
        it and calls ``mark_published``. None when there is no such open dead letter."""
        ...

    async def discard_dead_letter(self, task_id: UUID) -> bool:
        """Close the dead letter without replaying; the task stays dead_lettered."""
        ...

    async def close(self) -> None: ...

"""What the services need from a task store, independent of the database behind it.

Every state change is one conditional statement (``... WHERE status IN (...)``), so a duplicate or late
message can never move a task backwards or complete it twice; the boolean results say whether it applied.
The transitions are named as in ``taskyard_common.lifecycle.TRANSITIONS``.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority, RoutingDecision, Usage
from taskyard_common.store.events import TaskEvent
from taskyard_common.store.groups import GroupRecord
from taskyard_common.store.records import (
    Cursor,
    DeadLetterRecord,
    DeferralReason,
    IdempotentCreate,
    NewTask,
    RoutedTask,
    StartResult,
    Step,
    TaskRecord,
    WaitingAges,
    WorkflowCounts,
)
from taskyard_common.store.tenant_limits import TenantWaiting
from taskyard_common.task_errors import TaskError


class TaskStore(Protocol):
    # Told each task a transition changed (its event log grew), and each task a task's end created or
    # resumed (to announce it): set by the service that opened the store.
    on_change: Callable[[UUID], None] | None
    on_follow_up: Callable[[TaskRecord], None] | None

    # --- submissions -----------------------------------------------------------------------------------

    async def ping(self) -> None: ...

    async def create(self, task: NewTask) -> TaskRecord:
        """→ pending (transition ``create``); committed before its intake message is published."""
        ...

    async def create_many(self, tasks: Sequence[NewTask]) -> builtins.list[TaskRecord]:
        """``create`` for many tasks in one statement, committed together; records in the order of ``tasks``."""
        ...

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

    async def mark_published_many(self, task_ids: Sequence[UUID]) -> int:
        """``mark_published`` for many tasks in one statement; how many changed."""
        ...

    async def discard_unpublished(self, task_id: UUID) -> bool:
        """Delete a task whose intake publish failed, so nothing runs that the client was told failed."""
        ...

    # --- reads -----------------------------------------------------------------------------------------

    async def get(self, task_id: UUID) -> TaskRecord | None: ...

    async def versions(
        self, task_ids: Sequence[UUID], *, watch_seconds: float | None = None
    ) -> dict[UUID, tuple[int, datetime]]:
        """``(event_seq, updated_at)`` of each of ``task_ids`` that exists, in one query: how a process
        watching many tasks sees which of them changed since it last looked (absent: the task is gone).
        ``watch_seconds``: also mark them watched that long, so their changes publish wake-ups."""
        ...

    async def list(
        self,
        *,
        status: TaskStatus | None,
        specialist: str | None,
        limit: int,
        after: Cursor | None,
        tenant: str | None = None,
        priority: Priority | None = None,
        omit: frozenset[str] = frozenset(),
    ) -> builtins.list[TaskRecord]:
        """Newest first; ``tenant`` None means every tenant (internal callers only, never the API).
        ``omit``: large columns (``reads.OMITTABLE``) left unread; the records hold placeholders there."""
        ...

    async def database_now(self) -> datetime:
        """The database's clock: what ``updated_at`` and ``created_at`` are written by, so the cut-offs of
        the sweeper and the reaper are computed from it, never from the host's clock."""
        ...

    async def unpublished(
        self, older_than: datetime, limit: int, exclude: Sequence[UUID] = ()
    ) -> builtins.list[TaskRecord]:
        """Pending tasks last changed before ``older_than`` whose intake message was never confirmed
        published (a producer died in between, or the publish of a replay failed); not those in
        ``exclude`` (a caller's rows that cannot be announced, so they never fill its batch)."""
        ...

    async def stale_queued(
        self, older_than: datetime, limit: int, exclude: Sequence[UUID] = ()
    ) -> builtins.list[TaskRecord]:
        """Queued tasks (no lease, no retry pending) last changed before ``older_than`` whose work message
        is not known to be published: a step that re-queues a task and must then publish it (a dead-letter
        replay, a reclaim) sets ``published_at`` to NULL in its commit, ``mark_published`` sets it after the
        confirm. A task merely waiting in a long queue has ``published_at`` set, so it is never announced
        twice, and neither has a parked task (``parking.py``). Not those in ``exclude``."""
        ...

    async def expired_leases(self, limit: int) -> builtins.list[TaskRecord]:
        """Running tasks whose message was settled early and whose lease has run out (the reaper's)."""
        ...

    async def workflow_counts(self) -> WorkflowCounts:
        """Groups and chains in progress, and the waiting parents by what they wait for."""
        ...

    async def oldest_waiting(self) -> WaitingAges:
        """The age of the oldest waiting task per queue, in one query (a metrics collector calls it)."""
        ...

    # --- transitions (see taskyard_common.lifecycle.TRANSITIONS) ----------------------------------------
    # The ``usage`` an outcome takes is what the attempt used beyond its recorded steps: it is added to the
    # task's total (recorded steps added theirs already), so every LLM call counts once.

    async def route(
        self,
        task_id: UUID,
        decision: RoutingDecision,
        deadline: datetime | None = None,
        *,
        lane_depth: int | None = None,
    ) -> RoutedTask | None:
        """pending → queued with the decision, in one statement, unless the task's deadline (else
        ``deadline``) has passed. None when it did not apply: not pending any more, unknown, or expired
        (the caller reads the task to tell which). ``lane_depth``: the depth of its tenant's lane for the
        specialist; a full lane parks it (``RoutedTask.parked``: the caller publishes nothing, see
        ``parking.py``); None: never parked."""
        ...

    async def release_parked(self, depths: Mapping[str, int], *, limit: int) -> builtins.list[TaskRecord]:
        """One round of the parked tasks' feeder (``parking.py``): those released now, for the caller to
        publish and mark. ``depths``: each specialist's lane depth."""
        ...

    async def parked_count(self, specialist: str, tenant: str) -> int:
        """How many of ``tenant``'s tasks for ``specialist`` are parked."""
        ...

    async def start(
        self, task_id: UUID, *, owner: str, lease_seconds: float, attempt: int, capped: bool = False
    ) -> StartResult:
        """Take the task's lease: queued/retrying (or running with an expired lease, or already ours) →
        running. Checks cancellation (→ cancelled) and the deadline (→ failed, expired) first. A retrying
        task starts only from the message of its next attempt (``STALE`` for an earlier one) once its
        ``next_attempt_at`` has passed (``NOT_DUE`` before). Then its tenant's ``max_running``: at the cap,
        ``DEFERRED`` (reason ``tenant_max_running``, noted in its attempt history, nothing charged).
        ``capped``: the caller knows the tenant has a cap (saves the one-statement attempt, which skips such
        tasks); the answer is the same either way."""
        ...

    async def defer_start(self, task_id: UUID, reason: DeferralReason, attempt: int) -> StartResult | None:
        """Refuse to start a startable task now for ``reason`` (noted in its attempt history); None when
        it is not startable (``start`` tells what it is instead)."""
        ...

    async def tenant_load(self, specialist: str) -> dict[str, TenantWaiting]:
        """Per tenant with work waiting for ``specialist``: how much, and its room under its cap."""
        ...

    async def start_many(
        self, attempts: dict[UUID, int], *, owner: str, lease_seconds: float
    ) -> dict[UUID, TaskRecord]:
        """``start``'s usual case for many tasks (task id → message attempt) in one statement: those queued or
        retrying, not cancelled, not past their deadline, of a tenant without a cap and not locked by
        another transaction become running under ``owner``'s lease. Returns the started ones; the rest need ``start``."""
        ...

    async def heartbeat(
        self, owner: str, task_ids: builtins.list[UUID], lease_seconds: float
    ) -> tuple[set[UUID], set[UUID]]:
        """Extend ``owner``'s leases; returns (ids still held, ids whose cancellation was requested)."""
        ...

    async def expire_leases(self, owner: str) -> int:
        """End every lease ``owner`` holds now (its process is known to be dead: a worker's supervisor saw it
        die), so that the next start of each task takes it over without waiting; the tasks stay running.
        Each lease then ends at ``LEASE_ENDED_BY_SUPERVISOR`` (the epoch), which tells a lease known dead
        from one that ran out. Returns how many leases were ended."""
        ...

    async def append_attempt_log(self, task_id: UUID, owner: str, entry: dict[str, Any]) -> bool:
        """Add ``entry`` to the attempt history of a task ``owner`` runs (a resumed attempt says so)."""
        ...

    async def settle(self, task_id: UUID, owner: str) -> bool:
        """Record that the running task's message is about to be acked early: from now on an expired
        lease is the reaper's to reclaim (the broker will not redeliver the message)."""
        ...

    async def complete(self, task_id: UUID, result: dict[str, Any], usage: Usage, owner: str) -> bool:
        """running (leased by ``owner``) → completed; False when another delivery finished it already."""
        ...

    async def fail(self, task_id: UUID, error: TaskError, usage: Usage, owner: str | None = None) -> bool:
        """→ failed: from running leased by ``owner``, or from any non-terminal status when no owner."""
        ...

    async def fail_unstarted(self, task_id: UUID, error: TaskError) -> bool:
        """scheduled, pending or queued → failed, checked in the same statement: never a task a worker has
        started (or that finished) meanwhile. The broker agent's failures."""
        ...

    async def expire(self, task_id: UUID, message: str) -> bool:
        """Not started (pending, queued, retrying) and past its deadline → failed with type ``expired``."""
        ...

    async def schedule_retry(
        self, task_id: UUID, owner: str, *, entry: dict[str, Any], next_attempt_at: datetime, usage: Usage
    ) -> bool:
        """running (``owner``) → retrying until ``next_attempt_at``; ``entry`` is appended to attempt_log."""
        ...

    async def release(self, task_id: UUID, owner: str) -> bool:
        """running (``owner``) → queued, lease dropped: a graceful hand-back, no attempt charged."""
        ...

    async def cancel(self, task_id: UUID) -> TaskRecord | None:
        """pending/queued/retrying → cancelled at once; running → cancel requested (the worker stops it);
        terminal → unchanged. None when unknown. Returns the task as it is now."""
        ...

    async def cancel_running(self, task_id: UUID, owner: str, usage: Usage) -> bool:
        """running (``owner``) → cancelled, after the worker stopped it."""
        ...

    async def reclaim(
        self, task_id: UUID, max_expirations: int, message: dict[str, Any] | None = None
    ) -> TaskStatus | None:
        """A running task whose lease expired → queued with ``published_at`` cleared (the caller publishes
        it again, then calls ``mark_published``), or dead_lettered with reason ``delivery_limit`` (queue
        ``lease``) once its leases expired more than ``max_expirations`` times; then its ``dead_letters``
        row, keeping ``message`` for a replay, is written in the same transaction. None if it was not
        expired (another reaper took it, or its worker renewed the lease)."""
        ...

    async def dead_letter(
        self,
        task_id: UUID,
        *,
        reason: str,
        queue: str,
        deaths: builtins.list[dict[str, Any]],
        message: dict[str, Any],
        specialist: str | None,
    ) -> bool:
        """A non-terminal task → dead_lettered, keeping the message for replay; False if the task is
        unknown or already terminal (a stray duplicate died: nothing to do)."""
        ...

    async def replay(
        self, task_id: UUID, specialist: str | None, *, from_scratch: bool = False
    ) -> TaskRecord | None:
        """Take the dead letter back: the task becomes queued (pending when it was never routed and no
        specialist is given) with attempts reset and ``published_at`` cleared until the caller publishes
        it and calls ``mark_published``; ``from_scratch`` drops its step checkpoints too (else the next
        attempt resumes after them). None when there is no such open dead letter."""
        ...

    # --- step checkpoints (durable agent runs) ----------------------------------------------------------

    async def record_steps(self, steps: Sequence[Step], *, owner: str) -> set[UUID]:
        """Add the steps of tasks ``owner`` holds (a recorded step is kept as it was); returns the ids of the
        tasks still held. The steps of a task whose lease is gone are dropped."""
        ...

    async def steps(self, task_id: UUID) -> builtins.list[Step]:
        """Every recorded step of a task, in conversation order."""
        ...

    async def discard_steps(self, task_id: UUID) -> int:
        """Forget a task's checkpoints (a run from scratch); how many steps were dropped."""
        ...

    # --- the event log ----------------------------------------------------------------------------------

    async def append_events(
        self, task_id: UUID, owner: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> bool:
        """Append ``(type, data)`` events to a task ``owner`` runs (streamed tokens); False when the lease is
        gone or the task's event log is full."""
        ...

    async def events(self, task_id: UUID, *, after: int = 0, limit: int = 100) -> builtins.list[TaskEvent]:
        """The task's events numbered above ``after``, oldest first."""
        ...

    # --- workflows (chains, groups, delegation) ---------------------------------------------------------

    async def delegate(
        self, task_id: UUID, owner: str, children: Sequence[NewTask]
    ) -> builtins.list[TaskRecord] | None:
        """running (``owner``) → waiting for ``children``, created in the same transaction; None when the
        lease is gone. The last child's end resumes it (queued, the children's outcomes recorded as its
        tool results)."""
        ...

    async def cancel_descendants(self, task_id: UUID) -> builtins.list[UUID]:
        """Cancel what the task delegated, all the way down; returns the running ones (tell their workers)."""
        ...

    async def children(self, task_id: UUID) -> builtins.list[dict[str, Any]]: ...

    async def chain(self, root_id: UUID) -> builtins.list[dict[str, Any]]: ...

    async def links(
        self, task_id: UUID, chain_root_id: UUID | None
    ) -> tuple[builtins.list[dict[str, Any]], builtins.list[dict[str, Any]]]:
        """(``chain(chain_root_id)``, ``children(task_id)``) in one query: what a task's document links."""
        ...

    async def create_group(
        self,
        group_id: UUID,
        *,
        tenant: str,
        tasks: Sequence[NewTask],
        reduce: dict[str, Any] | None,
        metadata: dict[str, str],
    ) -> builtins.list[TaskRecord]: ...

    async def create_group_idempotent(
        self,
        group_id: UUID,
        *,
        tenant: str,
        tasks: Sequence[NewTask],
        reduce: dict[str, Any] | None,
        metadata: dict[str, str],
        key: str,
        request_hash: str,
        retention_seconds: float,
    ) -> tuple[bool, str, UUID | None, builtins.list[TaskRecord]]: ...

    async def group_key(
        self, tenant: str, key: str, retention_seconds: float
    ) -> tuple[str, UUID | None] | None:
        """(request hash, group) of a group Idempotency-Key younger than ``retention_seconds``, or None."""
        ...

    async def discard_group(self, group_id: UUID) -> builtins.list[UUID]:
        """Take back a group whose announcement failed (its children not yet routed deleted, any routed
        cancelled); returns the running ones (tell their workers)."""
        ...

    async def expire_group_idempotency_keys(self, older_than: datetime) -> int:
        """Delete the groups' idempotency keys created before ``older_than``; returns how many."""
        ...

    async def get_group(self, group_id: UUID) -> GroupRecord | None: ...

    async def group_children(
        self, group_id: UUID, *, limit: int, after: tuple[Any, UUID] | None = None
    ) -> builtins.list[dict[str, Any]]: ...

    async def cancel_group(self, group_id: UUID) -> builtins.list[UUID]: ...

    async def route_parts(
        self,
        task_id: UUID,
        decision: RoutingDecision,
        group_id: UUID,
        parts: Sequence[NewTask],
        deadline: datetime | None = None,
    ) -> builtins.list[TaskRecord] | None:
        """A multi-routed task: pending → waiting with ``decision``, as the reduce (combine) step of group
        ``group_id``, created with its children ``parts`` in one transaction. None when it did not apply (as
        ``route``); else the children (announce them)."""
        ...

    async def settle_group(self, group_id: UUID) -> str | None:
        """Create the group's reduce task once its children are done (once), or finish the group."""
        ...

    async def unsettled_groups(self, limit: int = 100) -> builtins.list[UUID]: ...

    # --- dead letters ----------------------------------------------------------------------------------

    async def list_dead_letters(
        self,
        *,
        specialist: str | None,
        reason: str | None,
        limit: int,
        after: tuple[datetime, UUID] | None,
        tenant: str | None = None,
    ) -> builtins.list[DeadLetterRecord]:
        """Most recent first; ``tenant`` None means every tenant (internal callers only)."""
        ...

    async def get_dead_letter(self, task_id: UUID) -> DeadLetterRecord | None: ...

    async def discard_dead_letter(self, task_id: UUID) -> bool:
        """Close the dead letter without replaying; the task stays dead_lettered."""
        ...

    async def close(self) -> None: ...

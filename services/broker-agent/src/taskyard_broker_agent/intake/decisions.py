"""What to do with an intake message, given the task as stored: pure functions, so every case is unit-tested
without a broker or a database. ``handler.IntakeHandler`` reads the task, asks, and carries the answer out.

The store is the source of truth, which makes the intake idempotent under redelivery:

- a task still pending is routed (``Route``), or recorded at once when the client named a specialist of
  the catalog (``Record``); an unknown name fails it (``FailUnknownSpecialist``): the API and the broker
  agent run different catalogs during a rollout, retrying cannot help, and routing it elsewhere would
  ignore the client;
- a task already queued with a decision is a redelivery after a crash between recording and publishing:
  its STORED decision is published again (``Republish``), never routed a second time (the answer could
  differ, and it costs an LLM call);
- a task whose deadline passed before it was routed fails as expired (``Expire``);
- a task that is running or finished (cancelled included), or that the API discarded, is acknowledged
  without a publish (``IgnoreDuplicate``, ``IgnoreFinished``, ``DropUnknown``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from taskyard_common.catalog import Catalog
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage, Priority, RoutingDecision, RoutingMethod
from taskyard_common.store import DEFAULT_TENANT, TaskRecord

EXPLICIT_REASON = "requested by the client"


@dataclass(frozen=True)
class Route:
    """Pending: ask the router, record its decision, publish."""


@dataclass(frozen=True)
class Record:
    """Pending, and nothing to decide: record ``decision``, publish."""

    decision: RoutingDecision


@dataclass(frozen=True)
class Republish:
    """Queued already: publish the stored decision again, with the task's limits, tenant and priority."""

    decision: RoutingDecision
    deadline: datetime | None
    timeout_seconds: float | None
    tenant: str = DEFAULT_TENANT
    priority: Priority = Priority.NORMAL


@dataclass(frozen=True)
class Expire:
    """Not started, and its deadline passed: fail it as expired."""


@dataclass(frozen=True)
class FailUnknownSpecialist:
    """The requested specialist is not in this broker agent's catalog: fail the task."""

    specialist: str


@dataclass(frozen=True)
class DropUnknown:
    """No such task: the API discarded it (it could not confirm its intake publish, and told the client)."""


@dataclass(frozen=True)
class IgnoreFinished:
    """Finished already (cancelled included)."""

    status: TaskStatus


@dataclass(frozen=True)
class IgnoreDuplicate:
    """Another delivery got further: a worker has it, or it waits for a retry."""

    status: TaskStatus


IntakeAction = (
    Route
    | Record
    | Republish
    | Expire
    | FailUnknownSpecialist
    | DropUnknown
    | IgnoreFinished
    | IgnoreDuplicate
)


def deadline_passed(deadline: datetime | None, now: datetime | None = None) -> bool:
    if deadline is None:
        return False
    return as_utc(deadline) <= (now or datetime.now(UTC))


def as_utc(moment: datetime) -> datetime:
    """A naive timestamp from a client means UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def explicit_decision(message: IntakeMessage, catalog: Catalog) -> RoutingDecision | None:
    """The decision for a requested specialist of the catalog, else None. There is nothing to decide, so the
    handler records it without reading the task first: the conditional ``route`` says whether it applied."""
    requested = message.requested_specialist
    if requested is None or catalog.get(requested) is None:
        return None
    return RoutingDecision(
        method=RoutingMethod.EXPLICIT, specialist=requested, reason=EXPLICIT_REASON, confidence=1.0
    )


def decide_intake(
    message: IntakeMessage,
    task: TaskRecord | None,
    catalog: Catalog,
    now: datetime,
    *,
    route_refused: bool = False,
) -> IntakeAction:
    """What to do with ``message`` given ``task`` as stored. ``route_refused``: the store has just refused
    to record a decision for it, so a task still pending was refused by its deadline, by the database's
    clock (which may run ahead of ``now``)."""
    if task is None:
        return DropUnknown()
    if task.status.terminal:
        return IgnoreFinished(task.status)
    deadline = task.deadline or message.deadline
    if task.status is TaskStatus.QUEUED and task.routing is not None:
        if deadline_passed(deadline, now):
            return Expire()
        return Republish(task.routing, task.deadline, task.timeout_seconds, task.tenant, task.priority)
    if task.status is not TaskStatus.PENDING:
        return IgnoreDuplicate(task.status)
    if route_refused or deadline_passed(deadline, now):
        return Expire()
    if message.requested_specialist is None:
        return Route()
    explicit = explicit_decision(message, catalog)
    if explicit is None:
        return FailUnknownSpecialist(message.requested_specialist)
    return Record(explicit)

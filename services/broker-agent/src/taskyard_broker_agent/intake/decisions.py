"""What to do with an intake message, given the task as stored: pure functions, so every case is unit-tested
without a broker or a database. ``handler.IntakeHandler`` reads the task, asks, and carries the answer out.

The store is the source of truth, which makes the intake idempotent under redelivery:

- a task still pending is routed (``Route``; with ``multi_route``, perhaps split into parts), or recorded
  at once when the client named a specialist of the catalog (``Record``); an unknown name fails it (``FailUnknownSpecialist``): the API and the broker
  agent run different catalogs during a rollout, retrying cannot help, and routing it elsewhere would
  ignore the client;
- a task already queued with a decision is a redelivery after a crash between recording and publishing:
  its STORED decision is published again (``Republish``), never routed a second time (the answer could
  differ, and it costs an LLM call), unless the task is parked (its tenant's lane was full: the feeder
  publishes it, ``taskyard_common.store.parking``), which is acknowledged without a publish;
- a task whose deadline passed before it was routed fails as expired (``Expire``);
- a task whose ``not_before`` is still ahead (``scheduled``) goes back through the delay queues
  (``Delay``): the longest delay tier that does not pass ``not_before``, hop after hop, without counting a
  routing attempt and without holding the message. The row's ``not_before`` decides (a message re-sent by the
  sweeper or written before scheduling may not carry it), and so does the database's clock in the end: when
  the store refuses to route a scheduled task this clock calls due, the database's clock is behind, and the
  message waits one more short hop;
- a task that is running or finished (cancelled included), or that the API discarded, is acknowledged
  without a publish (``IgnoreDuplicate``, ``IgnoreFinished``, ``DropUnknown``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from taskyard_common.catalog import Catalog
from taskyard_common.lifecycle import ROUTABLE, TaskStatus
from taskyard_common.messages import IntakeMessage, Priority, RoutingDecision, RoutingMethod
from taskyard_common.retry import hop_tier
from taskyard_common.store import DEFAULT_TENANT, TaskRecord

EXPLICIT_REASON = "requested by the client"


@dataclass(frozen=True)
class Route:
    """Pending: ask the router (for ``tenant``: its decision cache is per tenant), record its decision,
    publish. ``split``: the task as stored when its request may be split into parts (catalog
    ``multi_route``, and a task of its own: no group's, no delegated one); its parts copy its tenant, limits
    and priority."""

    tenant: str | None = None
    split: TaskRecord | None = None


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
class Delay:
    """Not due yet (its ``not_before`` is ahead): send the message back through the delay tier of
    ``seconds``, carrying ``not_before``, uncharged."""

    seconds: int
    not_before: datetime


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
    | Delay
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


def not_due(message: IntakeMessage, now: datetime) -> bool:
    """The message itself says its task is not due yet: read the task before recording anything."""
    return message.not_before is not None and as_utc(message.not_before) > now


def delay(not_before: datetime | None, now: datetime) -> Delay | None:
    """The hop towards ``not_before`` while it is ahead; None once it has passed (or without one)."""
    if not_before is None:
        return None
    moment = as_utc(not_before)
    remaining = (moment - now).total_seconds()
    return Delay(hop_tier(remaining), moment) if remaining > 0 else None


def refused_as_early(not_before: datetime, deadline: datetime | None, now: datetime) -> bool:
    """Why the store refused to route a task this clock calls due and unexpired: the database's clock is
    either before its not_before (behind this one) or past its deadline (ahead). Without a deadline only the
    first is possible, without a not_before only the second; with both (the deadline is later), whichever
    this clock is nearer to: the clocks differ by far less than the time between the two."""
    if deadline is None:
        return True
    start, end = as_utc(not_before), as_utc(deadline)
    return now < start + (end - start) / 2


def explicit_decision(message: IntakeMessage, catalog: Catalog) -> RoutingDecision | None:
    """The decision for a requested specialist of the catalog, else None. There is nothing to decide, so the
    handler records it without reading the task first: the conditional ``route`` says whether it applied."""
    requested = message.requested_specialist
    if requested is None or catalog.get(requested) is None:
        return None
    return RoutingDecision(
        method=RoutingMethod.EXPLICIT, specialist=requested, reason=EXPLICIT_REASON, confidence=1.0
    )


def may_split(task: TaskRecord, catalog: Catalog) -> bool:
    """Whether routing may split the task into parts: the catalog allows it, and the task is no part of a
    group (its parts would be a group's children again) and was not delegated (its parent waits for one
    answer, and delegation has its own depth and fan-out bounds)."""
    return catalog.multi_route and task.group_id is None and task.delegation is None


def decide_intake(
    message: IntakeMessage,
    task: TaskRecord | None,
    catalog: Catalog,
    now: datetime,
    *,
    route_refused: bool = False,
) -> IntakeAction:
    """What to do with ``message`` given ``task`` as stored. ``route_refused``: the store has just refused
    to record a decision for it, so a task still pending or scheduled was refused by its deadline or its
    not_before, by the database's clock (which may run ahead of or behind ``now``)."""
    if task is None:
        return DropUnknown()
    if task.status.terminal:
        return IgnoreFinished(task.status)
    deadline = task.deadline or message.deadline
    if task.status is TaskStatus.QUEUED and task.routing is not None:
        if deadline_passed(deadline, now):
            return Expire()
        if task.parked_at is not None:
            # Parked on purpose (its tenant's lane was full): the feeder publishes it, not a redelivery.
            return IgnoreDuplicate(task.status)
        return Republish(task.routing, task.deadline, task.timeout_seconds, task.tenant, task.priority)
    if task.status not in ROUTABLE:
        return IgnoreDuplicate(task.status)
    if deadline_passed(deadline, now):
        return Expire()
    # The row's not_before first: a message re-sent by the sweeper, or replayed, may not carry it.
    not_before = task.not_before or message.not_before
    wait = delay(not_before, now)
    if wait is not None:
        return wait
    if route_refused:
        if not_before is not None and refused_as_early(not_before, deadline, now):
            # Due by this clock, not yet by the database's: one shortest hop more.
            return Delay(hop_tier(0), as_utc(not_before))
        return Expire()
    if message.requested_specialist is None:
        return Route(task.tenant, task if may_split(task, catalog) else None)
    explicit = explicit_decision(message, catalog)
    if explicit is None:
        return FailUnknownSpecialist(message.requested_specialist)
    return Record(explicit)

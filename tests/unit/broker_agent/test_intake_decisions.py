"""What the intake handler does with a message, given the task as stored: every branch of the pure decision."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_broker_agent.intake.decisions import (
    EXPLICIT_REASON,
    DropUnknown,
    Expire,
    FailUnknownSpecialist,
    IgnoreDuplicate,
    IgnoreFinished,
    Record,
    Republish,
    Route,
    decide_intake,
    explicit_decision,
)
from taskyard_common.catalog import Catalog
from taskyard_common.lifecycle import TERMINAL, TaskStatus
from taskyard_common.messages import IntakeMessage, RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import TaskRecord

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
PAST = NOW - timedelta(seconds=1)
LATER = NOW + timedelta(hours=1)
STORED = RoutingDecision(method=RoutingMethod.LLM, specialist="general", reason="earlier", confidence=0.4)
TASK_ID = uuid.uuid4()


def message(requested: str | None = None, deadline: datetime | None = None) -> IntakeMessage:
    return IntakeMessage(
        task_id=TASK_ID, input="Please summarize this", requested_specialist=requested, deadline=deadline
    )


def task(
    status: TaskStatus,
    *,
    routing: RoutingDecision | None = None,
    deadline: datetime | None = None,
    timeout_seconds: float | None = None,
) -> TaskRecord:
    return TaskRecord(
        id=TASK_ID,
        status=status,
        input="Please summarize this",
        metadata={},
        requested_specialist=None,
        specialist=routing.specialist if routing else None,
        routing=routing,
        attempts=0,
        result=None,
        error=None,
        usage=Usage(),
        created_at=NOW - timedelta(minutes=1),
        published_at=None,
        routed_at=None,
        started_at=None,
        finished_at=None,
        updated_at=NOW,
        deadline=deadline,
        timeout_seconds=timeout_seconds,
    )


def test_a_pending_task_is_routed(catalog: Catalog):
    assert decide_intake(message(), task(TaskStatus.PENDING), catalog, NOW) == Route()
    assert (
        decide_intake(message(deadline=LATER), task(TaskStatus.PENDING, deadline=LATER), catalog, NOW)
        == Route()
    )


def test_a_requested_specialist_of_the_catalog_is_recorded_without_routing(catalog: Catalog):
    decision = explicit_decision(message("support-analyst"), catalog)
    assert decision == RoutingDecision(
        method=RoutingMethod.EXPLICIT, specialist="support-analyst", reason=EXPLICIT_REASON, confidence=1.0
    )
    got = decide_intake(message("support-analyst"), task(TaskStatus.PENDING), catalog, NOW)
    assert got == Record(decision)


def test_only_a_requested_specialist_of_the_catalog_is_explicit(catalog: Catalog):
    assert explicit_decision(message(), catalog) is None
    assert explicit_decision(message("astrologer"), catalog) is None


def test_a_requested_specialist_outside_the_catalog_fails_the_task(catalog: Catalog):
    got = decide_intake(message("astrologer"), task(TaskStatus.PENDING), catalog, NOW)
    assert got == FailUnknownSpecialist("astrologer")


@pytest.mark.parametrize(
    ("task_deadline", "message_deadline"),
    [(PAST, None), (None, PAST), (PAST, LATER), (NOW, None), (None, PAST.replace(tzinfo=None))],
    ids=["task", "message", "task-first", "exactly-now", "naive-means-utc"],
)
def test_a_pending_task_past_its_deadline_expires(catalog: Catalog, task_deadline, message_deadline):
    stored = task(TaskStatus.PENDING, deadline=task_deadline)
    assert decide_intake(message(deadline=message_deadline), stored, catalog, NOW) == Expire()
    # The deadline comes first: an unknown specialist of an expired task does not matter any more.
    assert decide_intake(message("astrologer", message_deadline), stored, catalog, NOW) == Expire()


def test_a_redelivery_republishes_the_stored_decision_without_routing_again(catalog: Catalog):
    stored = task(TaskStatus.QUEUED, routing=STORED, deadline=LATER, timeout_seconds=42.5)
    assert decide_intake(message(), stored, catalog, NOW) == Republish(STORED, LATER, 42.5)
    # Even when the client named a specialist: the stored decision is the one published.
    assert decide_intake(message("summarizer"), stored, catalog, NOW) == Republish(STORED, LATER, 42.5)


def test_a_queued_task_past_its_deadline_expires_instead_of_being_republished(catalog: Catalog):
    assert (
        decide_intake(message(), task(TaskStatus.QUEUED, routing=STORED, deadline=PAST), catalog, NOW)
        == Expire()
    )
    assert (
        decide_intake(message(deadline=PAST), task(TaskStatus.QUEUED, routing=STORED), catalog, NOW)
        == Expire()
    )


@pytest.mark.parametrize("status", [TaskStatus.RUNNING, TaskStatus.RETRYING])
def test_a_task_a_worker_has_is_a_duplicate(catalog: Catalog, status: TaskStatus):
    stored = task(status, routing=STORED, deadline=PAST)
    assert decide_intake(message(), stored, catalog, NOW) == IgnoreDuplicate(status)


def test_a_queued_task_without_a_decision_is_a_duplicate(catalog: Catalog):
    assert decide_intake(message(), task(TaskStatus.QUEUED), catalog, NOW) == IgnoreDuplicate(
        TaskStatus.QUEUED
    )


@pytest.mark.parametrize("status", sorted(TERMINAL))
def test_a_finished_task_is_ignored(catalog: Catalog, status: TaskStatus):
    stored = task(status, routing=STORED, deadline=PAST)
    assert decide_intake(message("astrologer"), stored, catalog, NOW) == IgnoreFinished(status)


def test_an_unknown_task_is_dropped(catalog: Catalog):
    assert decide_intake(message(), None, catalog, NOW) == DropUnknown()
    assert decide_intake(message(), None, catalog, NOW, route_refused=True) == DropUnknown()


def test_a_refused_route_follows_the_store(catalog: Catalog):
    # Still pending after the store refused the decision: its deadline passed by the database's clock,
    # even when this clock says it has not yet.
    pending = task(TaskStatus.PENDING, deadline=LATER)
    assert decide_intake(message("summarizer"), pending, catalog, NOW, route_refused=True) == Expire()
    # Another delivery got there first: its decision is published, not a second one.
    queued = task(TaskStatus.QUEUED, routing=STORED)
    assert decide_intake(message(), queued, catalog, NOW, route_refused=True) == Republish(STORED, None, None)
    cancelled = task(TaskStatus.CANCELLED)
    assert decide_intake(message(), cancelled, catalog, NOW, route_refused=True) == IgnoreFinished(
        TaskStatus.CANCELLED
    )

"""What the intake handler does with a message, given the task as stored: every branch of the pure decision."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_broker_agent.intake.decisions import (
    EXPLICIT_REASON,
    Delay,
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
    not_due,
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


def message(
    requested: str | None = None, deadline: datetime | None = None, not_before: datetime | None = None
) -> IntakeMessage:
    return IntakeMessage(
        task_id=TASK_ID,
        input="Please summarize this",
        requested_specialist=requested,
        deadline=deadline,
        not_before=not_before,
    )


def task(
    status: TaskStatus,
    *,
    routing: RoutingDecision | None = None,
    deadline: datetime | None = None,
    timeout_seconds: float | None = None,
    not_before: datetime | None = None,
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
        not_before=not_before,
    )


def test_a_pending_task_is_routed(catalog: Catalog):
    assert decide_intake(message(), task(TaskStatus.PENDING), catalog, NOW) == Route("default")
    assert decide_intake(
        message(deadline=LATER), task(TaskStatus.PENDING, deadline=LATER), catalog, NOW
    ) == Route("default")


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


# --- not_before: a scheduled task goes back through the delay queues until it is due ---------------------


def ahead(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("remaining", "tier"),
    [(5, 5), (7.5, 5), (0.3, 1), (1, 1), (59.9, 30), (90, 60), (3599, 1800), (86400 * 3, 3600)],
)
def test_a_scheduled_task_not_due_waits_the_longest_tier_that_does_not_pass_its_not_before(
    catalog: Catalog, remaining: float, tier: int
):
    not_before = ahead(remaining)
    stored = task(TaskStatus.SCHEDULED, not_before=not_before)
    assert decide_intake(message(not_before=not_before), stored, catalog, NOW) == Delay(tier, not_before)
    # A named specialist changes nothing: recording waits too.
    assert decide_intake(message("summarizer", not_before=not_before), stored, catalog, NOW) == Delay(
        tier, not_before
    )


def test_the_rows_not_before_decides_when_the_message_carries_none(catalog: Catalog):
    # Re-sent by the API's sweeper from an older record, or written before scheduling existed.
    not_before = ahead(600)
    stored = task(TaskStatus.SCHEDULED, not_before=not_before)
    assert decide_intake(message(), stored, catalog, NOW) == Delay(600, not_before)
    # And the row's wins over the message's.
    assert decide_intake(message(not_before=ahead(5)), stored, catalog, NOW) == Delay(600, not_before)


def test_a_pending_task_with_a_not_before_ahead_waits_too(catalog: Catalog):
    # A dead letter of a scheduled task replayed before its time comes back pending.
    not_before = ahead(30)
    stored = task(TaskStatus.PENDING, not_before=not_before)
    assert decide_intake(message(), stored, catalog, NOW) == Delay(30, not_before)


def test_a_scheduled_task_once_due_is_routed_or_recorded(catalog: Catalog):
    stored = task(TaskStatus.SCHEDULED, not_before=PAST)
    assert decide_intake(message(not_before=PAST), stored, catalog, NOW) == Route("default")
    got = decide_intake(message("summarizer", not_before=PAST), stored, catalog, NOW)
    assert isinstance(got, Record) and got.decision.specialist == "summarizer"
    # Exactly at not_before counts as due (the store routes once not_before <= its clock).
    assert decide_intake(message(), task(TaskStatus.SCHEDULED, not_before=NOW), catalog, NOW) == Route(
        "default"
    )


def test_the_explicit_path_reads_the_task_only_when_the_message_says_not_due():
    assert not_due(message("summarizer", not_before=ahead(5)), NOW)
    assert not not_due(message("summarizer", not_before=PAST), NOW)
    assert not not_due(message("summarizer"), NOW)
    assert not_due(message(not_before=ahead(5).replace(tzinfo=None)), NOW)  # naive means UTC


def test_a_refused_explicit_record_of_a_scheduled_task_waits_instead_of_being_dropped(catalog: Catalog):
    # The explicit path records without reading the task; the store refuses a task not due by ITS clock,
    # which runs behind this one: the task must not stay scheduled forever (IgnoreDuplicate) nor fail.
    stored = task(TaskStatus.SCHEDULED, not_before=PAST)
    got = decide_intake(message("summarizer"), stored, catalog, NOW, route_refused=True)
    assert got == Delay(1, PAST)
    # Still ahead by this clock as well: the usual hop.
    later = task(TaskStatus.SCHEDULED, not_before=ahead(40))
    assert decide_intake(message("summarizer"), later, catalog, NOW, route_refused=True) == Delay(
        30, ahead(40)
    )


def test_the_database_clock_ahead_only_makes_one_short_extra_hop(catalog: Catalog):
    # This clock says 0.4 s remain while the database already calls it due: waiting one shortest tier is
    # the whole cost (the next look routes it).
    stored = task(TaskStatus.SCHEDULED, not_before=ahead(0.4))
    assert decide_intake(message(), stored, catalog, NOW) == Delay(1, ahead(0.4))
    assert decide_intake(message(), stored, catalog, ahead(1)) == Route("default")


def test_a_refusal_nearer_the_deadline_than_the_not_before_is_an_expiry(catalog: Catalog):
    # Both set: refused while this clock is past not_before means the database's clock is either behind
    # (before not_before) or ahead (past the deadline); whichever is nearer.
    near_start = task(TaskStatus.SCHEDULED, not_before=ahead(-1), deadline=ahead(600))
    assert decide_intake(message(), near_start, catalog, NOW, route_refused=True) == Delay(1, ahead(-1))
    near_end = task(TaskStatus.SCHEDULED, not_before=ahead(-600), deadline=ahead(1))
    assert decide_intake(message(), near_end, catalog, NOW, route_refused=True) == Expire()
    # Without a not_before a refusal is the deadline's, as before.
    assert decide_intake(message(), task(TaskStatus.PENDING), catalog, NOW, route_refused=True) == Expire()


def test_a_scheduled_task_past_its_deadline_expires(catalog: Catalog):
    # Its message came back later than its deadline (the API refuses deadline <= not_before, but a hop can
    # overshoot): expired, not delayed again.
    stored = task(TaskStatus.SCHEDULED, not_before=ahead(60), deadline=PAST)
    assert decide_intake(message(), stored, catalog, NOW) == Expire()


@pytest.mark.parametrize("status", [TaskStatus.CANCELLED, TaskStatus.FAILED])
def test_a_scheduled_task_cancelled_or_expired_meanwhile_stops_hopping(catalog: Catalog, status: TaskStatus):
    stored = task(status, not_before=ahead(3600))
    got = decide_intake(message(not_before=ahead(3600)), stored, catalog, NOW)
    assert got == IgnoreFinished(status)
    assert decide_intake(message("summarizer"), stored, catalog, NOW, route_refused=True) == IgnoreFinished(
        status
    )


def test_a_redelivery_of_a_parked_task_publishes_nothing(catalog: Catalog):
    """A parked task has no message on purpose: the feeder publishes it, not an intake redelivery."""
    parked = task(TaskStatus.QUEUED, routing=STORED).model_copy(update={"parked_at": NOW})
    assert decide_intake(message(), parked, catalog, NOW) == IgnoreDuplicate(TaskStatus.QUEUED)

"""The start decisions: what a delivery does with each answer of the store, from either queue."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime

import pytest

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import DeferralReason, StartOutcome, StartResult, TaskRecord
from taskyard_worker.flights import Source
from taskyard_worker.starts import (
    LEASE_POLL_SECONDS,
    Defer,
    Finish,
    HandBack,
    Park,
    Run,
    StartDecision,
    WaitForLease,
    decide_start,
    defer_while_store_unavailable,
)

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
SETTLE_AFTER = 600.0


def task_record() -> TaskRecord:
    decision = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1)
    return TaskRecord(
        id=uuid.uuid4(), status=TaskStatus.RUNNING, input="x", metadata={}, requested_specialist=None,
        specialist="general", routing=decision, attempts=1, result=None, error=None, usage=Usage(),
        created_at=T0, published_at=T0, routed_at=T0, started_at=T0, finished_at=None, updated_at=T0,
    )  # fmt: skip


RECORD = task_record()
RESULTS = {
    StartOutcome.STARTED: StartResult(StartOutcome.STARTED, RECORD),
    StartOutcome.FINISHED: StartResult(StartOutcome.FINISHED),
    StartOutcome.LEASED: StartResult(StartOutcome.LEASED, lease_remaining_seconds=12.5),
    StartOutcome.EXPIRED: StartResult(StartOutcome.EXPIRED),
    StartOutcome.CANCELLED: StartResult(StartOutcome.CANCELLED),
    StartOutcome.NOT_ROUTED: StartResult(StartOutcome.NOT_ROUTED),
    StartOutcome.UNKNOWN: StartResult(StartOutcome.UNKNOWN),
    StartOutcome.WAITING: StartResult(StartOutcome.WAITING),
    StartOutcome.STALE: StartResult(StartOutcome.STALE),
    StartOutcome.NOT_DUE: StartResult(StartOutcome.NOT_DUE, retry_due_in_seconds=4.5),
    StartOutcome.DEFERRED: StartResult(
        StartOutcome.DEFERRED, reason=DeferralReason.TENANT_MAX_RUNNING, deferrals=1
    ),
}
AT_CAP = Defer(1, "its tenant runs its max_running tasks already", "tenant_max_running")
FINISH_EXPIRED = Finish(
    "expired", TaskStatus.FAILED, "its deadline passed before it started; failed as expired"
)
FINISH_CANCELLED = Finish("cancelled", TaskStatus.CANCELLED, "cancelled before it started")
FINISH_DUPLICATE = Finish("duplicate", None, "finished; acknowledging without running")
FINISH_UNKNOWN = Finish("unknown", None, "unknown; acknowledging without running")
FINISH_WAITING = Finish("waiting", None, "it waits for its delegated tasks; acknowledging without running")
FINISH_STALE = Finish("stale", None, "a stale message of an earlier attempt; acknowledging without running")
DEFER_NOT_DUE = Defer(4.5, "its retry's backoff is not over yet", "not_due")
# The first answer to a delivery, from each queue, the worker running normally.
EXPECTED: dict[tuple[StartOutcome, Source], StartDecision] = {
    (StartOutcome.STARTED, Source.MAIN): Run(RECORD),
    (StartOutcome.STARTED, Source.QUARANTINE): Run(RECORD),
    (StartOutcome.FINISHED, Source.MAIN): FINISH_DUPLICATE,
    (StartOutcome.FINISHED, Source.QUARANTINE): FINISH_DUPLICATE,
    (StartOutcome.LEASED, Source.MAIN): Defer(13.5, "another worker holds its lease", "leased"),
    (StartOutcome.LEASED, Source.QUARANTINE): WaitForLease(LEASE_POLL_SECONDS),
    (StartOutcome.EXPIRED, Source.MAIN): FINISH_EXPIRED,
    (StartOutcome.EXPIRED, Source.QUARANTINE): FINISH_EXPIRED,
    (StartOutcome.CANCELLED, Source.MAIN): FINISH_CANCELLED,
    (StartOutcome.CANCELLED, Source.QUARANTINE): FINISH_CANCELLED,
    (StartOutcome.NOT_ROUTED, Source.MAIN): Defer(1, "its routing is not committed yet", "not_routed"),
    (StartOutcome.NOT_ROUTED, Source.QUARANTINE): Defer(1, "its routing is not committed yet", "not_routed"),
    (StartOutcome.UNKNOWN, Source.MAIN): FINISH_UNKNOWN,
    (StartOutcome.UNKNOWN, Source.QUARANTINE): FINISH_UNKNOWN,
    (StartOutcome.WAITING, Source.MAIN): FINISH_WAITING,
    (StartOutcome.WAITING, Source.QUARANTINE): FINISH_WAITING,
    (StartOutcome.STALE, Source.MAIN): FINISH_STALE,
    (StartOutcome.STALE, Source.QUARANTINE): FINISH_STALE,
    (StartOutcome.NOT_DUE, Source.MAIN): DEFER_NOT_DUE,
    (StartOutcome.NOT_DUE, Source.QUARANTINE): DEFER_NOT_DUE,
    (StartOutcome.DEFERRED, Source.MAIN): AT_CAP,
    (StartOutcome.DEFERRED, Source.QUARANTINE): AT_CAP,
}


def test_every_outcome_and_source_is_covered() -> None:
    assert set(EXPECTED) == {(outcome, source) for outcome in StartOutcome for source in Source}


@pytest.mark.parametrize(("outcome", "source"), list(EXPECTED), ids=lambda v: str(v))
def test_the_first_answer(outcome: StartOutcome, source: Source) -> None:
    decision = decide_start(RESULTS[outcome], source, settle_after_seconds=SETTLE_AFTER)
    assert decision == EXPECTED[outcome, source]


@pytest.mark.parametrize(("outcome", "source"), list(EXPECTED), ids=lambda v: str(v))
def test_stopping_changes_only_a_wait_in_quarantine_into_a_hand_back(
    outcome: StartOutcome, source: Source
) -> None:
    decision = decide_start(RESULTS[outcome], source, settle_after_seconds=SETTLE_AFTER, stopping=True)
    expected = EXPECTED[outcome, source]
    assert decision == (HandBack() if isinstance(expected, WaitForLease) else expected)


def test_a_lease_about_to_run_out_is_polled_just_after_it_ends() -> None:
    result = StartResult(StartOutcome.LEASED, lease_remaining_seconds=0.2)
    decision = decide_start(result, Source.QUARANTINE, settle_after_seconds=SETTLE_AFTER, waited_seconds=3)
    assert decision == WaitForLease(pytest.approx(0.25))


def test_a_quarantined_message_keeps_waiting_until_settle_after() -> None:
    result = RESULTS[StartOutcome.LEASED]
    waiting = decide_start(result, Source.QUARANTINE, settle_after_seconds=60, waited_seconds=60)
    assert isinstance(waiting, WaitForLease)
    # A holder that keeps its lease that long is alive: go round the delay queues like the main queue does.
    done_waiting = decide_start(result, Source.QUARANTINE, settle_after_seconds=60, waited_seconds=60.5)
    assert done_waiting == Defer(13.5, "another worker holds its lease", "leased")
    stopping = decide_start(
        result, Source.QUARANTINE, settle_after_seconds=60, waited_seconds=60.5, stopping=True
    )
    assert stopping == done_waiting


def test_the_main_queue_never_waits_for_a_lease() -> None:
    result = RESULTS[StartOutcome.LEASED]
    for waited in (None, 0.0, 1000.0):
        decision = decide_start(result, Source.MAIN, settle_after_seconds=60, waited_seconds=waited)
        assert isinstance(decision, Defer)


def test_started_without_a_record_is_refused() -> None:
    with pytest.raises(ValueError, match="without returning its record"):
        decide_start(StartResult(StartOutcome.STARTED), Source.MAIN, settle_after_seconds=SETTLE_AFTER)


def test_an_unavailable_store_defers_by_the_specialists_backoff() -> None:
    spec = SpecialistSpec(
        name="general", description="d", instructions="i", backoff_base_seconds=2, backoff_max_seconds=10
    )
    delays = [
        defer_while_store_unavailable(attempt, spec, random.Random(7)).delay_seconds for attempt in (1, 3, 9)
    ]
    assert 1 <= delays[0] <= 2 and 4 <= delays[1] <= 8 and 5 <= delays[2] <= 10
    assert defer_while_store_unavailable(1, spec).reason == "the store is unavailable"


@pytest.mark.parametrize("reason", list(DeferralReason))
def test_a_refusal_the_store_parked_is_acked_not_sent_round(reason: DeferralReason) -> None:
    """A queued task refused (its tenant's cap or fair share) is parked by the store: the delivery is acked
    and nothing is published (the broker agent's feeder publishes it when its tenant has room); a retrying
    one (not parked) still goes round a delay queue."""
    parked = StartResult(StartOutcome.DEFERRED, reason=reason, deferrals=3, parked=True)
    decision = decide_start(parked, Source.MAIN, settle_after_seconds=600, backlog=2_000)
    assert decision == Park(decision.reason, reason.value) and isinstance(decision, Park)
    not_parked = StartResult(StartOutcome.DEFERRED, reason=reason, deferrals=1)
    assert isinstance(decide_start(not_parked, Source.MAIN, settle_after_seconds=600), Defer)

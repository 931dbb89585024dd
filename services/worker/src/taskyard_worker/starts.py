"""What a delivery does once the store answered its start: run, defer, finish, wait, or hand back.

Pure functions over the store's answer, the queue the delivery came from and how long it has waited, so
every rule is unit-tested without a broker or a database (like ``retries.py``). The work handler asks the
store, calls ``decide_start`` and carries the decision out.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.retry import backoff_seconds
from taskyard_common.store import DeferralReason, StartOutcome, StartResult, TaskRecord
from taskyard_worker.fair_share import FAIR_SHARE_DEFER_SECONDS, spread_seconds
from taskyard_worker.flights import Source

# A quarantined message whose task another worker holds waits in place, polling the store this often.
LEASE_POLL_SECONDS = 1.0
# A task whose tenant runs its max_running already comes back after 1 s, then 2 s, then every 5 s: soon while
# the refusals are few, less often for a long backlog, whose every round costs a delivery per message.
CAP_DEFER_MAX_SECONDS = 5.0
_REFUSED = {
    DeferralReason.TENANT_MAX_RUNNING: "its tenant runs its max_running tasks already",
    DeferralReason.FAIR_SHARE: "its tenant holds its fair share of this worker's slots",
}


@dataclass(frozen=True)
class Run:
    """This worker holds the lease: run the attempt."""

    record: TaskRecord


@dataclass(frozen=True)
class Defer:
    """Send the same message (same attempt: not charged) through a delay tier, then ack."""

    delay_seconds: float
    reason: str  # why, for the log line
    label: str  # why, for taskyard_task_start_deferrals_total (metrics.START_DEFERRAL_REASONS)


@dataclass(frozen=True)
class Park:
    """The store parked the refused task (it is queued: ``store/parking.py``): ack, publish nothing; the
    broker agent's feeder publishes it again when its tenant has room. Not charged."""

    reason: str  # why, for the log line
    label: str  # why, for taskyard_task_start_deferrals_total


@dataclass(frozen=True)
class Finish:
    """Nothing to run: ack. ``status`` is set when the store finished the task just now (counted in
    ``taskyard_tasks_finished_total``), not when it was finished earlier."""

    outcome: str  # the label of the worker's outcome counter
    status: TaskStatus | None
    note: str  # what happened, for the log line


@dataclass(frozen=True)
class WaitForLease:
    """Quarantine only: wait here for the other worker's lease, then ask the store again."""

    poll_seconds: float


@dataclass(frozen=True)
class HandBack:
    """Shutdown while waiting in quarantine: republish the message to quarantine, then ack."""


# What the handler carries out; ``WaitForLease`` only makes it ask the store again.
StartAction = Run | Defer | Park | Finish | HandBack
StartDecision = StartAction | WaitForLease


def decide_start(
    result: StartResult,
    source: Source,
    *,
    settle_after_seconds: float,
    waited_seconds: float | None = None,
    stopping: bool = False,
    backlog: int = 0,
) -> StartDecision:
    """The decision for ``result``, the store's answer to this delivery's start. ``waited_seconds``: how
    long it has waited in quarantine for another worker's lease (None: not yet); ``stopping``: the worker
    is handing its deliveries back; ``backlog``: the task's tenant's waiting tasks (for a refusal's delay)."""
    outcome = result.outcome
    if outcome is StartOutcome.STARTED:
        if result.record is None:
            raise ValueError("the store started the task without returning its record")
        return Run(result.record)
    if outcome is StartOutcome.LEASED:
        return _leased(result, source, settle_after_seconds, waited_seconds, stopping)
    if outcome is StartOutcome.DEFERRED:
        return refused(result, backlog)
    if outcome is StartOutcome.NOT_ROUTED:
        return Defer(1, "its routing is not committed yet", "not_routed")
    if outcome is StartOutcome.EXPIRED:
        return Finish(
            "expired", TaskStatus.FAILED, "its deadline passed before it started; failed as expired"
        )
    if outcome is StartOutcome.CANCELLED:
        return Finish("cancelled", TaskStatus.CANCELLED, "cancelled before it started")
    if outcome is StartOutcome.NOT_DUE:
        # The next attempt's own message, early (the clocks of the worker that scheduled the retry and of
        # the database differ): it starts once the backoff is over. Not charged.
        return Defer(result.retry_due_in_seconds, "its retry's backoff is not over yet", "not_due")
    if outcome is StartOutcome.STALE:
        # A copy of an earlier attempt's message (its ack was lost after the retry was scheduled): the
        # retry's own message starts the next attempt, so running this one would fork a second chain.
        return Finish("stale", None, "a stale message of an earlier attempt; acknowledging without running")
    if outcome is StartOutcome.WAITING:
        # A stray copy of a parent's message: the parent is announced again when its children are done.
        return Finish("waiting", None, "it waits for its delegated tasks; acknowledging without running")
    # FINISHED (a redelivery after a lost ack, a duplicate) or UNKNOWN.
    label = "duplicate" if outcome is StartOutcome.FINISHED else "unknown"
    return Finish(label, None, f"{outcome}; acknowledging without running")


def _leased(
    result: StartResult,
    source: Source,
    settle_after_seconds: float,
    waited_seconds: float | None,
    stopping: bool,
) -> StartDecision:
    # In quarantine, a message whose task is leased waits in place instead of going round again: only the
    # prefetch-1 consumer waits, and the broker keeps counting its deliveries (a poison message that keeps
    # killing workers must reach the delivery limit). A holder that keeps its lease past
    # settle_after_seconds is alive and well, though: the message is then deferred like one from the main
    # queue, before the broker's consumer timeout closes the channel under it.
    waited_too_long = waited_seconds is not None and waited_seconds > settle_after_seconds
    if source is Source.QUARANTINE and not waited_too_long:
        if stopping:
            return HandBack()
        return WaitForLease(min(result.lease_remaining_seconds + 0.05, LEASE_POLL_SECONDS))
    # Another worker runs it: come back once its lease may have run out. Not charged.
    return Defer(result.lease_remaining_seconds + 1, "another worker holds its lease", "leased")


def defer_while_store_unavailable(
    attempt: int, spec: SpecialistSpec, rng: random.Random | None = None
) -> Defer:
    """The store could not be asked: nothing started, so send the message round again after the
    specialist's backoff rather than reject it (a reject would count a delivery toward the limit)."""
    delay = backoff_seconds(attempt, spec.backoff_base_seconds, spec.backoff_max_seconds, rng)
    return Defer(delay, "the store is unavailable", "store_unavailable")


def cap_deferral_seconds(deferrals: int) -> float:
    """The wait before the ``deferrals``-th refusal in a row (1-based) for the tenant's cap is retried."""
    return min(CAP_DEFER_MAX_SECONDS, 2.0 ** max(0, deferrals - 1))


def refused(result: StartResult, backlog: int = 0, rng: random.Random | None = None) -> Park | Defer:
    """A refused start (``result`` DEFERRED): parked by the store (a queued task), or a retrying task's
    message sent round a delay queue (``defer_refused``)."""
    reason = result.reason or DeferralReason.TENANT_MAX_RUNNING
    if result.parked:
        return Park(_REFUSED[reason], reason.value)
    return defer_refused(reason, result.deferrals, backlog, rng)


def defer_refused(
    reason: DeferralReason, deferrals: int, backlog: int = 0, rng: random.Random | None = None
) -> Defer:
    """The store (or the fair share) refused the start: nothing was charged, send it round again; the
    longer the tenant's ``backlog``, the longer it stays away (``fair_share.spread_seconds``)."""
    if reason is DeferralReason.FAIR_SHARE:
        delay = FAIR_SHARE_DEFER_SECONDS
    else:
        delay = cap_deferral_seconds(deferrals)
    return Defer(max(delay, spread_seconds(backlog, rng)), _REFUSED[reason], reason.value)

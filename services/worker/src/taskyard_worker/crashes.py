"""What a worker does with a message that came back from a crash: count the crash, and isolate the task only
once it is a real suspect (``crash_moves.py`` carries the decisions out).

A worker that dies returns every unacked message on its channels (redelivered), the poison one among its
innocent neighbours. Running all of them one at a time (the old quarantine) makes every neighbour pay for
the poison; running them all again together lets the poison kill them again. Two facts tell them apart:

- many never started on the dead worker (a prefetch holds twice the concurrency). A redelivered message
  whose task is not ``running`` counts no crash and goes round again at once, as a fresh copy (so that the
  main queue's delivery limit does not add up the returns of a healthy message that waited in the
  prefetch of several dying workers); a header counts such returns in a row, and one that comes back
  unstarted more often than the delivery limit (it would kill its worker before it starts) is a suspect;
- a poison message crashes every worker that runs it. So the crashes a message was in flight for are
  counted, in a header that each re-publication carries on. After its first crash it goes back to the
  main queue through a delay tier (the dead worker's lease must run out first) and runs among the others,
  concurrently. After ``SUSPECT_AFTER_CRASHES`` it is a suspect: it goes round a delay tier of a lease,
  then to the quarantine queue, where it runs alone at once; a crash there sends it round again.

Under a supervisor whose quarantine children run nothing but one quarantine message each
(``proven_poison``), a quarantine redelivery whose child is known dead (its supervisor ended the task's
lease, which then reads the epoch) crashed that child alone: proven poison, dead-lettered at once (rejected: reason ``rejected``) instead of
run again. A poison message then costs two crashes: one among the healthy tasks, one alone in quarantine.

A poison message therefore reaches the quarantine after two deliveries, an innocent one only when it was
in flight on the same worker at both of the poison's runs; the messages of one crash draw one of the first
``SPREAD_TIERS`` delay tiers that last a lease, so that they do not all come back beside the poison. Past
``crash_budget`` crashes a quarantine delivery is not run again but rejected with requeue, which RabbitMQ
counts on every version, until the quarantine queue's delivery limit dead-letters it (reason
``delivery_limit``). Every move is immediate (publish, then ack): a redelivered message held unacked would
count another delivery toward its queue's limit if this worker died too.

Pure functions, unit-tested without a broker (like ``starts.py``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store.records import LEASE_ENDED_BY_SUPERVISOR
from taskyard_common.topology import DELAY_TIERS

# The AMQP header with the number of crashes the message was in flight for (absent: none).
CRASHES_HEADER = "taskyard-crashes"
# In flight for this many crashes: a suspect, run alone in the quarantine queue.
SUSPECT_AFTER_CRASHES = 2
# The same under a supervisor (``supervisor.py``): its quarantine child runs nothing else, so a suspect waits
# there only behind other suspects, and a poison message kills no healthy task there; isolating every task
# in flight at the first crash costs them less than a second crash among the healthy ones.
SUSPECT_AFTER_CRASHES_SUPERVISED = 1
# The AMQP header with how often in a row the message came back without its task having started.
UNSTARTED_HEADER = "taskyard-unstarted-returns"


def _count(headers: Mapping[str, object] | None, name: str) -> int:
    raw = (headers or {}).get(name)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else 0


def crashes_of(headers: Mapping[str, object] | None, *, redelivered: bool) -> int:
    """The crashes this delivery's message was in flight for: its header (a republished message carries the
    count) plus one when the broker redelivers it (its channel died with it unacked). Anything but a
    non-negative integer in the header counts as none: a header never stops a task."""
    return _count(headers, CRASHES_HEADER) + (1 if redelivered else 0)


def unstarted_returns(headers: Mapping[str, object] | None) -> int:
    """How often in a row the message came back before, its task not started (this return not included)."""
    return _count(headers, UNSTARTED_HEADER)


def unstarted_too_often(returns: int, delivery_limit: int) -> bool:
    """Whether a message that came back ``returns`` times in a row, its task never started, is a suspect:
    past the delivery limit, as the broker would judge the same copy."""
    return returns > delivery_limit


def started_before(status: TaskStatus | None) -> bool:
    """Whether a redelivered message's task (its status now; None: not found) was started, by the worker
    that died or by another one: only then was it in flight for the crash in the sense that counts."""
    return status is TaskStatus.RUNNING


def crash_headers(crashes: int, unstarted: int = 0) -> dict[str, int] | None:
    """The headers a re-publication of the message carries (None: nothing to carry). ``unstarted`` only
    from a return without a start: a delivery that reached its start has shown it does not kill before it."""
    headers = {CRASHES_HEADER: crashes} if crashes > 0 else {}
    if unstarted > 0:
        headers[UNSTARTED_HEADER] = unstarted
    return headers or None


# How many delay tiers (the shortest ones that last at least a lease) a crashed message's re-run draws from.
SPREAD_TIERS = 2


@dataclass(frozen=True)
class RunAgain:
    """A bystander until proven otherwise: republished at once, the crash counted, to come back to the main
    queue after ``delay_seconds`` (a delay tier; 0: straight back)."""

    delay_seconds: int


@dataclass(frozen=True)
class Isolate:
    """A suspect: moved to the quarantine queue, to run alone until it completes or is dead-lettered; after
    ``delay_seconds`` round a delay tier first (0: at once)."""

    delay_seconds: float = 0


def lease_left(expires_at: datetime | None, now: datetime) -> float | None:
    """Seconds until the task's lease runs out (<= 0: over; None: it holds none). ``now`` is this host's
    clock: a skew only picks the other wait, and a start that finds the lease still held waits it out."""
    return None if expires_at is None else (expires_at - now).total_seconds()


def lease_wait(left: float | None, lease_seconds: float, *, supervised: bool) -> float | None:
    """How long a crashed message must stay away for the dead worker's lease: 0 when it is over already (a
    supervisor ended it, ``supervisor.py``); the shortest delay tier when a supervisor will end it within a
    moment (the start defers it again if not); None when only its running out ends it (a lease's wait)."""
    if left is not None and left <= 0:
        return 0
    if supervised:
        return DELAY_TIERS[0]
    return None


def suspect_after(*, supervised: bool) -> int:
    """The crashes in flight that make a message a suspect."""
    return SUSPECT_AFTER_CRASHES_SUPERVISED if supervised else SUSPECT_AFTER_CRASHES


def after_crash(
    crashes: int,
    lease_seconds: float,
    rng: random.Random | None = None,
    *,
    lease_left: float | None = None,
    supervised: bool = False,
) -> RunAgain | Isolate:
    """The decision for a redelivered main-queue message that was in flight for ``crashes`` crashes (≥ 1);
    ``lease_left``: the dead worker's lease on its task (``lease_left()``); ``supervised``: workers run under
    a supervisor, which ends a dead child's leases at once."""
    wait = lease_wait(lease_left, lease_seconds, supervised=supervised)
    if crashes >= suspect_after(supervised=supervised):
        # Under a supervisor straight to quarantine: a lease the supervisor has not ended yet is waited for
        # there, in place, for a moment (``starts.WaitForLease``).
        return Isolate(0 if supervised else lease_seconds if wait is None else wait)
    if wait is not None:
        return RunAgain(int(wait))
    # Back once the dead worker's lease can have run out (before, it would only be deferred again).
    tiers = [tier for tier in DELAY_TIERS if tier >= lease_seconds][:SPREAD_TIERS] or [DELAY_TIERS[-1]]
    return RunAgain((rng or random).choice(tiers))


def quarantine_wait(crashes: int, lease_seconds: float, *, supervised: bool) -> float:
    """How long a message that crashed in quarantine (``crashes`` in all) stays away before it runs there
    again: a lease, for the dead consumer's lease to run out. Under a supervisor, which ends that lease at
    once, twice as long for each crash in quarantine: it ran alone there, so it is all but proven poison,
    each of its runs costs a quarantine child's restart, and the suspects behind it, healthy most of them,
    should not wait for those; its remaining runs (the delivery limit's) can wait."""
    if not supervised:
        return lease_seconds
    in_quarantine = max(1, crashes - suspect_after(supervised=True))
    return lease_seconds * 2.0**in_quarantine


def crash_budget(delivery_limit: int, *, supervised: bool = False) -> int:
    """The most crashes a message may be in flight for: those that make it a suspect, then as many runs in
    quarantine as its delivery limit lets a message be delivered (``limit + 1``)."""
    return suspect_after(supervised=supervised) + delivery_limit + 1


def crashed_too_often(crashes: int, delivery_limit: int, *, supervised: bool = False) -> bool:
    """Whether a message that was in flight for ``crashes`` crashes is past its budget: it is then not run
    again but rejected until its queue's delivery limit dead-letters it."""
    return crashes >= crash_budget(delivery_limit, supervised=supervised)


# Under a supervisor with quarantine children, how long a quarantine redelivery waits for the proof that its
# child died (the supervisor ends the dead child's leases as soon as it reaps it, a fraction of a second; the
# redelivery can come first), and how often it asks the store meanwhile.
DEATH_PROOF_SECONDS = 3.0
DEATH_PROOF_POLL_SECONDS = 0.1


def quarantine_isolated(*, supervised: bool, quarantine_children: int, job_mode: bool) -> bool:
    """Whether every quarantine consumer is a quarantine child of a supervisor (``supervision.child_roles``):
    prefetch 1 and no other queue, so whatever crashed it was the one message it ran. Every worker of a
    specialist is taken to run with the same settings (as ``supervised`` everywhere here)."""
    return supervised and quarantine_children > 0 and not job_mode


def proven_poison(*, isolated: bool, lease_expires_at: datetime | None) -> bool:
    """Whether a quarantine redelivery crashed its consumer alone: the consumers are ``isolated``
    (``quarantine_isolated``) and its task's lease was ended by the supervisor of a dead child
    (``LEASE_ENDED_BY_SUPERVISOR``). A lease still held (the consumer lives and only its channel closed), one
    that ran out (a whole pod died and nobody ended it) or none proves nothing: the message waits and runs
    again as before (``quarantine_wait``)."""
    return isolated and lease_expires_at == LEASE_ENDED_BY_SUPERVISOR

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

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.topology import DELAY_TIERS

# The AMQP header with the number of crashes the message was in flight for (absent: none).
CRASHES_HEADER = "taskyard-crashes"
# In flight for this many crashes: a suspect, run alone in the quarantine queue.
SUSPECT_AFTER_CRASHES = 2
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
    queue after ``delay_seconds`` (a delay tier)."""

    delay_seconds: int


@dataclass(frozen=True)
class Isolate:
    """A suspect: moved to the quarantine queue, to run alone until it completes or is dead-lettered."""


def after_crash(crashes: int, lease_seconds: float, rng: random.Random | None = None) -> RunAgain | Isolate:
    """The decision for a redelivered main-queue message that was in flight for ``crashes`` crashes (≥ 1)."""
    if crashes >= SUSPECT_AFTER_CRASHES:
        return Isolate()
    # Back once the dead worker's lease can have run out (before, it would only be deferred again).
    tiers = [tier for tier in DELAY_TIERS if tier >= lease_seconds][:SPREAD_TIERS] or [DELAY_TIERS[-1]]
    return RunAgain((rng or random).choice(tiers))


def crash_budget(delivery_limit: int) -> int:
    """The most crashes a message may be in flight for: two to become a suspect, then as many runs in
    quarantine as its delivery limit lets a message be delivered (``limit + 1``)."""
    return SUSPECT_AFTER_CRASHES + delivery_limit + 1


def crashed_too_often(crashes: int, delivery_limit: int) -> bool:
    """Whether a message that was in flight for ``crashes`` crashes is past its budget: it is then not run
    again but rejected until its queue's delivery limit dead-letters it."""
    return crashes >= crash_budget(delivery_limit)

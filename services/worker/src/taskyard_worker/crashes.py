"""What a worker does with a message that came back from a crash: count the crash, and isolate the task only
once it is a real suspect.

A worker that dies returns every unacked message on its channels (redelivered), the poison one among its
innocent neighbours: nothing tells them apart. Running all of them one at a time (the quarantine's prefetch
1) makes every neighbour pay for the poison; running them all again together makes the poison kill them
again. So the crashes a message was in flight for are counted, in a header of the message that each
re-publication carries on:

- after its first crash a message goes back to its main queue, through a delay tier (the dead worker's lease
  must run out before it can start anyway), and runs among the others, concurrently;
- once it was in flight for ``SUSPECT_AFTER_CRASHES`` crashes it is a suspect: held for a lease (so that it
  does not wait in quarantine for the dead worker's lease, where a crash of its worker would count), then
  moved to the quarantine queue, where it runs alone;
- a message that crashed ``delivery limit + 2`` workers (the most the old design allowed: one crash from the
  main queue, then the quarantine queue's limit) is not run again: it is rejected with requeue, which every
  RabbitMQ version counts toward the delivery limit, until the quarantine queue dead-letters it (reason
  ``delivery_limit``). The poison message therefore kills no more workers than before.

A poison message crashes every worker that runs it, so it reaches the quarantine after two deliveries; an
innocent one only when it was in flight on the same worker at both of the poison's runs. That is what the
first re-run must make unlikely: the messages of one crash come back together, and would all run beside the
poison again. So each is held a random while (up to ``SPREAD_MAX_SECONDS``, at most a lease) before it is
republished to a delay tier: the tier adds the same delay to all, the holds spread their returns. Holding the
redelivered copy costs nothing if this worker dies meanwhile: that copy's count is its header plus one
again, since only a republished copy carries a higher count.

Pure functions, unit-tested without a broker (like ``starts.py``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

# The AMQP header with the number of crashes the message was in flight for (absent: none).
CRASHES_HEADER = "taskyard-crashes"
# In flight for this many crashes: a suspect, run alone in the quarantine queue.
SUSPECT_AFTER_CRASHES = 2


def crashes_of(headers: Mapping[str, object] | None, *, redelivered: bool) -> int:
    """The crashes this delivery's message was in flight for: its header (a republished message carries the
    count) plus one when the broker redelivers it (its channel died with it unacked). Anything but a
    non-negative integer in the header counts as none: a header never stops a task."""
    raw = (headers or {}).get(CRASHES_HEADER)
    counted = raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else 0
    return counted + (1 if redelivered else 0)


def crash_headers(crashes: int) -> dict[str, int] | None:
    """The headers a re-publication of the message carries (None: nothing to carry)."""
    return {CRASHES_HEADER: crashes} if crashes > 0 else None


# The longest hold before a crashed message is republished (spreads one crash's messages over this long).
SPREAD_MAX_SECONDS = 5.0


@dataclass(frozen=True)
class RunAgain:
    """A bystander until proven otherwise: held ``hold_seconds``, then republished, the crash counted, to come
    back to the main queue after ``delay_seconds`` (a delay tier)."""

    hold_seconds: float
    delay_seconds: float


@dataclass(frozen=True)
class Isolate:
    """A suspect: held ``hold_seconds`` (the dead worker's lease), then moved to the quarantine queue, to run
    alone until it completes or is dead-lettered."""

    hold_seconds: float


def after_crash(crashes: int, lease_seconds: float, rng: random.Random | None = None) -> RunAgain | Isolate:
    """The decision for a redelivered main-queue message that was in flight for ``crashes`` crashes (≥ 1)."""
    if crashes >= SUSPECT_AFTER_CRASHES:
        return Isolate(hold_seconds=lease_seconds)
    # Back once the dead worker's lease can have run out (before, it would only be deferred again).
    hold = (rng or random).uniform(0.0, min(lease_seconds, SPREAD_MAX_SECONDS))
    return RunAgain(hold_seconds=hold, delay_seconds=lease_seconds)


def crashed_too_often(crashes: int, delivery_limit: int) -> bool:
    """Whether a message that was in flight for ``crashes`` crashes is past its budget (see above): it is
    then not run again but rejected until its queue's delivery limit dead-letters it."""
    return crashes >= delivery_limit + SUSPECT_AFTER_CRASHES

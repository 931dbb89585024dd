"""A way back for a work message the broker dead-lettered only because the workers holding it died.

A work queue's delivery limit counts every delivery, and a worker that dies hands back every message in its
prefetch, started or not. A worker reads such a return and sends it round again as a fresh copy, so that the
limit does not add up a healthy message's returns (``crashes.py`` in the worker); but when workers die
faster than they read their prefetch (a supervisor forks a killed child again within a second, and a poison
task may kill the next one as fast), a message can be handed back as often as the limit allows without any
worker having read it, and the broker dead-letters it as ``delivery_limit``. Its task never started: failing
it would lose healthy work to its neighbours' crashes.

The same holds for a task a supervised worker child started before it died: its supervisor ended the lease
(``LEASE_ENDED_BY_SUPERVISOR``), and the broker's redelivery can die in the prefetch of the children forked
after it, unread, until the limit. The crash that started it was seen and ended; the next worker that reads
the message counts it (``crashes.py``), so a poison message still reaches the quarantine.

So a ``delivery_limit`` dead letter whose task is ``queued`` or ``retrying`` (no worker marked it running
since), or ``running`` under a lease a supervisor ended, goes back to its specialist's work queue as a fresh
copy instead, with the worker's crash headers carried on and a count of these returns in
``RETURNS_HEADER``; after ``MAX_RETURNS`` of them it is dead-lettered as usual, so a message that kills
every worker before its task starts still ends in the dead-letter queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store.records import LEASE_ENDED_BY_SUPERVISOR

# The AMQP header with how often the dead-letter consumer sent the message back to its work queue.
RETURNS_HEADER = "taskyard-dead-letter-returns"
MAX_RETURNS = 3
# The headers a return carries on: the worker's counts (crashes, unstarted returns) and this one's.
_CARRIED_PREFIX = "taskyard-"


def returns_of(headers: Mapping[str, object] | None) -> int:
    raw = (headers or {}).get(RETURNS_HEADER)
    return raw if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0 else 0


def may_return(
    reason: str, status: TaskStatus | None, returns: int, lease_expires_at: datetime | None = None
) -> bool:
    """Whether a dead letter goes back to its work queue: redelivered past the limit, its task not started
    since it was queued, or started by a worker child whose death its supervisor saw (the lease it ended),
    and fewer than ``MAX_RETURNS`` returns before. A ``running`` task whose lease ran out or is still held
    is not returned: nobody saw that worker die (a poison message may have killed it each time)."""
    if reason != "delivery_limit" or returns >= MAX_RETURNS:
        return False
    if status in (TaskStatus.QUEUED, TaskStatus.RETRYING):
        return True
    return status is TaskStatus.RUNNING and lease_expires_at == LEASE_ENDED_BY_SUPERVISOR


def may_return_some(reason: str, returns: int) -> bool:
    """Whether a dead letter could go back at all, whatever its task's state (no store read otherwise)."""
    return may_return(reason, TaskStatus.QUEUED, returns)


def carried_headers(headers: Mapping[str, object] | None) -> dict[str, int]:
    """The worker's integer headers of the dead letter, and the returns count one higher."""
    carried = {
        name: value
        for name, value in (headers or {}).items()
        if name.startswith(_CARRIED_PREFIX) and isinstance(value, int) and not isinstance(value, bool)
    }
    carried[RETURNS_HEADER] = returns_of(headers) + 1
    return carried

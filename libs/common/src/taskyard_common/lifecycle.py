"""The task state machine: every status, the sets the code asks about, and every transition, defined once.

A new status means one enum member here, its place in the sets, one migration (the table's CHECK constraint)
and the transitions into and out of it below; the store's SQL is generated from these sets
(``store/transitions.py``), and docs/architecture.md shows ``TRANSITIONS`` as a table (a unit test keeps the
two in step).

Every transition is one conditional statement in the store (``... WHERE status IN (<sources>)``), so a
duplicate or late message can never move a task backwards or finish it twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class TaskStatus(StrEnum):
    SCHEDULED = (
        "scheduled"  # accepted with a not_before still ahead; its intake message waits in a delay queue
    )
    PENDING = "pending"  # accepted, awaiting routing
    QUEUED = "queued"  # routed to a specialist queue
    RUNNING = "running"  # a worker holds a lease on it
    RETRYING = "retrying"  # a transient failure; the next attempt waits in a delay queue
    WAITING = "waiting"  # it delegated work to child tasks and waits for them, holding nothing
    COMPLETED = "completed"
    FAILED = "failed"
    DEAD_LETTERED = "dead_lettered"  # the broker gave up on its message (see the dead-letter API)
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


S = TaskStatus

# Finished for good: no transition leaves these (but a dead letter's replay).
TERMINAL = frozenset({S.COMPLETED, S.FAILED, S.DEAD_LETTERED, S.CANCELLED})
NON_TERMINAL = frozenset(set(S) - TERMINAL)
# What the broker agent may route (a scheduled task once its not_before has passed).
ROUTABLE = frozenset({S.SCHEDULED, S.PENDING})
# What a worker may start without looking further (a running task with a dead lease takes the slow path).
STARTABLE = frozenset({S.QUEUED, S.RETRYING})
# Not started yet (expire applies to these).
NOT_STARTED = frozenset({S.SCHEDULED, S.PENDING, S.QUEUED, S.RETRYING})
# Holding no worker: a cancel finishes these at once; a running one is asked to stop.
CANCELLABLE_AT_ONCE = NOT_STARTED | {S.WAITING}
# Waiting for a queue's consumer (the oldest-waiting metric); a retrying task once its delay is over.
WAITING = frozenset({S.PENDING, S.QUEUED})
# What the intake handler may still fail after routing attempts ran out: a worker has not started it.
ROUTING_UNFINISHED = frozenset({S.SCHEDULED, S.PENDING, S.QUEUED})


def sql_in(statuses: Iterable[TaskStatus]) -> str:
    """``('a', 'b')`` for ``status IN ...``: the values are enum members, never user input."""
    ordered = [s for s in TaskStatus if s in set(statuses)]
    return "(" + ", ".join(f"'{s.value}'" for s in ordered) + ")"


@dataclass(frozen=True)
class Transition:
    """One way a task's status changes: from which statuses, to which, and who does it."""

    name: str  # the store method that performs it (unless ``part_of`` says whose statement does)
    sources: frozenset[TaskStatus]
    targets: tuple[TaskStatus, ...]
    by: str  # the component that calls it
    when: str  # what happened
    # Not a method of its own: part of the statement of another task's transition.
    part_of: str | None = None


def _t(
    name: str,
    sources: Iterable[TaskStatus],
    targets: Iterable[TaskStatus],
    by: str,
    when: str,
    part_of: str | None = None,
) -> Transition:
    return Transition(name, frozenset(sources), tuple(targets), by, when, part_of)


# In lifecycle order. ``create`` has no source: the row is born pending.
TRANSITIONS: tuple[Transition, ...] = (
    _t(
        "create",
        (),
        (S.PENDING, S.SCHEDULED),
        "API; broker agent (schedules)",
        "a submission is accepted (row committed before its intake publish); scheduled while its not_before"
        " is ahead",
    ),
    _t(
        "route",
        ROUTABLE,
        (S.QUEUED,),
        "broker agent (intake)",
        "a routing decision is recorded (a scheduled task once its not_before has passed)",
    ),
    _t(
        "route_parts",
        ROUTABLE,
        (S.WAITING,),
        "broker agent (intake)",
        "catalog multi_route: the decision splits the request into parts, created as a group's children;"
        " the task waits, holding nothing, as the group's combine step",
    ),
    _t(
        "start",
        STARTABLE | {S.RUNNING},
        (S.RUNNING,),
        "worker",
        "a worker takes the lease (a running task only when its lease expired or is the worker's own)",
    ),
    _t("complete", (S.RUNNING,), (S.COMPLETED,), "worker (lease owner)", "the agent answered"),
    _t(
        "fail",
        NON_TERMINAL,
        (S.FAILED,),
        "worker (lease owner); broker agent and worker without a lease",
        "a permanent error, retries exhausted, routing failed, unknown specialist, misrouted",
    ),
    _t("expire", NOT_STARTED, (S.FAILED,), "broker agent, worker", "the deadline passed before it started"),
    _t(
        "schedule_retry",
        (S.RUNNING,),
        (S.RETRYING,),
        "worker (lease owner)",
        "a transient failure; the next attempt's message waits in a delay queue",
    ),
    _t("release", (S.RUNNING,), (S.QUEUED,), "worker (lease owner)", "hand-back on shutdown, not charged"),
    _t(
        "delegate",
        (S.RUNNING,),
        (S.WAITING,),
        "worker (lease owner)",
        "the agent delegated work to child tasks; lease released, message settled, no slot held",
    ),
    _t(
        "resume",
        (S.WAITING,),
        (S.QUEUED,),
        "the last child's terminal transition; a group's settlement",
        "every child it waits for is terminal; their outcomes are recorded as its tool results (a"
        " multi-routed task's: in its instructions)",
        part_of="a child's complete, fail, expire, cancel, cancel_running, reclaim or dead_letter; or the"
        " settlement of the group of a multi-routed task's parts",
    ),
    _t(
        "cancel",
        CANCELLABLE_AT_ONCE | {S.RUNNING},
        (S.CANCELLED, S.RUNNING),
        "API",
        "cancellation requested: not started or waiting → cancelled; running → cancel requested (stays"
        " running); its child tasks are cancelled with it",
    ),
    _t(
        "cancel_running",
        (S.RUNNING,),
        (S.CANCELLED,),
        "worker (lease owner); worker at start",
        "the worker stopped a run whose cancellation was requested",
    ),
    _t(
        "reclaim",
        (S.RUNNING,),
        (S.QUEUED, S.DEAD_LETTERED),
        "broker agent (reaper)",
        "the lease of a task whose message was settled early expired (dead-lettered past the delivery limit)",
    ),
    _t(
        "dead_letter",
        NON_TERMINAL,
        (S.DEAD_LETTERED,),
        "broker agent (dead-letter consumer)",
        "the broker dead-lettered the task's message",
    ),
    _t(
        "replay",
        (S.DEAD_LETTERED,),
        (S.QUEUED, S.PENDING, S.SCHEDULED),
        "API (admin)",
        "a dead letter is replayed (pending when it was never routed; scheduled while its not_before is"
        " ahead)",
    ),
)

TRANSITIONS_BY_NAME = {t.name: t for t in TRANSITIONS}


def transition_table() -> str:
    """``TRANSITIONS`` as the markdown table docs/architecture.md shows."""

    def statuses(items: Iterable[TaskStatus]) -> str:
        ordered = [s for s in TaskStatus if s in set(items)]
        return ", ".join(f"`{s.value}`" for s in ordered) or "(new)"

    lines = ["| transition | from | to | performed by | when |", "| --- | --- | --- | --- | --- |"]
    for t in TRANSITIONS:
        targets = " or ".join(f"`{s.value}`" for s in t.targets)
        lines.append(f"| `{t.name}` | {statuses(t.sources)} | {targets} | {t.by} | {t.when} |")
    return "\n".join(lines)


if __name__ == "__main__":
    # docs/architecture.md's table: ``uv run python -m taskyard_common.lifecycle``.
    print(transition_table())

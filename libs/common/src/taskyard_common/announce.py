"""The one announce path: a stored task's message published (confirmed, mandatory), then the confirm marked.

Every step that puts a task in front of a consumer commits its row first and publishes second, so a
consumer never sees a task the store does not know; a crash between the two leaves a committed task whose
message may be missing. Who recovers what, once and for all:

- ``pending`` or ``scheduled`` (a submission, a schedule's occurrence created by the broker agent's
  scheduler, or a replay of a task never routed): committed with ``published_at`` NULL and marked after the
  confirm. The API's **sweeper** re-publishes the intake message of such a row still unmarked after its
  grace period, whoever created it (a scheduled task's message then waits in the delay queues again).
- ``queued`` by a dead-letter replay (API) or a lease reclaim (broker agent's reaper): committed with
  ``published_at`` NULL, marked after the confirm. The broker agent's **reaper** re-publishes the work
  message of a queued row still unmarked after ``TASKYARD_BROKER_REPUBLISH_AFTER_SECONDS`` (``stale_queued``),
  and reclaims expired leases of tasks whose message was settled early.
- ``queued`` by routing (intake) and every work message in flight: the **broker's redelivery**. The intake
  handler acks its intake message only after the work message is confirmed, so a crash in between brings
  the intake message back, and the handler re-publishes the stored decision. A worker acks a work message
  only after its outcome is committed (or, for a retry or a hand-back, after the next message is
  confirmed): a crash brings the message back and the conditional transitions drop what is done already.

A duplicate announcement is always harmless: routing and starting are conditional transitions that apply
once. A mark that fails (the database away) is only logged: the recovery above announces once more.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from uuid import UUID

from taskyard_common.amqp import Publisher
from taskyard_common.errors import NotAnnounceable, StoreUnavailable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage, WorkMessage
from taskyard_common.store.records import TaskRecord
from taskyard_common.topology import Topology, queue_level

log = logging.getLogger(__name__)

Announcement = IntakeMessage | WorkMessage
# Records the confirm: the store's ``mark_published``, or the API's batched marker for submissions.
Mark = Callable[[UUID], Awaitable[None]]


def announcement(record: TaskRecord) -> Announcement:
    """The message ``record``'s status calls for: a pending (or scheduled) task goes to the broker agent, a
    queued one straight to its specialist. Raises ``NotAnnounceable`` for anything else."""
    if record.status in (TaskStatus.PENDING, TaskStatus.SCHEDULED):
        return IntakeMessage.from_record(record)
    if record.status is TaskStatus.QUEUED:
        return WorkMessage.from_record(record)
    raise NotAnnounceable(f"task {record.id} is {record.status.value}: nothing to announce")


def destination(topology: Topology, message: Announcement, *, native: bool = False) -> tuple[str, str]:
    """(exchange, routing key) of an announcement: the queue of its priority's level (``queue_level``;
    ``native``: the broker orders quorum-queue messages by priority)."""
    level = queue_level(message.priority, native=native)
    if isinstance(message, IntakeMessage):
        return topology.intake_exchange, topology.intake_routing_key(level)
    return topology.tasks_exchange, topology.work_routing_key(message.specialist, level)


async def publish_then_mark(
    publisher: Publisher, topology: Topology, message: Announcement, mark: Mark | None
) -> None:
    """Publish ``message`` (its row is committed), then record the confirm with ``mark``; ``None`` where
    the broker's redelivery recovers instead (intake). Raises the publisher's errors
    (``BrokerUnavailable``, ``PublishRejected``, ``Unroutable``); a failed mark is logged, not raised."""
    exchange, routing_key = destination(topology, message, native=publisher.native_priorities)
    await publisher.publish(exchange, routing_key, message)
    if mark is None:
        return
    try:
        await mark(message.task_id)
    except StoreUnavailable:
        log.warning(
            "task %s published but not marked published (database unavailable): announced once more later",
            message.task_id,
        )


async def announce(publisher: Publisher, topology: Topology, record: TaskRecord, mark: Mark | None) -> None:
    """``publish_then_mark`` of the message ``record``'s status calls for."""
    await publish_then_mark(publisher, topology, announcement(record), mark)

"""The messages that announce a stored task on the bus, built from its record.

A ``pending`` task is announced to the broker agent (``IntakeMessage`` on the intake exchange), a ``queued``
one straight to its specialist (``WorkMessage`` on the tasks exchange, routing key = specialist). Submissions,
dead-letter replays and the sweeper all announce through here, so each message carries the same fields.
"""

from __future__ import annotations

from taskyard_common.amqp import Publisher
from taskyard_common.messages import IntakeMessage, TaskStatus, WorkMessage
from taskyard_common.store import TaskRecord
from taskyard_common.topology import INTAKE_ROUTING_KEY, Topology


class NotAnnounceable(ValueError):
    """The record cannot be announced: neither pending nor queued, or queued without a routing decision."""


def intake_message(record: TaskRecord) -> IntakeMessage:
    return IntakeMessage(
        task_id=record.id,
        input=record.input,
        requested_specialist=record.requested_specialist,
        metadata=record.metadata,
        deadline=record.deadline,
        timeout_seconds=record.timeout_seconds,
    )


def work_message(record: TaskRecord) -> WorkMessage:
    if record.routing is None:
        raise NotAnnounceable(f"task {record.id} is queued without a routing decision")
    return WorkMessage(
        task_id=record.id,
        # Charged attempts so far; a replay reset them, so it starts at 1 again.
        attempt=max(1, record.attempts),
        specialist=record.routing.specialist,
        input=record.input,
        routing=record.routing,
        metadata=record.metadata,
        deadline=record.deadline,
        timeout_seconds=record.timeout_seconds,
    )


async def announce(publisher: Publisher, topology: Topology, record: TaskRecord) -> None:
    """Publish (confirmed, mandatory) the message ``record``'s status calls for.

    Raises ``NotAnnounceable``, pydantic's ``ValidationError`` for a record no message can carry, or the
    publisher's ``BrokerUnavailable``/``PublishRejected``/``Unroutable``.
    """
    if record.status is TaskStatus.PENDING:
        await publisher.publish(topology.intake_exchange, INTAKE_ROUTING_KEY, intake_message(record))
    elif record.status is TaskStatus.QUEUED:
        message = work_message(record)
        await publisher.publish(topology.tasks_exchange, message.specialist, message)
    else:
        raise NotAnnounceable(f"task {record.id} is {record.status.value}: nothing to announce")

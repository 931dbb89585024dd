"""A Specialist's queues on the broker: declared like every service declares them, counted, deleted.

Each operation runs on a channel of its own: a refused one (a queue with other arguments, a queue that is
not empty) closes its channel, never the connection's others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import aiormq
from aio_pika.abc import AbstractChannel, AbstractRobustConnection

from taskyard_common.broker_version import server_version
from taskyard_common.errors import BrokerUnavailable
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology, declare_specialist
from taskyard_operator.reconcile import Plan

log = logging.getLogger(__name__)

UNAVAILABLE = (aiormq.exceptions.AMQPConnectionError, ConnectionError, TimeoutError, OSError)


def queue_settings(base: AmqpSettings, plan: Plan) -> AmqpSettings:
    """The operator's connection with the worker's own prefix and queue arguments (its env may set them)."""
    update: dict[str, object] = {"prefix": plan.amqp_prefix}
    if plan.delivery_limit is not None:
        update["delivery_limit"] = plan.delivery_limit
    if plan.max_length is not None:
        update["max_length"] = plan.max_length
    return base.model_copy(update=update)


def work_queues(plan: Plan) -> tuple[str, ...]:
    """The specialist's work queues, one per priority level, highest first."""
    return tuple(Topology(plan.amqp_prefix).specialist_queues(plan.name))


def queue_names(plan: Plan) -> tuple[str, ...]:
    """Every queue of the specialist: its work queues and its quarantine queue."""
    return (*work_queues(plan), Topology(plan.amqp_prefix).quarantine_queue(plan.name))


async def declare(connection: AbstractRobustConnection, base: AmqpSettings, plan: Plan) -> None:
    """Work and quarantine queues with the services' arguments; ``TopologyMismatch`` when they exist with
    others, ``BrokerUnavailable`` when the broker does not answer."""
    settings = queue_settings(base, plan)
    try:
        channel = await connection.channel()
    except UNAVAILABLE as exc:
        raise BrokerUnavailable(f"cannot open a channel: {type(exc).__name__}") from exc
    try:
        await declare_specialist(channel, Topology(settings.prefix), plan.name, settings)
    finally:
        if not channel.is_closed:
            await channel.close()
    log.debug(
        "declared the queues of %s on RabbitMQ %s", plan.name, ".".join(map(str, server_version(connection)))
    )


async def ready_messages(connection: AbstractRobustConnection, queue: str) -> int | None:
    """Ready messages of one queue (a passive declare); None when the queue does not exist."""
    counts = await _counts(connection, queue)
    return None if counts is None else counts[0]


@dataclass(frozen=True)
class Deletion:
    deleted: tuple[str, ...]
    # Queues kept because they held messages (and no annotation asked to delete them anyway).
    kept: tuple[str, ...]


async def delete(
    connection: AbstractRobustConnection, plan: Plan, *, force: bool, unfinished_tasks: int | None
) -> Deletion:
    """Delete the work and quarantine queues: with ``force`` in any case, else only when neither holds a
    message nor has a consumer and the task store has no unfinished task (queued, running, retrying) for the
    specialist; otherwise both stay. Quorum queues refuse ``queue.delete`` with ``if-empty`` (NOT_IMPLEMENTED,
    which closes the connection on 3.x), so emptiness is checked first with passive declares: a message
    routed between the check and the delete would go with the queue, a narrow window once the Specialist,
    and so its workers, are being deleted. ``channel.queue_delete``: aio-pika's ``Queue.delete()`` defaults
    fail on quorum queues (540)."""
    names = queue_names(plan)
    present: dict[str, tuple[int, int]] = {}
    for name in names:
        counts = await _counts(connection, name)
        if counts is not None:
            present[name] = counts
    busy = [n for n, (messages, consumers) in present.items() if messages or consumers]
    if not force and (busy or unfinished_tasks is None or unfinished_tasks > 0):
        return Deletion((), tuple(present))
    deleted = []
    for name in present:
        channel = await _channel(connection)
        try:
            await channel.queue_delete(name)
            deleted.append(name)
        finally:
            if not channel.is_closed:
                await channel.close()
    return Deletion(tuple(deleted), ())


async def _channel(connection: AbstractRobustConnection) -> AbstractChannel:
    try:
        return await connection.channel()
    except UNAVAILABLE as exc:
        raise BrokerUnavailable(f"cannot open a channel: {type(exc).__name__}") from exc


async def _counts(connection: AbstractRobustConnection, queue: str) -> tuple[int, int] | None:
    """(ready messages, consumers) of a queue; None when it does not exist."""
    channel = await _channel(connection)
    try:
        declared = await channel.declare_queue(queue, passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return None
    finally:
        if not channel.is_closed:
            await channel.close()
    result = declared.declaration_result
    return int(result.message_count or 0), int(result.consumer_count or 0)

"""A Specialist's queues on the broker: declared like every service declares them, counted, deleted.

Each operation runs on a channel of its own: a refused one (a queue with other arguments, a queue that is
not empty) closes its channel, never the connection's others.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import aiormq
from aio_pika.abc import AbstractRobustConnection

from taskyard_common.amqp import server_version
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


def queue_names(plan: Plan) -> tuple[str, str]:
    topology = Topology(plan.amqp_prefix)
    return topology.specialist_queue(plan.name), topology.quarantine_queue(plan.name)


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
    try:
        channel = await connection.channel()
    except UNAVAILABLE as exc:
        raise BrokerUnavailable(f"cannot open a channel: {type(exc).__name__}") from exc
    try:
        declared = await channel.declare_queue(queue, passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return None
    finally:
        if not channel.is_closed:
            await channel.close()
    result = declared.declaration_result
    return int(result.message_count or 0) if result is not None else None


@dataclass(frozen=True)
class Deletion:
    deleted: tuple[str, ...]
    # Queues kept because they held messages (and no annotation asked to delete them anyway).
    kept: tuple[str, ...]


async def delete(connection: AbstractRobustConnection, plan: Plan, *, force: bool) -> Deletion:
    """Delete the work and quarantine queues: only when empty (the broker checks, atomically), or in any
    case with ``force``. ``channel.queue_delete``: aio-pika's ``Queue.delete()`` defaults fail on quorum
    queues (540)."""
    deleted, kept = [], []
    for name in queue_names(plan):
        try:
            channel = await connection.channel()
        except UNAVAILABLE as exc:
            raise BrokerUnavailable(f"cannot open a channel: {type(exc).__name__}") from exc
        try:
            await channel.queue_delete(name, if_empty=not force)
            deleted.append(name)
        except aiormq.exceptions.ChannelPreconditionFailed:
            kept.append(name)
        finally:
            if not channel.is_closed:
                await channel.close()
    return Deletion(tuple(deleted), tuple(kept))

"""Making a real dead letter cheaply: the test plays a broken worker that takes a task's work message and
rejects it without requeueing, so RabbitMQ dead-letters it (reason ``rejected``) through the dead-letter
exchange, and the broker agent records it as for any other."""

from __future__ import annotations

import aio_pika

from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology
from tests.support.polling import eventually


async def reject_work_messages(
    amqp: AmqpSettings, specialist: str, count: int, *, within: float = 30
) -> None:
    """Reject the next ``count`` messages of the specialist's work queue (no worker may consume it)."""
    connection = await aio_pika.connect(
        amqp.url.get_secret_value(), client_properties={"connection_name": "test: broken worker"}
    )
    try:
        channel = await connection.channel()
        queue = await channel.get_queue(Topology(amqp.prefix).specialist_queue(specialist), ensure=False)
        rejected = 0

        async def rejected_all() -> bool:
            nonlocal rejected
            message = await queue.get(no_ack=False, fail=False)
            if message is not None:
                await message.reject(requeue=False)
                rejected += 1
            return rejected >= count

        await eventually(
            rejected_all, timeout=within, what=f"{count} work message(s) of {specialist} to reject"
        )
    finally:
        await connection.close()

"""The consume helper: settlement by outcome, and a handler that settles its message itself."""

from __future__ import annotations

import asyncio
import uuid

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from taskyard_common.amqp import connect, consume
from taskyard_common.errors import TransientError
from taskyard_common.messages import ControlMessage, encode
from taskyard_common.settings import AmqpSettings
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def test_a_message_the_handler_settled_early_is_not_settled_again(
    amqp_settings: AmqpSettings, caplog: pytest.LogCaptureFixture
) -> None:
    connection = await connect(amqp_settings, "test consume settle early")
    try:
        channel = await connection.channel()
        # A classic, exclusive queue: gone with the connection, nothing to clean up.
        queue = await channel.declare_queue(
            f"{amqp_settings.prefix}.consume-{uuid.uuid4().hex[:6]}", exclusive=True
        )
        ids = [uuid.uuid4() for _ in range(3)]
        early_then_fail, _early_then_return, plain = ids
        handled: list[uuid.UUID] = []
        release = asyncio.Event()

        async def handler(message: ControlMessage, incoming: AbstractIncomingMessage) -> None:
            if message.task_id != plain:
                await incoming.ack()  # e.g. a long task acked while it keeps running
                await release.wait()
            handled.append(message.task_id)
            if message.task_id == early_then_fail:
                raise TransientError("failed after its message was acked")

        await consume(queue, ControlMessage, handler)
        for task_id in ids:
            body = aio_pika.Message(encode(ControlMessage(task_id=task_id)))
            await channel.default_exchange.publish(body, routing_key=queue.name)

        async def all_handled() -> bool:
            release.set()
            return len(handled) == 3

        await eventually(all_handled, what="three deliveries handled")
        # Nothing was settled twice or requeued: the queue is empty and its channel still open.
        declared = await channel.declare_queue(queue.name, passive=True)
        assert declared.declaration_result.message_count == 0
        assert not channel.is_closed
        logged = [r.getMessage() for r in caplog.records]
        assert not [line for line in logged if "requeueing" in line or "could not settle" in line]
        assert [line.split(": ", 1)[1] for line in logged if "after settling" in line] == [
            "TransientError: failed after its message was acked"
        ]
    finally:
        await connection.close()

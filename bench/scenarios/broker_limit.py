"""Scenario 1, the ceiling: raw aio-pika on one durable quorum queue, nothing of taskyard in the way.

Publishes persistent messages with publisher confirms, about 100 unconfirmed at a time, while a consumer on
its own connection acks each message by hand (prefetch 100). Rate = messages / (first publish .. last ack).
"""

from __future__ import annotations

import asyncio
import time

import aio_pika

from bench.infra import Context, delete_amqp
from bench.runner import Rows, Scenario, bounded, finish

IN_FLIGHT = 100
PREFETCH = 100
BODY = b'{"task_id": "00000000-0000-0000-0000-000000000000", "payload": "benchmark"}'


async def run(ctx: Context, rows: Rows) -> None:
    total = ctx.pick(50_000, 2_000, 200)
    row = rows.add(
        "broker", "1 broker limit", f"aio-pika, quorum, {IN_FLIGHT} unconfirmed, prefetch {PREFETCH}", total
    )
    queue_name = f"{ctx.prefix('broker')}.q"
    producer = await aio_pika.connect(ctx.amqp_url, client_properties={"connection_name": "bench producer"})
    consumer = await aio_pika.connect(ctx.amqp_url, client_properties={"connection_name": "bench consumer"})
    try:
        pub_channel = await producer.channel(publisher_confirms=True)
        await pub_channel.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
        sub_channel = await consumer.channel()
        await sub_channel.set_qos(prefetch_count=PREFETCH)
        sub_queue = await sub_channel.get_queue(queue_name, ensure=False)
        all_acked = asyncio.Event()
        started = 0.0

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await message.ack()
            row.done += 1
            row.wall_s = time.perf_counter() - started
            if row.done >= total:
                all_acked.set()

        await sub_queue.consume(on_message)
        slots = asyncio.Semaphore(IN_FLIGHT)

        async def publish_one() -> None:
            try:
                await pub_channel.default_exchange.publish(
                    aio_pika.Message(BODY, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=queue_name,
                    mandatory=True,
                )
            finally:
                slots.release()

        async with bounded(row, 120):
            started = time.perf_counter()
            pending = set()
            for _ in range(total):
                await slots.acquire()
                task = asyncio.create_task(publish_one())
                pending.add(task)
                task.add_done_callback(pending.discard)
            await asyncio.gather(*pending)
            published_in = time.perf_counter() - started
            await all_acked.wait()
            row.wall_s = time.perf_counter() - started
            row.note = f"publish alone {total / published_in:,.0f}/s" if published_in else ""
    finally:
        await consumer.close()
        await producer.close()
        await delete_amqp(ctx.amqp_url, [queue_name])
    finish(row)


SCENARIO = Scenario(
    "broker",
    run,
    timeout_s=180,
    quick_timeout_s=60,
    describe="raw aio-pika publish (confirms) + consume (manual ack) on a quorum queue",
)

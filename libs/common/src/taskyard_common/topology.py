"""The one place that names and declares every exchange and queue.

Names derive from a prefix, so tests (and several installs) can share one broker. Every service declares the
whole topology at start; declaring is idempotent as long as the arguments do not change.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractQueue

from taskyard_common.errors import TopologyMismatch
from taskyard_common.settings import AmqpSettings

INTAKE_ROUTING_KEY = "task"


@dataclass(frozen=True)
class Topology:
    prefix: str

    @property
    def intake_exchange(self) -> str:
        return f"{self.prefix}.intake"

    @property
    def intake_queue(self) -> str:
        return f"{self.prefix}.intake"

    @property
    def tasks_exchange(self) -> str:
        return f"{self.prefix}.tasks"

    def specialist_queue(self, specialist: str) -> str:
        return f"{self.prefix}.work.{specialist}"

    @property
    def dead_letter_exchange(self) -> str:
        return f"{self.prefix}.dlx"

    @property
    def dead_letter_queue(self) -> str:
        return f"{self.prefix}.dead-letters"

    def work_queue_names(self, specialists: Iterable[str]) -> list[str]:
        return [self.intake_queue, *(self.specialist_queue(s) for s in specialists)]


def work_queue_arguments(topology: Topology, settings: AmqpSettings) -> dict[str, Any]:
    """Arguments of every work queue (intake and specialists).

    - an explicit delivery limit: RabbitMQ 3.x has none by default, 4.0 made it 20;
    - at-least-once dead-lettering, which RabbitMQ only honours together with ``reject-publish``
      (otherwise it silently falls back to at-most-once);
    - a max length, so a flood is refused at publish time (a nack the producer turns into back pressure)
      instead of exhausting the broker.
    """
    return {
        "x-queue-type": "quorum",
        "x-delivery-limit": settings.delivery_limit,
        "x-dead-letter-exchange": topology.dead_letter_exchange,
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
        "x-max-length": settings.max_length,
    }


def dead_letter_queue_arguments() -> dict[str, Any]:
    # No max length and no dead-lettering of its own: the dead-letter queue is the end of the line.
    return {"x-queue-type": "quorum"}


@dataclass(frozen=True)
class Declared:
    intake_exchange: AbstractExchange
    tasks_exchange: AbstractExchange
    dead_letter_exchange: AbstractExchange
    queues: dict[str, AbstractQueue]


async def declare(
    channel: AbstractChannel, topology: Topology, specialists: Iterable[str], settings: AmqpSettings
) -> Declared:
    """Declare everything; a queue that exists with other arguments raises ``TopologyMismatch``."""
    try:
        dlx = await channel.declare_exchange(
            topology.dead_letter_exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        intake_x = await channel.declare_exchange(
            topology.intake_exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        tasks_x = await channel.declare_exchange(
            topology.tasks_exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        queues: dict[str, AbstractQueue] = {}
        dlq = await channel.declare_queue(
            topology.dead_letter_queue, durable=True, arguments=dead_letter_queue_arguments()
        )
        await dlq.bind(dlx, routing_key="#")
        queues[topology.dead_letter_queue] = dlq

        args = work_queue_arguments(topology, settings)
        intake_q = await channel.declare_queue(topology.intake_queue, durable=True, arguments=args)
        await intake_q.bind(intake_x, routing_key=INTAKE_ROUTING_KEY)
        queues[topology.intake_queue] = intake_q
        for name in specialists:
            queue = await channel.declare_queue(topology.specialist_queue(name), durable=True, arguments=args)
            await queue.bind(tasks_x, routing_key=name)
            queues[queue.name] = queue
    except aiormq.exceptions.ChannelPreconditionFailed as exc:
        raise TopologyMismatch(
            f"{exc}: a queue already exists with other arguments. Queue arguments cannot change after "
            "declaration: delete the queue (after draining it) or keep the previous settings."
        ) from exc
    return Declared(intake_x, tasks_x, dlx, queues)

"""The one place that names and declares every exchange and queue.

Names derive from a prefix, so tests (and several installs) can share one broker. Every service declares the
whole topology at start; declaring is idempotent as long as the arguments do not change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractQueue

from taskyard_common.broker_version import channel_server_version
from taskyard_common.errors import BrokerUnavailable, TopologyMismatch
from taskyard_common.messages import Priority
from taskyard_common.settings import AmqpSettings

INTAKE_ROUTING_KEY = "task"
# Every work target (intake, each specialist) has one queue per level, highest first. The normal level keeps
# the unsuffixed name (and routing key), so queues declared before priorities existed stay the normal ones.
LEVELS = (Priority.HIGH, Priority.NORMAL, Priority.LOW)
# From RabbitMQ 4.0 quorum queues honour message priorities, in two effective levels: a priority above 4 is
# "high", 0-4 "normal" (see ``queue_level``).
NATIVE_PRIORITY_SINCE = (4, 0)
# The AMQP ``priority`` property of each level's messages (ignored by 3.x quorum queues).
AMQP_PRIORITY = {Priority.HIGH: 8, Priority.NORMAL: 4, Priority.LOW: 0}

# Delay tiers in seconds: one TTL queue each. All messages in a tier expire in arrival order, so no delay
# ever waits behind a longer one (per-message TTLs would: RabbitMQ expires only at the head of a queue).
DELAY_TIERS = (1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
INTAKE_TARGET = "intake"


def level_suffix(level: Priority) -> str:
    """What a level adds to a work queue's name and routing key: nothing for normal, ``.high``, ``.low``."""
    return "" if level is Priority.NORMAL else f".{level.value}"


def work_target(specialist: str, level: Priority = Priority.NORMAL) -> str:
    """The retry routing-key suffix of one level's queue of a specialist (``intake…`` is the intake's)."""
    return f"work.{specialist}{level_suffix(level)}"


def intake_target(level: Priority = Priority.NORMAL) -> str:
    return f"{INTAKE_TARGET}{level_suffix(level)}"


def level_queues_pattern(queue: str) -> str:
    """An anchored regex for the normal-level ``queue`` and its other levels' queues (a KEDA trigger sums
    their messages). Names hold letters, digits, ``_``, ``-`` and dots: only the dots need escaping."""
    return f"^{queue.replace('.', chr(92) + '.')}(\\.high|\\.low)?$"


def native_priorities(version: tuple[int, ...]) -> bool:
    """Whether a broker of ``version`` orders a quorum queue's messages by their priority property."""
    return version >= NATIVE_PRIORITY_SINCE


def delay_tier(seconds: float) -> int:
    """The shortest tier that waits at least ``seconds`` (the longest tier caps it)."""
    for tier in DELAY_TIERS:
        if tier >= seconds:
            return tier
    return DELAY_TIERS[-1]


def queue_level(priority: Priority, *, native: bool) -> Priority:
    """The level whose queue a message of ``priority`` goes to. With ``native`` priorities (a ≥ 4.0 broker,
    see ``Publisher.native_priorities``) high and normal share the normal queue, published with AMQP priority
    8 and 4, which the broker tells apart; low keeps its own queue, a level 4.0's two cannot express. Every
    level queue is declared either way, so consumers and scalers see the same queues on 3.x and 4.x."""
    if native and priority is Priority.HIGH:
        return Priority.NORMAL
    return priority


@dataclass(frozen=True)
class Topology:
    prefix: str

    def intake_routing_key(self, level: Priority) -> str:
        return f"{INTAKE_ROUTING_KEY}{level_suffix(level)}"

    def work_routing_key(self, specialist: str, level: Priority) -> str:
        return f"{specialist}{level_suffix(level)}"

    @property
    def intake_exchange(self) -> str:
        return f"{self.prefix}.intake"

    @property
    def intake_queue(self) -> str:
        return f"{self.prefix}.intake"

    def intake_level_queue(self, level: Priority) -> str:
        return f"{self.intake_queue}{level_suffix(level)}"

    def intake_queues(self) -> list[str]:
        return [self.intake_level_queue(level) for level in LEVELS]

    @property
    def tasks_exchange(self) -> str:
        return f"{self.prefix}.tasks"

    def specialist_queue(self, specialist: str, level: Priority = Priority.NORMAL) -> str:
        return f"{self.prefix}.work.{specialist}{level_suffix(level)}"

    def specialist_queues(self, specialist: str) -> list[str]:
        """Every level queue of a specialist, highest first (what its consumers and scalers cover)."""
        return [self.specialist_queue(specialist, level) for level in LEVELS]

    def quarantine_queue(self, specialist: str) -> str:
        """Where a worker moves a redelivered message, to run it alone (see the worker's quarantine)."""
        return f"{self.prefix}.quarantine.{specialist}"

    @property
    def quarantine_exchange(self) -> str:
        return f"{self.prefix}.quarantine"

    @property
    def delay_exchange(self) -> str:
        return f"{self.prefix}.delay"

    def delay_queue(self, tier: int) -> str:
        return f"{self.prefix}.delay.{tier}s"

    @property
    def retry_exchange(self) -> str:
        """Where expired delayed messages land; routes ``<tier>.<target>`` back to the target queue."""
        return f"{self.prefix}.retry"

    @property
    def control_exchange(self) -> str:
        """Fanout of control messages (cancel) to every worker's own exclusive queue."""
        return f"{self.prefix}.control"

    @property
    def events_exchange(self) -> str:
        """Topic exchange of wake-ups "task <id> has new events" (routing key: the task id), for whoever
        watches a task (the API's streams and long polls). Transient: the events are in the store."""
        return f"{self.prefix}.events"

    @property
    def dead_letter_exchange(self) -> str:
        return f"{self.prefix}.dlx"

    @property
    def dead_letter_queue(self) -> str:
        return f"{self.prefix}.dead-letters"

    def work_queue_names(self, specialists: Iterable[str]) -> list[str]:
        """Every level queue of the intake and of each specialist."""
        return [*self.intake_queues(), *(q for s in specialists for q in self.specialist_queues(s))]

    def all_queue_names(self, specialists: Iterable[str]) -> list[str]:
        names = list(specialists)
        return [
            *self.work_queue_names(names),
            *(self.quarantine_queue(s) for s in names),
            *(self.delay_queue(t) for t in DELAY_TIERS),
            self.dead_letter_queue,
        ]

    def all_exchange_names(self) -> list[str]:
        return [
            self.intake_exchange,
            self.tasks_exchange,
            self.quarantine_exchange,
            self.delay_exchange,
            self.retry_exchange,
            self.control_exchange,
            self.events_exchange,
            self.dead_letter_exchange,
        ]


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


def delay_queue_arguments(topology: Topology, settings: AmqpSettings, tier: int) -> dict[str, Any]:
    """A TTL queue nobody consumes: expired messages dead-letter (at least once) to the retry exchange."""
    return {
        **work_queue_arguments(topology, settings),
        "x-message-ttl": tier * 1000,
        "x-dead-letter-exchange": topology.retry_exchange,
    }


# RabbitMQ 4.0 gave every quorum queue without a delivery limit a default one (20); -1 restores "unlimited".
UNLIMITED_DELIVERIES_SINCE = (4, 0)


def dead_letter_queue_arguments(broker_version: tuple[int, ...]) -> dict[str, Any]:
    """No max length and no dead-lettering of its own: the dead-letter queue is the end of the line.

    It must never drop a message either: while PostgreSQL is down its consumer requeues with ``reject``,
    which counts toward a delivery limit, and a message past the limit of a queue without a dead-letter
    exchange is dropped (its task would stay non-terminal forever). So its limit is unlimited, which has to
    be spelled per version: RabbitMQ 3.x has no default limit but treats ``-1`` as "drop at the first
    requeue", while 4.x defaults to 20 and reads ``-1`` as unlimited.
    """
    args: dict[str, Any] = {"x-queue-type": "quorum"}
    if broker_version >= UNLIMITED_DELIVERIES_SINCE:
        args["x-delivery-limit"] = -1
    return args


@dataclass(frozen=True)
class Declared:
    intake_exchange: AbstractExchange
    tasks_exchange: AbstractExchange
    dead_letter_exchange: AbstractExchange
    queues: dict[str, AbstractQueue]
    control_exchange: AbstractExchange | None = None


async def declare(
    channel: AbstractChannel, topology: Topology, specialists: Iterable[str], settings: AmqpSettings
) -> Declared:
    """Declare everything; a queue that exists with other arguments raises ``TopologyMismatch``, a broker
    that does not answer within ``declare_timeout_seconds`` raises ``BrokerUnavailable``."""
    try:
        async with asyncio.timeout(settings.declare_timeout_seconds):
            return await _declare(channel, topology, specialists, settings)
    except TimeoutError as exc:
        raise BrokerUnavailable(
            f"declaring the topology took longer than {settings.declare_timeout_seconds:g}s"
        ) from exc


async def _declare(
    channel: AbstractChannel, topology: Topology, specialists: Iterable[str], settings: AmqpSettings
) -> Declared:
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
            topology.dead_letter_queue,
            durable=True,
            arguments=dead_letter_queue_arguments(await channel_server_version(channel)),
        )
        await dlq.bind(dlx, routing_key="#")
        queues[topology.dead_letter_queue] = dlq

        await channel.declare_exchange(
            topology.quarantine_exchange, aio_pika.ExchangeType.DIRECT, durable=True
        )
        retry_x = await channel.declare_exchange(
            topology.retry_exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        delay_x = await channel.declare_exchange(
            topology.delay_exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        control_x = await channel.declare_exchange(
            topology.control_exchange, aio_pika.ExchangeType.FANOUT, durable=True
        )
        await channel.declare_exchange(topology.events_exchange, aio_pika.ExchangeType.TOPIC, durable=True)

        args = work_queue_arguments(topology, settings)
        for level in LEVELS:
            intake_q = await channel.declare_queue(
                topology.intake_level_queue(level), durable=True, arguments=args
            )
            await intake_q.bind(intake_x, routing_key=topology.intake_routing_key(level))
            await intake_q.bind(retry_x, routing_key=f"*.{intake_target(level)}")
            queues[intake_q.name] = intake_q
        for name in specialists:
            queues.update(await _declare_specialist_queues(channel, topology, name, args))
        for tier in DELAY_TIERS:
            delay_q = await channel.declare_queue(
                topology.delay_queue(tier),
                durable=True,
                arguments=delay_queue_arguments(topology, settings, tier),
            )
            await delay_q.bind(delay_x, routing_key=f"{tier}.#")
            queues[delay_q.name] = delay_q
    except aiormq.exceptions.ChannelPreconditionFailed as exc:
        raise TopologyMismatch(
            f"{exc}: a queue already exists with other arguments. Queue arguments cannot change after "
            "declaration: delete the queue (after draining it) or keep the previous settings."
        ) from exc
    return Declared(intake_x, tasks_x, dlx, queues, control_x)


async def _declare_specialist_queues(
    channel: AbstractChannel, topology: Topology, specialist: str, args: dict[str, Any]
) -> dict[str, AbstractQueue]:
    """One specialist's work queues (one per level) and quarantine queue, bound to the exchanges that feed
    them."""
    queues: dict[str, AbstractQueue] = {}
    for level in LEVELS:
        queue = await channel.declare_queue(
            topology.specialist_queue(specialist, level), durable=True, arguments=args
        )
        await queue.bind(topology.tasks_exchange, routing_key=topology.work_routing_key(specialist, level))
        await queue.bind(topology.retry_exchange, routing_key=f"*.{work_target(specialist, level)}")
        queues[queue.name] = queue
    quarantine = await channel.declare_queue(
        topology.quarantine_queue(specialist), durable=True, arguments=args
    )
    await quarantine.bind(topology.quarantine_exchange, routing_key=specialist)
    queues[quarantine.name] = quarantine
    return queues


async def declare_specialist(
    channel: AbstractChannel, topology: Topology, specialist: str, settings: AmqpSettings
) -> dict[str, AbstractQueue]:
    """Declare one specialist's queues (a work queue per level, quarantine) with the same arguments and bindings as
    ``declare``, and the exchanges they are bound to, for a process that manages one specialist at a time
    (the Kubernetes operator). Idempotent; other arguments raise ``TopologyMismatch``, a broker that does
    not answer within ``declare_timeout_seconds`` ``BrokerUnavailable``."""
    try:
        async with asyncio.timeout(settings.declare_timeout_seconds):
            await channel.declare_exchange(
                topology.dead_letter_exchange, aio_pika.ExchangeType.TOPIC, durable=True
            )
            for name in (topology.tasks_exchange, topology.quarantine_exchange):
                await channel.declare_exchange(name, aio_pika.ExchangeType.DIRECT, durable=True)
            await channel.declare_exchange(topology.retry_exchange, aio_pika.ExchangeType.TOPIC, durable=True)
            return await _declare_specialist_queues(
                channel, topology, specialist, work_queue_arguments(topology, settings)
            )
    except aiormq.exceptions.ChannelPreconditionFailed as exc:
        raise TopologyMismatch(
            f"{exc}: a queue or exchange of specialist {specialist!r} already exists with other arguments"
        ) from exc
    except TimeoutError as exc:
        raise BrokerUnavailable(
            f"declaring the queues of {specialist!r} took longer than {settings.declare_timeout_seconds:g}s"
        ) from exc

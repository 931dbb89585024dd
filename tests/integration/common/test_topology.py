"""The declared topology, checked through the broker itself rather than through our own constants."""

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel

from taskyard_common.amqp import Publisher, connect
from taskyard_common.announce import publish_then_mark
from taskyard_common.broker_version import server_version
from taskyard_common.errors import BrokerUnavailable, PublishRejected, TopologyMismatch, Unroutable
from taskyard_common.messages import IntakeMessage, Priority
from taskyard_common.retry import publish_delayed
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import INTAKE_ROUTING_KEY, Topology, declare, declare_specialist, work_target
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


@pytest.fixture
async def connection(amqp_settings, test_id):
    conn = await connect(amqp_settings, name=f"test {test_id}")
    try:
        yield conn
    finally:
        await conn.close()


def _broker_queue_arguments(names: set[str]) -> dict[str, dict]:
    """Queue types and arguments as the broker reports them (rabbitmqctl on the broker's host)."""
    output = subprocess.run(
        ["rabbitmqctl", "list_queues", "-q", "name", "type", "arguments", "--formatter", "json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return {q["name"]: q for q in json.loads(output) if q["name"] in names}


async def test_declare_creates_quorum_queues_with_safe_arguments(connection, amqp_settings, catalog):
    topology = Topology(amqp_settings.prefix)
    channel = await connection.channel()
    await declare(channel, topology, catalog.names, amqp_settings)
    # Declaring again is idempotent.
    await declare(channel, topology, catalog.names, amqp_settings)
    names = {*topology.work_queue_names(catalog.names), topology.dead_letter_queue}
    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl is not on this host; the behavioural tests below still cover the arguments")
    reported = _broker_queue_arguments(names)
    assert set(reported) == names
    for name in topology.work_queue_names(catalog.names):
        queue = reported[name]
        assert queue["type"] == "quorum"
        args = dict(_pairs(queue["arguments"]))
        assert args["x-delivery-limit"] == amqp_settings.delivery_limit
        assert args["x-dead-letter-exchange"] == topology.dead_letter_exchange
        assert args["x-dead-letter-strategy"] == "at-least-once"
        assert args["x-overflow"] == "reject-publish"
        assert args["x-max-length"] == amqp_settings.max_length
    assert reported[topology.dead_letter_queue]["type"] == "quorum"


def _pairs(arguments):
    """rabbitmqctl's JSON gives arguments as a map or as [name, value] pairs depending on version."""
    if isinstance(arguments, dict):
        return list(arguments.items())
    return [(pair[0], pair[-1]) for pair in arguments]


async def test_changed_arguments_are_refused_with_a_clear_error(connection, amqp_settings, catalog):
    topology = Topology(amqp_settings.prefix)
    await declare(await connection.channel(), topology, catalog.names, amqp_settings)
    changed = amqp_settings.model_copy(update={"delivery_limit": amqp_settings.delivery_limit + 1})
    with pytest.raises(TopologyMismatch, match="other arguments"):
        await declare(await connection.channel(), topology, catalog.names, changed)


async def test_rejected_message_is_dead_lettered(connection, amqp_settings, catalog):
    topology = Topology(amqp_settings.prefix)
    channel = await connection.channel()
    declared = await declare(channel, topology, catalog.names, amqp_settings)
    publisher = await Publisher.open(connection, amqp_settings)
    message = IntakeMessage(task_id=uuid.uuid4(), input="x")
    await publisher.publish(topology.intake_exchange, INTAKE_ROUTING_KEY, message)
    incoming = await _get(declared.queues[topology.intake_queue])
    await incoming.reject(requeue=False)
    dead = await _get(declared.queues[topology.dead_letter_queue])
    assert dead.message_id == str(message.task_id)
    assert dead.headers["x-death"][0]["reason"] == "rejected"
    await dead.ack()
    await publisher.close()


@pytest.fixture
async def full_intake(connection, amqp_url, test_id) -> AsyncIterator[tuple[Topology, AbstractChannel]]:
    """The topology of ``general`` with room for two messages per queue (removed afterwards), and a channel."""
    settings = AmqpSettings(url=amqp_url, prefix=f"{test_id}.full", delivery_limit=3, max_length=2)
    topology = Topology(settings.prefix)
    channel = await connection.channel()
    await declare(channel, topology, ["general"], settings)
    try:
        yield topology, channel
    finally:
        for name in topology.all_queue_names(["general"]):
            await channel.queue_delete(name)
        for exchange in topology.all_exchange_names():
            await channel.exchange_delete(exchange)


async def publish_intake(publisher: Publisher, topology: Topology) -> None:
    await publisher.publish(
        topology.intake_exchange, INTAKE_ROUTING_KEY, IntakeMessage(task_id=uuid.uuid4(), input="x")
    )


async def test_full_queue_nacks_the_publish(connection, amqp_url, full_intake):
    topology, _ = full_intake
    publisher = await Publisher.open(connection, AmqpSettings(url=amqp_url))
    try:
        with pytest.raises(PublishRejected):
            # Quorum queues enforce the limit slightly after it is crossed: a few more publishes at most.
            for _ in range(10):
                await publish_intake(publisher, topology)
    finally:
        await publisher.close()


async def test_after_a_refused_publish_the_publisher_publishes_on_a_new_channel(
    connection, amqp_url, full_intake
):
    """A channel stuck with a quorum queue's old leader (RabbitMQ 3.10) refuses every publish until it is
    closed: a refusal makes the publisher open a new channel, at most one per ``channel_renew_seconds``."""
    topology, channel = full_intake
    publisher = await Publisher.open(connection, AmqpSettings(url=amqp_url, channel_renew_seconds=3600))
    try:
        first = publisher._channel
        with pytest.raises(PublishRejected):
            for _ in range(10):
                await publish_intake(publisher, topology)
        renewed = publisher._channel
        assert renewed is not first and first.is_closed
        with pytest.raises(PublishRejected):
            await publish_intake(publisher, topology)  # really full: refused on the new channel too
        assert publisher._channel is renewed, "no second channel within channel_renew_seconds"
        await (await channel.get_queue(topology.intake_queue, ensure=False)).purge()
        await publish_intake(publisher, topology)
    finally:
        await publisher.close()


async def test_unroutable_publish_raises(connection, amqp_settings, catalog):
    topology = Topology(amqp_settings.prefix)
    await declare(await connection.channel(), topology, catalog.names, amqp_settings)
    publisher = await Publisher.open(connection, amqp_settings)
    try:
        with pytest.raises(Unroutable):
            await publisher.publish(
                topology.tasks_exchange, "no-such-specialist", IntakeMessage(task_id=uuid.uuid4(), input="x")
            )
    finally:
        await publisher.close()


async def test_server_version_is_read_from_the_connection(connection):
    version = server_version(connection)
    assert version >= (3, 8)


async def _get(queue: aio_pika.abc.AbstractQueue) -> aio_pika.abc.AbstractIncomingMessage:
    for _ in range(200):
        message = await queue.get(fail=False)
        if message is not None:
            return message
        await asyncio.sleep(0.02)
    raise AssertionError(f"nothing arrived on {queue.name}")


async def test_delayed_message_comes_back_to_its_target_queue(connection, amqp_settings, catalog):
    topology = Topology(amqp_settings.prefix)
    declared = await declare(await connection.channel(), topology, catalog.names, amqp_settings)
    publisher = await Publisher.open(connection, amqp_settings)
    try:
        message = IntakeMessage(task_id=uuid.uuid4(), input="later")
        tier = await publish_delayed(publisher, topology, work_target("general"), message, 0.5)
        assert tier == 1
        assert await declared.queues[topology.specialist_queue("general")].get(fail=False) is None
        arrived = await _get(declared.queues[topology.specialist_queue("general")])
        assert arrived.message_id == str(message.task_id)
        # It arrives as a new message: waiting never counts toward the target's delivery limit.
        assert not arrived.redelivered
        await arrived.ack()
    finally:
        await publisher.close()


async def test_a_declaration_that_never_finishes_is_a_clear_transient_error(
    connection, amqp_settings, catalog
):
    # A deadline no real broker meets: the declaration is abandoned instead of hanging its service.
    hurried = amqp_settings.model_copy(update={"declare_timeout_seconds": 1e-6})
    with pytest.raises(BrokerUnavailable, match="declaring the topology took longer"):
        await declare(await connection.channel(), Topology(amqp_settings.prefix), catalog.names, hurried)


async def test_declare_specialist_matches_the_whole_topology(connection, amqp_settings, catalog):
    """One specialist's queues, declared alone (the operator), agree with ``declare`` (every service): same
    arguments (no PRECONDITION_FAILED either way) and the same bindings (a task for it reaches its queue)."""
    topology = Topology(amqp_settings.prefix)
    channel = await connection.channel()
    name = catalog.names[0]
    queues = await declare_specialist(channel, topology, name, amqp_settings)
    assert set(queues) == {*topology.specialist_queues(name), topology.quarantine_queue(name)}
    await declare(channel, topology, catalog.names, amqp_settings)
    await declare_specialist(channel, topology, name, amqp_settings)
    confirming = await connection.channel(publisher_confirms=True, on_return_raises=True)
    tasks = await confirming.get_exchange(topology.tasks_exchange)
    await tasks.publish(aio_pika.Message(b"{}"), routing_key=name, mandatory=True)

    async def routed() -> bool:
        queue = await confirming.declare_queue(topology.specialist_queue(name), passive=True)
        return queue.declaration_result.message_count == 1

    await eventually(routed, timeout=10, what="the task in the specialist's queue")
    other = AmqpSettings(url=amqp_settings.url, prefix=amqp_settings.prefix, delivery_limit=9)
    with pytest.raises(TopologyMismatch):
        await declare_specialist(await connection.channel(), topology, name, other)


async def test_the_dead_letter_queue_keeps_a_letter_through_many_requeues(connection, amqp_settings, catalog):
    """The dead-letter consumer requeues with ``reject`` while PostgreSQL is down; past any delivery limit
    a dead letter would be dropped (the queue has no dead-letter exchange). 25 requeues: more than RabbitMQ
    4.x's default limit of 20, and enough to catch a ``-1`` that 3.x reads as "drop at once"."""
    topology = Topology(amqp_settings.prefix)
    declared = await declare(await connection.channel(), topology, catalog.names, amqp_settings)
    dead_letters = declared.queues[topology.dead_letter_queue]
    channel = await connection.channel()
    await channel.default_exchange.publish(aio_pika.Message(b"{}"), routing_key=dead_letters.name)
    queue = await channel.get_queue(dead_letters.name, ensure=False)
    for _ in range(25):
        letter = await _get(queue)
        await letter.reject(requeue=True)
    last = await _get(queue)
    await last.ack()


async def test_each_priority_reaches_its_levels_queue_directly_and_through_the_delay_queues(
    connection, amqp_settings, catalog
):
    """RabbitMQ 3.x: one queue per level for the intake and each specialist; a retry comes back to its own
    level's queue."""
    topology = Topology(amqp_settings.prefix)
    declared = await declare(await connection.channel(), topology, catalog.names, amqp_settings)
    publisher = await Publisher.open(connection, amqp_settings)
    try:
        for level in Priority:
            intake = IntakeMessage(task_id=uuid.uuid4(), input="x", priority=level)
            await publish_then_mark(publisher, topology, intake, None)
            arrived = await _get(declared.queues[topology.intake_level_queue(level)])
            assert arrived.message_id == str(intake.task_id)
            await arrived.ack()
            later = IntakeMessage(task_id=uuid.uuid4(), input="x", priority=level)
            await publish_delayed(
                publisher, topology, work_target("general", publisher.level(level)), later, 0
            )
            arrived = await _get(declared.queues[topology.specialist_queue("general", level)])
            assert arrived.message_id == str(later.task_id)
            await arrived.ack()
        for name in topology.work_queue_names(catalog.names):
            assert await declared.queues[name].get(fail=False) is None, name
    finally:
        await publisher.close()

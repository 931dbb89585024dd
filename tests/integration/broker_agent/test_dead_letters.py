"""The dead-letter consumer against the real broker: what RabbitMQ 3.10 dead-letters, the agent records."""

from __future__ import annotations

import logging
from datetime import datetime

import aio_pika
import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.dead_letters.returns import MAX_RETURNS
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Usage, WorkMessage
from taskyard_common.task_errors import TaskErrorType, task_error
from tests.integration.broker_agent.conftest import status_is
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_rejected_work_message_is_recorded(run_agent, bus, routed_task, store):
    work = await routed_task("summarizer")
    queue = bus.topology.specialist_queue("summarizer")
    before = counter("taskyard_dead_letters_total", reason="rejected")
    by_specialist = counter("taskyard_tasks_dead_lettered_total", specialist="summarizer")
    async with run_agent():
        await bus.send_work(work)
        delivery = await bus.take(queue)
        await delivery.reject(requeue=False)  # a worker's verdict: this message can never run
        await eventually(status_is(store, work.task_id, TaskStatus.DEAD_LETTERED), what="the dead letter")
    task = await store.get(work.task_id)
    assert (task.dead_letter["reason"], task.dead_letter["queue"]) == ("rejected", queue)
    letter = await store.get_dead_letter(work.task_id)
    assert (letter.reason, letter.queue, letter.specialist) == ("rejected", queue, "summarizer")
    assert WorkMessage.model_validate(letter.message) == work  # kept for a replay
    [death] = letter.deaths
    assert (death["reason"], death["queue"], death["count"]) == ("rejected", queue, 1)
    assert datetime.fromisoformat(death["time"]).tzinfo is not None
    listed = await store.list_dead_letters(specialist="summarizer", reason="rejected", limit=10, after=None)
    assert [d.task_id for d in listed] == [work.task_id]
    assert counter("taskyard_dead_letters_total", reason="rejected") == before + 1
    assert counter("taskyard_tasks_dead_lettered_total", specialist="summarizer") == by_specialist + 1
    assert await bus.depth(bus.topology.dead_letter_queue) == 0


async def _reject_until_dead_lettered(bus, store, queue_name: str, task_id) -> int:
    """A worker that fails on the message every time: each reject with requeue counts one delivery."""
    queue = await bus.queue(queue_name)
    deliveries = 0

    async def poisoned() -> bool:
        nonlocal deliveries
        message = await queue.get(fail=False)
        if message is not None:
            deliveries += 1
            await message.reject(requeue=True)
        return await status_is(store, task_id, TaskStatus.DEAD_LETTERED)()

    await eventually(poisoned, timeout=60, what="the delivery limit to dead-letter the message")
    return deliveries


async def test_redelivered_past_the_delivery_limit_its_task_never_started(
    run_agent, bus, routed_task, store, amqp_settings
):
    # Workers that died holding it, never starting its task: it goes back to its queue MAX_RETURNS times
    # (a fresh copy, the returns counted in a header), then it is dead-lettered as before.
    work = await routed_task("researcher")
    queue_name = bus.topology.specialist_queue("researcher")
    before = counter("taskyard_dead_letters_total", reason="delivery_limit")
    returned = counter("taskyard_dead_letters_returned_total")
    async with run_agent():
        await bus.send_work(work)
        deliveries = await _reject_until_dead_lettered(bus, store, queue_name, work.task_id)
    assert deliveries == (amqp_settings.delivery_limit + 1) * (MAX_RETURNS + 1)
    assert counter("taskyard_dead_letters_returned_total") == returned + MAX_RETURNS
    letter = await store.get_dead_letter(work.task_id)
    assert (letter.reason, letter.queue, letter.specialist) == ("delivery_limit", queue_name, "researcher")
    assert letter.deaths[0]["reason"] == "delivery_limit"
    assert counter("taskyard_dead_letters_total", reason="delivery_limit") == before + 1


@pytest.mark.parametrize(
    ("ended_by_supervisor", "returns"),
    [
        # Its lease held (or run out): a poison that kills its worker once running, nobody saw the worker
        # die. Dead-lettered at the first limit.
        (False, 0),
        # Started by a worker child whose supervisor saw it die (the lease it ended), then handed back
        # unread by the children forked after it: returned like a task never started, MAX_RETURNS times.
        (True, MAX_RETURNS),
    ],
    ids=["its_task_started", "after_its_worker_child_died"],
)
async def test_redelivered_past_the_delivery_limit_once_started(
    run_agent, bus, routed_task, store, amqp_settings, ended_by_supervisor, returns
):
    work = await routed_task("researcher")
    queue_name = bus.topology.specialist_queue("researcher")
    returned = counter("taskyard_dead_letters_returned_total")
    await store.start(work.task_id, owner="worker-1", lease_seconds=600, attempt=1)
    if ended_by_supervisor:
        assert await store.expire_leases("worker-1") == 1
    async with run_agent():
        await bus.send_work(work)
        deliveries = await _reject_until_dead_lettered(bus, store, queue_name, work.task_id)
    assert deliveries == (amqp_settings.delivery_limit + 1) * (returns + 1)
    assert counter("taskyard_dead_letters_returned_total") == returned + returns
    assert (await store.get_dead_letter(work.task_id)).reason == "delivery_limit"


async def test_expired_message_is_recorded(run_agent, bus, routed_task, store):
    work = await routed_task("general")
    async with run_agent():
        # Per-message TTL (quorum queues honour it from RabbitMQ 3.10): it dies unconsumed.
        exchange = await bus.channel.get_exchange(bus.topology.tasks_exchange, ensure=False)
        body = work.model_dump_json().encode()
        await exchange.publish(
            aio_pika.Message(body, message_id=str(work.task_id), expiration=0.05), routing_key="general"
        )
        await eventually(status_is(store, work.task_id, TaskStatus.DEAD_LETTERED), what="the expiry")
    letter = await store.get_dead_letter(work.task_id)
    assert (letter.reason, letter.queue) == ("expired", bus.topology.specialist_queue("general"))


async def test_body_that_is_not_json_is_recorded_by_its_message_id(run_agent, bus, routed_task, store):
    work = await routed_task("summarizer")
    async with run_agent():
        exchange = await bus.channel.get_exchange(bus.topology.tasks_exchange, ensure=False)
        await exchange.publish(
            aio_pika.Message(b"\x00 not json", message_id=str(work.task_id)), routing_key="summarizer"
        )
        delivery = await bus.take(bus.topology.specialist_queue("summarizer"))
        await delivery.reject(requeue=False)
        await eventually(status_is(store, work.task_id, TaskStatus.DEAD_LETTERED), what="the dead letter")
    letter = await store.get_dead_letter(work.task_id)
    assert letter.message == {"raw": "\ufffd not json"}  # jsonb cannot hold NUL: replaced
    assert letter.specialist == "summarizer"  # from the queue's name


async def test_dead_letter_of_a_finished_task_is_only_counted(run_agent, bus, routed_task, store, caplog):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    work = await routed_task("summarizer")
    assert await store.fail(work.task_id, task_error(TaskErrorType.AGENT_ERROR, "x"), Usage())
    before = counter("taskyard_dead_letters_total", reason="rejected")
    async with run_agent():
        await bus.send_work(work)  # a stray duplicate, rejected by some worker
        delivery = await bus.take(bus.topology.specialist_queue("summarizer"))
        await delivery.reject(requeue=False)

        async def ignored() -> bool:
            return f"ignoring dead letter of task {work.task_id}" in caplog.text

        await eventually(ignored, timeout=15, what="the stray dead letter to be ignored")
    assert (await store.get(work.task_id)).status is TaskStatus.FAILED
    assert await store.get_dead_letter(work.task_id) is None
    assert counter("taskyard_dead_letters_total", reason="rejected") == before + 1
    assert await bus.depth(bus.topology.dead_letter_queue) == 0

"""Intake reliability: transient failures retried through delay queues, exhausted attempts, deadlines,
cancellation, and a database outage, against the real broker and database."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY
from pydantic import SecretStr

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import IntakeMessage
from taskyard_common.settings import DbSettings
from tests.integration.broker_agent.conftest import status_is
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


def counter(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_limits_pass_through_to_the_work_message(run_agent, bus, new_task):
    deadline = datetime.now(UTC) + timedelta(hours=1)
    message = await new_task("Please summarize this document", deadline=deadline, timeout_seconds=42.5)
    async with run_agent():
        await bus.send(message)
        work = await bus.wait_work("summarizer")
    assert (work.deadline, work.timeout_seconds) == (deadline, 42.5)


async def test_limits_missing_from_the_message_come_from_the_task(run_agent, bus, new_task):
    # An intake message re-sent by an older producer may lack them; the task row has them.
    deadline = datetime.now(UTC) + timedelta(hours=1)
    message = await new_task("Please summarize this document", deadline=deadline, timeout_seconds=7)
    bare = message.model_copy(update={"deadline": None, "timeout_seconds": None})
    async with run_agent():
        await bus.send(bare)
        work = await bus.wait_work("summarizer")
    assert (work.deadline, work.timeout_seconds) == (deadline, 7)


async def test_deadline_passed_before_routing_fails_as_expired(run_agent, bus, new_task, store, catalog):
    message = await new_task(
        "Please summarize this document", deadline=datetime.now(UTC) - timedelta(seconds=1)
    )
    async with run_agent():
        await bus.send(message)
        await eventually(status_is(store, message.task_id, TaskStatus.FAILED), what="the task to expire")
    task = await store.get(message.task_id)
    assert task.error.type == "expired" and task.routing is None
    for name in catalog.names:
        assert await bus.depth(bus.topology.specialist_queue(name)) == 0


async def test_cancelled_task_is_not_routed(run_agent, bus, new_task, store, catalog, caplog):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    message = await new_task("Please summarize this document")
    assert (await store.cancel(message.task_id)).status is TaskStatus.CANCELLED
    async with run_agent():
        await bus.send(message)

        async def ignored() -> bool:
            return f"ignoring intake message for task {message.task_id}: already cancelled" in caplog.text

        await eventually(ignored, timeout=15, what="the cancelled task to be skipped")
    for name in catalog.names:
        assert await bus.depth(bus.topology.specialist_queue(name)) == 0
    assert await bus.depth(bus.topology.intake_queue) == 0
    assert (await store.get(message.task_id)).status is TaskStatus.CANCELLED


async def test_full_specialist_queue_retries_then_fails_routing(
    run_agent, bus, new_task, store, amqp_settings, caplog
):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    message = await new_task("Please summarize this document")
    retries = counter("taskyard_intake_retries_total")
    async with run_agent(retry_base_seconds=0.05, max_attempts=2):
        held = await bus.fill("summarizer", amqp_settings.max_length)
        await bus.send(message)
        await eventually(status_is(store, message.task_id, TaskStatus.FAILED), what="routing to fail")
    task = await store.get(message.task_id)
    assert task.error.type == "routing_failed" and task.error.attempts == 2
    assert "PublishRejected" in task.error.message
    # Routed once (recorded before the publish); the second attempt re-published the stored decision.
    assert task.routing is not None and task.routing.specialist == "summarizer"
    assert counter("taskyard_intake_retries_total") == retries + 1
    assert f"routing task {message.task_id} failed (attempt 1 of 2: PublishRejected" in caplog.text
    assert await bus.depth(bus.topology.specialist_queue("summarizer")) == held
    assert await bus.depth(bus.topology.intake_queue) == 0


async def test_database_outage_retries_through_delay_queues_until_routed(
    run_agent, bus, new_task, store, db_settings: DbSettings, tcp_proxy, caplog
):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    proxy, url = await tcp_proxy(db_settings.url.get_secret_value())
    message = await new_task("Please summarize this document")
    retries = counter("taskyard_intake_retries_total")
    async with run_agent(
        db=db_settings.model_copy(update={"url": SecretStr(url)}), retry_base_seconds=0.05
    ) as agent:
        assert await agent.ready()
        await proxy.stop()  # the database goes away under the running agent

        async def not_ready() -> bool:
            return not await agent.ready()

        await eventually(not_ready, timeout=10, what="readiness to drop")
        await bus.send(message)

        async def second_attempt_failed() -> bool:
            return f"routing task {message.task_id} failed (attempt 2 of 10: StoreUnavailable" in caplog.text

        # Each failure sends the message through a delay queue with attempt + 1 and acks it.
        await eventually(second_attempt_failed, timeout=15, what="a second failed attempt")
        assert f"routing task {message.task_id} failed (attempt 1 of 10" in caplog.text
        await proxy.resume()
        work = await bus.wait_work("summarizer")
        await eventually(agent.ready, timeout=10, what="readiness to return")
    assert work.task_id == message.task_id
    assert (await store.get(message.task_id)).status is TaskStatus.QUEUED
    assert counter("taskyard_intake_retries_total") >= retries + 2
    assert await bus.depth(bus.topology.intake_queue) == 0
    assert await bus.depth(bus.topology.dead_letter_queue) == 0


async def test_database_down_through_every_attempt_is_dead_lettered_and_recorded_later(
    run_agent, bus, new_task, store, db_settings: DbSettings, tcp_proxy, caplog
):
    caplog.set_level(logging.INFO, logger="taskyard_broker_agent")
    proxy, url = await tcp_proxy(db_settings.url.get_secret_value())
    message = await new_task("Please summarize this document")
    async with run_agent(
        db=db_settings.model_copy(update={"url": SecretStr(url)}), retry_base_seconds=0.05, max_attempts=2
    ):
        await proxy.stop()
        await bus.send(message)

        async def waiting_in_dead_letters() -> bool:
            return f"could not record dead letter {message.task_id}" in caplog.text

        # The last attempt cannot even fail the task: requeued up to the delivery limit, dead-lettered,
        # and held by the dead-letter consumer until the database is back.
        await eventually(waiting_in_dead_letters, timeout=20, what="the dead letter to wait for the database")
        await proxy.resume()
        await eventually(
            status_is(store, message.task_id, TaskStatus.DEAD_LETTERED), timeout=15, what="the dead letter"
        )
    letter = await store.get_dead_letter(message.task_id)
    assert (letter.reason, letter.queue, letter.specialist) == (
        "delivery_limit",
        bus.topology.intake_queue,
        None,
    )
    assert IntakeMessage.model_validate(letter.message).attempt == 2
    assert await bus.depth(bus.topology.dead_letter_queue) == 0

"""The broker agent survives losing its broker connection: a TCP proxy in front of RabbitMQ cuts only the
agent's connection (the broker itself, shared with other tests, never restarts)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr
from yarl import URL

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.settings import AmqpSettings
from tests.integration.broker_agent.conftest import status_is
from tests.support.polling import eventually

pytestmark = pytest.mark.integration


async def test_agent_reconnects_and_consumes_again(
    run_agent, bus, new_task, routed_task, store, amqp_settings, tcp_proxy
):
    proxy, url = await tcp_proxy(amqp_settings.url.get_secret_value())
    # aio-pika reads the robust connection's retry pause from the URL (default 5 s).
    through_proxy = amqp_settings.model_copy(
        update={"url": SecretStr(str(URL(url).update_query(reconnect_interval="0.1")))}
    )
    assert isinstance(through_proxy, AmqpSettings)
    before = await new_task("Please summarize this document")
    after = await new_task("research this and cite sources: https://example.com")
    rejected = await routed_task("general")
    async with run_agent(amqp=through_proxy) as agent:
        await bus.send(before)
        assert (await bus.wait_work("summarizer")).task_id == before.task_id

        await proxy.stop()  # every connection of the agent is cut, new ones are refused

        async def not_ready() -> bool:
            return not await agent.ready()

        await eventually(not_ready, timeout=10, what="readiness to drop")
        await bus.send(after)  # waits in the intake queue meanwhile
        await proxy.resume()
        await eventually(agent.ready, timeout=20, what="the agent to reconnect")

        # Both consumers were restored: the intake message is routed, a new dead letter is recorded.
        assert (await bus.wait_work("researcher")).task_id == after.task_id
        await bus.send_work(rejected)
        await (await bus.take(bus.topology.specialist_queue("general"))).reject(requeue=False)
        await eventually(status_is(store, rejected.task_id, TaskStatus.DEAD_LETTERED), what="the dead letter")
    assert (await store.get(after.task_id)).status is TaskStatus.QUEUED

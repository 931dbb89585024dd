"""Stopping the queue sampler ends it even when a library swallows the cancellation.

The broker agent's shutdown once hung (tests/integration/broker_agent/test_intake.py::test_llm_answer_is_used
until the 120 s timeout): ``stop`` waited on a sampling task whose cancellation arrived inside a channel
call and came out as a "channel closed" error, which a round tolerates; the loop went on sleeping and
sampling forever."""

import asyncio

from taskyard_broker_agent.context import AgentContext
from taskyard_broker_agent.queue_metrics import QueueMetrics
from taskyard_broker_agent.routing.router import Router
from taskyard_broker_agent.settings import BrokerAgentSettings, ServiceSettings
from taskyard_common.catalog import Catalog
from taskyard_common.catalog_sources import LiveCatalog
from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_common.topology import Topology
from taskyard_common.webhooks import WebhookSettings


def offline_context(catalog: Catalog) -> AgentContext:
    """The agent's context without a store or a publisher: the sampler here never reaches either."""
    settings = ServiceSettings(
        amqp=AmqpSettings(),
        db=DbSettings(),
        llm=LlmSettings(base_url=None, api_key=None),
        catalog=CatalogSettings(),
        health=HealthSettings(),
        log=LogSettings(),
        broker=BrokerAgentSettings(),
        webhook=WebhookSettings(),
    )
    return AgentContext(
        settings=settings,
        live=LiveCatalog.fixed(catalog),
        topology=Topology("q"),
        store=None,  # type: ignore[arg-type]
        publisher=None,  # type: ignore[arg-type]
        router=Router.create(catalog, None),
    )


class SwallowingConnection:
    """``channel()`` that, when cancelled, raises what aio-pika raises for a closed channel."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.calls = 0

    async def channel(self):
        self.calls += 1
        self.entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            raise RuntimeError("<Channel> closed") from None


async def test_stop_ends_a_sampler_whose_cancellation_was_swallowed(catalog: Catalog):
    connection = SwallowingConnection()
    sampler = QueueMetrics(offline_context(catalog), connection, interval_seconds=0.01)  # type: ignore[arg-type]
    sampler.start()
    await asyncio.wait_for(connection.entered.wait(), 5)
    await asyncio.wait_for(sampler.stop(), 5)  # returned: it used to wait forever
    assert connection.calls == 1  # the rest of the round was not sampled either

"""The broker agent's queue collector: depth and consumers from the broker, oldest task age from the store."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.queue_metrics import QueueMetrics

pytestmark = pytest.mark.integration


def gauge(name: str, queue: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"queue": queue})


async def test_oldest_task_age_per_queue_comes_from_the_store(
    bus, store, new_task, routed_task, catalog, make_context
):
    topology = bus.topology
    work_queues = {name: topology.specialist_queue(name) for name in catalog.names}
    collector = QueueMetrics(make_context(bus.publisher), bus.connection)
    # Pre-initialised: the series exist before the first round.
    assert gauge("taskyard_queue_oldest_task_age_seconds", topology.intake_queue) == 0
    pending = await new_task("not routed yet")
    waiting = await routed_task("summarizer")
    for task_id, seconds in ((pending.task_id, 120), (waiting.task_id, 60)):
        await store.pool.execute(
            "UPDATE tasks SET updated_at = clock_timestamp() - make_interval(secs => $2) WHERE id = $1",
            task_id,
            seconds,
        )
    await collector.sample()
    assert gauge("taskyard_queue_oldest_task_age_seconds", topology.intake_queue) >= 120
    assert gauge("taskyard_queue_oldest_task_age_seconds", work_queues["summarizer"]) >= 60
    assert gauge("taskyard_queue_oldest_task_age_seconds", work_queues["general"]) == 0
    assert gauge("taskyard_queue_messages_ready", work_queues["general"]) == 0

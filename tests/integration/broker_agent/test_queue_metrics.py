"""The broker agent's queue collector: depth and consumers from the broker, oldest task age and the workflow
gauges from the store."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.queue_metrics import QueueMetrics
from taskyard_common.store import DEFAULT_TENANT, NewTask

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


async def test_workflow_gauges_come_from_the_store(bus, store, make_context):
    """Groups and chains in progress and the waiting parents, as the store counts them each round."""
    collector = QueueMetrics(make_context(bus.publisher), bus.connection)
    group_id = uuid.uuid4()
    children = [NewTask(id=uuid.uuid4(), input=f"part {i}", metadata={}, group_id=group_id, group_role="child")
                for i in range(2)]  # fmt: skip
    await store.create_group(group_id, tenant=DEFAULT_TENANT, tasks=children, reduce={}, metadata={})
    await store.create(
        NewTask(id=uuid.uuid4(), input="step 1", metadata={}, chain_rest=[{"instructions": "2"}])
    )
    parent = uuid.uuid4()
    await store.create(NewTask(id=parent, input="parent", metadata={}))
    await store.pool.execute("UPDATE tasks SET status = 'waiting' WHERE id = $1", parent)
    await collector.sample_workflows()
    sample = REGISTRY.get_sample_value
    assert sample("taskyard_workflows_in_progress", {"kind": "group"}) == 1
    assert sample("taskyard_workflows_in_progress", {"kind": "chain"}) == 1
    assert sample("taskyard_waiting_parents", {"kind": "delegation"}) == 1
    assert sample("taskyard_waiting_parents", {"kind": "multi_route"}) == 0
    await store.cancel_group(group_id)
    await collector.sample_workflows()
    assert sample("taskyard_workflows_in_progress", {"kind": "group"}) == 0

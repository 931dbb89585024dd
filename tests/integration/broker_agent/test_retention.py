"""The broker agent's retention loop on the real store: it removes what is due batch by batch, carries a
backlog to its next round, counts what it removed and says how far behind it is."""

import math
import uuid

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.retention import Retention
from taskyard_broker_agent.settings import RetentionSettings
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask
from taskyard_common.store.retention import RetentionStore

pytestmark = pytest.mark.integration


async def finished(store, tenant: str, days_ago: float) -> uuid.UUID:
    task = NewTask(id=uuid.uuid4(), input="x", metadata={}, tenant=tenant)
    await store.create(task)
    decision = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist="general", reason="r", confidence=1)
    assert await store.route(task.id, decision)
    await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
    assert await store.complete(task.id, {"output": "ok"}, Usage(), owner="w")
    await store.pool.execute(
        "UPDATE tasks SET created_at = clock_timestamp() - make_interval(days => $2),"
        " finished_at = clock_timestamp() - make_interval(days => $2) WHERE id = $1",
        task.id,
        days_ago,
    )
    return task.id


def removed(table: str) -> float:
    return REGISTRY.get_sample_value("taskyard_store_rows_removed_total", {"table": table}) or 0.0


async def test_a_round_removes_what_is_due_in_batches_and_leaves_a_backlog_for_the_next(store):
    old = [await finished(store, "default", 40) for _ in range(3)]
    kept = await finished(store, "default", 2)
    vip = await finished(store, "vip", 40)
    retention_store = RetentionStore(store.pool)
    await retention_store.set_retention("vip", 90)
    loop = Retention(retention_store, RetentionSettings(batch_size=1, max_batches=2, batch_pause_seconds=0))
    tasks_before, events_before = removed("tasks"), removed("task_events")

    first = await loop.run_once()
    assert (first.removed.tasks, first.batches, first.backlog) == (2, 2, True)
    assert first.overdue_seconds > 9 * 86400, "one task 10 days past its 30 left"
    second = await loop.run_once()
    assert (second.removed.tasks, second.backlog, second.overdue_seconds) == (1, False, 0.0)
    assert [await store.get(t) is None for t in (*old, kept, vip)] == [True, True, True, False, False]
    assert removed("tasks") - tasks_before == 3
    assert (
        removed("task_events") - events_before
        == second.removed.rows["task_events"] + first.removed.rows["task_events"]
        > 0
    )
    age = REGISTRY.get_sample_value("taskyard_store_oldest_row_age_seconds", {"table": "tasks"})
    assert age is not None and 39 * 86400 < age < 41 * 86400, "the vip task, kept for 90 days"
    assert math.isnan(
        REGISTRY.get_sample_value("taskyard_store_oldest_row_age_seconds", {"table": "idempotency_keys"})
    )

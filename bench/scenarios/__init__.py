"""One module per scenario; ``ALL`` is the order ``python -m bench`` runs them in."""

from __future__ import annotations

from bench.runner import Scenario
from bench.scenarios import (
    broker_limit,
    celery_baseline,
    fairness,
    large_store,
    llm_rpm,
    priority,
    store_layout,
    submit_path,
    taskyard_io,
    taskyard_noop,
    workflow_group,
)

ALL: tuple[Scenario, ...] = (
    broker_limit.SCENARIO,
    celery_baseline.SCENARIO,
    taskyard_noop.SCENARIO,
    taskyard_io.SCENARIO,
    submit_path.SCENARIO,
    workflow_group.SCENARIO,
    fairness.SCENARIO,
    priority.SCENARIO,
    llm_rpm.SCENARIO,
    large_store.SCENARIO,
    store_layout.SCENARIO,
)

"""Fixtures of the worker's integration tests: the test's side of the bus, queued tasks, worker settings."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskyard_common.catalog import Catalog
from taskyard_common.messages import Priority, RoutingDecision, RoutingMethod, TaskInput, WorkMessage
from taskyard_common.model_specs import ModelSpec
from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.records import NewTask
from taskyard_devkit.devllm import DevLlm
from taskyard_worker.settings import ServiceSettings, WorkerSettings
from tests.integration.worker.helpers import Bus, Harness, Submit


@pytest.fixture
async def bus(amqp_settings: AmqpSettings, catalog: Catalog, test_id: str) -> AsyncIterator[Bus]:
    async with Bus.open(amqp_settings, test_id, declare_for=catalog.names) as opened:
        yield opened


@pytest.fixture
def submit(store: PostgresTaskStore, bus: Bus) -> Submit:
    """Create a task, route it (pending → queued) and publish its work message, as the broker agent would."""

    async def submit(
        task_input: TaskInput = "Explain what a message queue is.",
        specialist: str = "general",
        *,
        publish: bool = True,
        deadline: datetime | None = None,
        timeout_seconds: float | None = None,
        priority: Priority = Priority.NORMAL,
    ) -> WorkMessage:
        task_id = uuid.uuid4()
        decision = RoutingDecision(
            method=RoutingMethod.EXPLICIT, specialist=specialist, reason="test", confidence=1.0
        )
        limits = {"deadline": deadline, "timeout_seconds": timeout_seconds}
        await store.create(
            NewTask(
                id=task_id, input=task_input, metadata={}, timeout_seconds=timeout_seconds, priority=priority
            )
        )
        assert await store.route(task_id, decision)
        if deadline is not None:
            # Set after routing: a deadline already past is the one a task reached while queued.
            await store.pool.execute("UPDATE tasks SET deadline = $2 WHERE id = $1", task_id, deadline)
        message = WorkMessage(
            task_id=task_id,
            specialist=specialist,
            input=task_input,
            routing=decision,
            priority=priority,
            **limits,
        )
        if publish:
            await bus.send_work(message)
        return message

    return submit


@pytest.fixture
def write_catalog(catalog: Catalog, tmp_path: Path) -> Callable[..., Path]:
    """A catalog file like specialists.yaml (same names, so the same queues) with the general
    specialist's fields overridden, e.g. a short backoff or a concurrency of 1, and ``models`` entries."""

    def write(models: tuple[ModelSpec, ...] = (), **general: Any) -> Path:
        specialists = [
            spec.model_copy(update=general) if spec.name == "general" else spec
            for spec in catalog.specialists
        ]
        changed = Catalog(fallback=catalog.fallback, specialists=tuple(specialists), models=models)
        # Validated again: model_copy does not, and a typo in an override must fail here, not in the worker.
        document = Catalog.model_validate(changed.model_dump(mode="json", by_alias=True))
        path = tmp_path / f"catalog-{uuid.uuid4().hex[:6]}.yaml"
        path.write_text(yaml.safe_dump(document.model_dump(mode="json", by_alias=True)), encoding="utf-8")
        return path

    return write


@pytest.fixture
def llm_model(devllm: DevLlm) -> str:
    """This test's own model name: its scripts and recorded requests are its own."""
    return devllm.new_model()


@pytest.fixture
def make_settings(
    amqp_settings: AmqpSettings, db_settings: DbSettings, devllm: DevLlm, llm_model: str, catalog_path: Path
) -> Callable[..., ServiceSettings]:
    def make(catalog: Path = catalog_path, **worker: Any) -> ServiceSettings:
        return ServiceSettings(
            amqp=amqp_settings,
            db=db_settings,
            llm=LlmSettings(base_url=devllm.base_url, api_key=None, model=llm_model, timeout_seconds=30),
            catalog=CatalogSettings(path=catalog),
            health=HealthSettings(port=0),
            log=LogSettings(),
            # In-process workers: no supervisor forks them or ends a crashed one's leases (its own tests:
            # test_worker_supervisor.py).
            worker=WorkerSettings(**{"shutdown_grace_seconds": 5, "supervisor": False, **worker}),
        )

    return make


@pytest.fixture
def settings(make_settings: Callable[..., ServiceSettings]) -> ServiceSettings:
    return make_settings()


@pytest.fixture
def harness(
    settings: ServiceSettings,
    store: PostgresTaskStore,
    bus: Bus,
    devllm: DevLlm,
    llm_model: str,
    submit: Submit,
    db_settings: DbSettings,
) -> Harness:
    return Harness(settings, store, bus, devllm, llm_model, submit, db_settings)

"""Fleet-wide LLM limits (``llm_limits``): the catalog's ``rpm`` kept by every worker together, against the
development model server answering 429 above the same rate; a longer wait defers the task uncharged."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.llm_limits import BURST_SECONDS
from taskyard_common.model_specs import ModelSpec
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, wait_status

pytestmark = pytest.mark.integration

RPM = 1200  # 20 a second: 60 tasks take a few seconds
TASKS = 60


async def test_workers_together_keep_under_the_models_rpm(
    harness: Harness, write_catalog: Callable[..., Path], make_settings: Callable[..., ServiceSettings]
) -> None:
    await harness.devllm.limit(harness.model, RPM)
    limited = ModelSpec(name=harness.model, rpm=RPM)
    settings = make_settings(write_catalog(models=(limited,), model=harness.model, concurrency=32))
    messages = [await harness.submit(f"Explain queue number {n}.") for n in range(TASKS)]
    # Two workers, each with its own reserve, drawing on one bucket in PostgreSQL.
    async with running_worker(settings, "general"), running_worker(settings, "general"):
        records = await asyncio.gather(
            *(wait_status(harness.store, m.task_id, TaskStatus.COMPLETED, within=60) for m in messages)
        )
    stats = await harness.devllm.stats(harness.model)
    assert stats["rate_limited"] == 0, stats
    assert stats["answered"] == TASKS
    # No attempt charged, nothing deferred.
    assert all(r.attempts == 1 and r.attempt_log == [] for r in records)
    # Past the bucket's burst, never faster than the limit (an upper bound: a slow machine only lowers it).
    elapsed = stats["last_at"] - stats["first_at"]
    burst = RPM / 60 * BURST_SECONDS
    assert TASKS - burst <= RPM / 60 * elapsed * 1.1


async def test_a_longer_wait_defers_the_task_uncharged(
    harness: Harness, write_catalog: Callable[..., Path], make_settings: Callable[..., ServiceSettings]
) -> None:
    # One request a minute: the second task would wait about a minute.
    limited = ModelSpec(name=harness.model, rpm=1)
    settings = make_settings(write_catalog(models=(limited,), model=harness.model))
    first = await harness.submit("Explain what a message queue is.")
    async with running_worker(settings, "general"):
        await harness.wait(first.task_id, TaskStatus.COMPLETED)
        second = await harness.submit("Explain what a topic exchange is.")
        record = await harness.wait(second.task_id, TaskStatus.RETRYING)
    [entry] = record.attempt_log
    assert entry["reason"] == "llm_rate_limited" and entry["charged"] is False
    assert entry["delay_seconds"] >= 2
    assert record.attempts == 1
    assert len(await harness.llm_requests()) == 1, "the deferred call was never sent"

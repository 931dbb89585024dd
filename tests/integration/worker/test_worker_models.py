"""The catalog's ``models`` entries as the worker uses them: the entry's endpoint, its prices."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.model_specs import ModelSpec
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness

pytestmark = pytest.mark.integration

# Nothing listens there: a call that went to the configured endpoint would fail.
UNREACHABLE = "http://127.0.0.1:9/v1"


async def test_a_model_entry_base_url_replaces_the_configured_endpoint(
    harness: Harness, write_catalog: Callable[..., Path], make_settings: Callable[..., ServiceSettings]
) -> None:
    entry = ModelSpec(
        name=harness.model,
        base_url=harness.devllm.base_url,
        input_price_per_mtok=2.0,
        output_price_per_mtok=6.0,
    )
    settings = make_settings(write_catalog(models=(entry,), model=harness.model, llm_retries=0))
    settings = settings.model_copy(update={"llm": settings.llm.model_copy(update={"base_url": UNREACHABLE})})
    message = await harness.submit()
    async with running_worker(settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.attempts == 1
    # Priced from the entry, and the answering model named.
    usage = record.usage
    assert usage.prompt_tokens > 0 and usage.model == harness.model
    assert usage.cost == pytest.approx((usage.prompt_tokens * 2.0 + usage.completion_tokens * 6.0) / 1e6)
    [request] = await harness.llm_requests()
    assert request["model"] == harness.model

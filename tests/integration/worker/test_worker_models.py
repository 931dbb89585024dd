"""The catalog's ``models`` entries as the worker uses them: the entry's endpoint, its prices, the tenant's
cost cap and the failover to a model's fallback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from taskyard_common import metrics
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.model_specs import ModelSpec
from taskyard_common.store.budgets import BudgetStore
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, counter

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


async def test_a_task_that_reached_its_max_cost_fails_before_its_next_call(
    harness: Harness, write_catalog: Callable[..., Path], make_settings: Callable[..., ServiceSettings]
) -> None:
    # Only completion tokens cost: 125,000 USD per million, and a tool call is 8 completion tokens to the
    # dev model, so each tool-calling step costs exactly 1 USD.
    entry = ModelSpec(name=harness.model, output_price_per_mtok=125_000)
    settings = make_settings(write_catalog(models=(entry,), model=harness.model))
    step = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]}
    await harness.script([step, step, {"content": "the answer"}])
    await BudgetStore(harness.store.pool).set("default", monthly_budget=None, max_cost_per_task=2.0)
    message = await harness.submit("Calculate twice, then answer.")
    async with running_worker(settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert record.error is not None and record.error.type == "budget_exceeded"
    assert record.attempts == 1
    # Two steps made and paid for; the third call never sent.
    assert len(await harness.llm_requests()) == 2
    assert record.usage.cost == pytest.approx(2.0) and record.cost == pytest.approx(2.0)


async def test_a_model_answering_500_sends_the_call_to_its_fallback(
    harness: Harness, write_catalog: Callable[..., Path], make_settings: Callable[..., ServiceSettings]
) -> None:
    fallback = harness.devllm.new_model()
    await harness.script([{"status": 500, "error_message": "down"}], repeat_last=True)
    models = (
        ModelSpec(name=harness.model, fallbacks=(fallback,), input_price_per_mtok=100.0),
        ModelSpec(name=fallback, input_price_per_mtok=1.0),
    )
    settings = make_settings(write_catalog(models=models, model=harness.model, llm_retries=1))
    before = counter(metrics.LLM_FAILOVERS, harness.model, "server_error")
    message = await harness.submit()
    async with running_worker(settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    # The primary tried twice (its in-step retry), then the fallback answered, once.
    assert len(await harness.llm_requests()) == 2
    [answered] = await harness.devllm.requests(fallback)
    assert answered["model"] == fallback
    assert record.attempts == 1 and record.attempt_log == []
    # Recorded on the step (and the task), priced at the fallback's price.
    assert record.usage.model == fallback
    assert record.usage.cost == pytest.approx(record.usage.prompt_tokens * 1.0 / 1e6)
    [step] = [e for e in await harness.store.events(message.task_id) if e.type == "llm_call"]
    assert step.data["model"] == fallback
    assert counter(metrics.LLM_FAILOVERS, harness.model, "server_error") == before + 1

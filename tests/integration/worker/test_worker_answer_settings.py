"""A specialist's answer settings: its ``output_schema`` (asked for the shape, its answer checked, corrected
once, stored as JSON with ``result.data``; never an answer outside the schema) and its ``temperature``.

The worker in-process against the real broker, database and development LLM (scripted over HTTP)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from taskyard_common.lifecycle import TaskStatus
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness

pytestmark = pytest.mark.integration

TICKET: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "technical", "shipping"]},
        "urgency": {"enum": ["low", "medium", "high", "critical"]},
        "summary": {"type": "string"},
    },
    "required": ["category", "urgency", "summary"],
}
TICKET_TEXT = "Ticket: I was charged twice for my subscription this month."


def counted(outcome: str) -> float:
    value = REGISTRY.get_sample_value(
        "taskyard_output_answers_total", {"specialist": "general", "outcome": outcome}
    )
    return value or 0.0


@pytest.fixture
def schema_settings(
    make_settings: Callable[..., ServiceSettings], write_catalog: Callable[..., Path]
) -> ServiceSettings:
    return make_settings(catalog=write_catalog(output_schema=TICKET))


async def test_a_valid_answer_is_stored_as_json_with_its_data(
    harness: Harness, schema_settings: ServiceSettings
) -> None:
    answer = {"category": "billing", "urgency": "high", "summary": "charged twice"}
    await harness.script([{"content": "```json\n" + json.dumps(answer) + "\n```"}])
    before = counted("valid")
    message = await harness.submit(TICKET_TEXT)
    async with running_worker(schema_settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None
    assert record.result["data"] == answer
    assert json.loads(record.result["output"]) == answer  # the object's JSON, the fence gone
    assert counted("valid") == before + 1
    (request,) = await harness.llm_requests()
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "general_answer", "schema": TICKET},
    }


async def test_an_answer_outside_the_schema_is_corrected_once(
    harness: Harness, schema_settings: ServiceSettings
) -> None:
    wrong = "Category: support\nUrgency: high\nSummary: charged twice"
    right = {"category": "billing", "urgency": "high", "summary": "charged twice"}
    await harness.script([{"content": wrong}, {"content": json.dumps(right)}])
    before = counted("corrected")
    message = await harness.submit(TICKET_TEXT)
    async with running_worker(schema_settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["data"] == right
    # The refused answer is not a step: one step, the valid answer.
    assert record.result["steps"] == 1
    assert counted("corrected") == before + 1
    _, second = await harness.llm_requests()
    reply, correction = second["messages"][-2:]
    assert reply == {"role": "assistant", "content": wrong}
    assert correction["role"] == "user" and "not JSON" in correction["content"]
    assert '"category"' in correction["content"]  # the schema, for a model that ignores response_format


async def test_an_answer_outside_the_schema_again_fails_the_task(
    harness: Harness, schema_settings: ServiceSettings
) -> None:
    await harness.script(
        [{"content": '{"category": "support", "urgency": "high", "summary": "x"}'}], repeat_last=True
    )
    before = counted("failed")
    message = await harness.submit(TICKET_TEXT)
    async with running_worker(schema_settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert record.result is None
    assert record.error is not None and record.error.type == "invalid_output"
    assert "category" in record.error.message and "support" in record.error.message
    assert counted("failed") == before + 1
    assert len(await harness.llm_requests()) == 2
    # Nothing of it was recorded as an answer: no checkpoint holds a final reply.
    assert all(
        step.message.get("tool_calls")
        for step in await harness.store.steps(message.task_id)
        if not step.call_id
    )


async def test_a_valid_answer_that_looks_like_a_text_call_is_an_answer(
    harness: Harness,
    make_settings: Callable[..., ServiceSettings],
    write_catalog: Callable[..., Path],
) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "arguments": {"type": "array"}},
        "required": ["name", "arguments"],
    }
    answer = {"name": "calculator", "arguments": ["x"]}
    await harness.script([{"content": json.dumps(answer)}])
    settings = make_settings(catalog=write_catalog(output_schema=schema))
    message = await harness.submit("Extract the tool name and its arguments from: calculator(x)")
    async with running_worker(settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["data"] == answer
    assert record.result["tool_calls"] == []


async def test_a_specialist_temperature_goes_with_every_call(
    harness: Harness,
    make_settings: Callable[..., ServiceSettings],
    write_catalog: Callable[..., Path],
) -> None:
    await harness.script([{"content": "an answer"}])
    settings = make_settings(catalog=write_catalog(temperature=0.1))
    message = await harness.submit("Say something")
    async with running_worker(settings, "general"):
        await harness.wait(message.task_id, TaskStatus.COMPLETED)
    (request,) = await harness.llm_requests()
    assert request["temperature"] == 0.1 and "response_format" not in request

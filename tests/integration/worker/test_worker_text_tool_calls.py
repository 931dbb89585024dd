"""Tool calls a model writes as text: read and run, or corrected once, never stored as the answer.

The worker in-process against the real broker, database and development LLM (scripted over HTTP)."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from taskyard_common.lifecycle import TaskStatus
from taskyard_worker.app import running_worker
from tests.integration.worker.helpers import Harness

pytestmark = pytest.mark.integration

# What the local model answered to "What is 12 * (3 + 4)?" in issue 20.
DOUBLED = '{{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}}'
QUESTION = "What is 12 * (3 + 4)?"


def counted(outcome: str) -> float:
    """``taskyard_text_tool_calls_total`` of the general specialist (the worker runs in this process)."""
    value = REGISTRY.get_sample_value(
        "taskyard_text_tool_calls_total", {"specialist": "general", "outcome": outcome}
    )
    return value or 0.0


async def test_a_doubled_brace_text_call_runs_the_calculator(harness: Harness) -> None:
    # Scripted: the text call; then the dev model's own reply to the tool result.
    await harness.script([{"content": DOUBLED}])
    before = counted("recovered")
    message = await harness.submit(QUESTION)
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None
    assert "84" in record.result["output"] and DOUBLED not in record.result["output"]
    assert record.result["tool_calls"] == [{"name": "calculator", "ok": True}]
    assert record.result["steps"] == 2
    assert counted("recovered") == before + 1
    _, second = await harness.llm_requests()
    assistant, tool = second["messages"][-2:]
    # The model reads its call back as a structured one, answered by the calculator.
    assert assistant["tool_calls"][0]["function"]["name"] == "calculator"
    assert tool["role"] == "tool" and tool["content"] == "84"


async def test_a_garbled_call_is_corrected_once_then_the_proper_call_runs(harness: Harness) -> None:
    garbled = '{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"'
    proper = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}]}
    await harness.script([{"content": garbled}, proper])
    before = counted("corrected")
    message = await harness.submit(QUESTION)
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None
    assert "84" in record.result["output"] and garbled not in record.result["output"]
    # The garbled reply is not a step: the proper call, then the answer.
    assert record.result["steps"] == 2
    assert counted("corrected") == before + 1
    _, corrected, _ = await harness.llm_requests()
    reply, correction = corrected["messages"][-2:]
    assert reply == {"role": "assistant", "content": garbled}
    assert correction["role"] == "user" and "could not be used" in correction["content"]
    assert "calculator" in correction["content"]


async def test_a_call_garbled_again_after_the_correction_fails_the_task(harness: Harness) -> None:
    await harness.script(
        [{"content": '{"name": "web_search", "arguments": {"query": "84"}}'}], repeat_last=True
    )
    before = counted("corrected"), counted("failed")
    message = await harness.submit(QUESTION)
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert (counted("corrected"), counted("failed")) == (before[0] + 1, before[1] + 1)
    assert record.result is None
    assert record.error is not None and record.error.type == "invalid_tool_call"
    assert "web_search" in record.error.message
    assert len(await harness.llm_requests()) == 2


async def test_an_answer_that_repeats_the_correction_is_never_stored(harness: Harness) -> None:
    # What the local model answered a support ticket after a correction (2026-12-02).
    echo = (
        "To use a tool, call it through the tool-calling interface (not as text) with one of these names:"
        " calculator, and its arguments as a JSON object. If you do not need a tool, answer in plain text."
    )
    await harness.script(
        [{"content": '{"name": "web_search", "arguments": {"query": "84"}}'}, {"content": echo}]
    )
    failed = counted("failed")
    message = await harness.submit(QUESTION)
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert record.result is None and counted("failed") == failed + 1
    assert record.error is not None and record.error.type == "invalid_tool_call"
    assert "repeated the correction" in record.error.message

"""A streaming specialist (``stream: true``) against the development LLM's streamed replies: its text reaches
the task's event log as ``token`` events, batched, before the step and the task are recorded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.metrics import LLM_STEP_RETRIES
from taskyard_common.store.events import TaskEvent
from taskyard_worker.app import running_worker
from taskyard_worker.settings import ServiceSettings
from tests.integration.worker.helpers import Harness, counter

pytestmark = pytest.mark.integration

ANSWER = " ".join(f"word{i}" for i in range(30)) + "."

Settings = Callable[..., ServiceSettings]


@pytest.fixture
def streaming(make_settings: Settings, write_catalog: Callable[..., Path]) -> Settings:
    """Worker settings for the general specialist with ``stream: true``."""

    def make(**worker: Any) -> ServiceSettings:
        return make_settings(catalog=write_catalog(stream=True), **worker)

    return make


async def events_of(harness: Harness, task_id: UUID) -> list[TaskEvent]:
    return await harness.store.events(task_id, limit=1000)


def seq(events: list[TaskEvent], kind: str) -> list[int]:
    return [e.seq for e in events if e.type == kind]


def text_after_last_restart(tokens: list[TaskEvent], step: int) -> str:
    """A step's text as a client rebuilds it: what came after the step's last restart marker."""
    text = ""
    for event in tokens:
        if event.data["step"] != step:
            continue
        text = "" if event.data.get("restart") else text + event.data["text"]
    return text


async def test_the_answer_is_streamed_in_batches_before_the_task_completes(
    harness: Harness, streaming: Settings
) -> None:
    # Chunks come much faster than the flush interval: the tokens go out in a few batches, not one per word.
    await harness.script([{"content": ANSWER, "chunk_delay_seconds": 0.01}])
    message = await harness.submit()
    async with running_worker(streaming(token_flush_seconds=1), "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == ANSWER
    events = await events_of(harness, message.task_id)
    tokens = [e for e in events if e.type == "token"]
    assert "".join(e.data["text"] for e in tokens) == ANSWER
    assert {e.data["step"] for e in tokens} == {1}
    assert 1 <= len(tokens) < len(ANSWER.split())
    # Every token is in the log before its step's llm_call event, and that before the task's completion.
    assert max(seq(events, "token")) < seq(events, "llm_call")[0] < seq(events, "completed")[0]
    [request] = await harness.llm_requests()
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    # The usage came with the stream's last chunk.
    assert record.usage.completion_tokens == len(ANSWER.split()) and record.usage.prompt_tokens > 0


async def test_a_streamed_tool_using_task_completes_with_its_checkpoints(
    harness: Harness, streaming: Settings
) -> None:
    message = await harness.submit("What is 12 * (3 + 4)?")
    async with running_worker(streaming(token_flush_seconds=0), "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and "84" in record.result["output"]
    assert record.result["steps"] == 2
    assert record.result["tool_calls"] == [{"name": "calculator", "ok": True}]
    steps = await harness.store.steps(message.task_id)
    assert [(s.step, bool(s.call_id)) for s in steps] == [(1, False), (1, True), (2, False)]
    call = steps[0].message["tool_calls"][0]
    assert call["function"] == {"name": "calculator", "arguments": '{"expression": "12 * (3 + 4)"}'}
    assert steps[1].call_id == call["id"] and steps[1].message["content"] == "84"
    # Only the answer is streamed: the tool call's reply sends no tokens.
    events = await events_of(harness, message.task_id)
    tokens = [e for e in events if e.type == "token"]
    assert {e.data["step"] for e in tokens} == {2}
    assert "".join(e.data["text"] for e in tokens) == record.result["output"]
    assert seq(events, "llm_call")[0] < min(seq(events, "token"))
    assert max(seq(events, "token")) < seq(events, "llm_call")[1]
    assert [r["stream"] for r in await harness.llm_requests()] == [True, True]


@pytest.mark.parametrize("fail_with", ["error", "disconnect"])
async def test_a_stream_broken_off_is_tried_again_in_the_step_after_a_restart_marker(
    harness: Harness, streaming: Settings, fail_with: str
) -> None:
    # The first try sends a few chunks (the tokens go out as they come), then breaks off.
    broken = {"content": ANSWER, "chunk_delay_seconds": 0.05, "fail_after_chunks": 6, "fail_with": fail_with}
    await harness.script([broken, {"content": ANSWER}])
    reason = "server_error" if fail_with == "error" else "connection_error"
    before = counter(LLM_STEP_RETRIES, "general", reason)
    message = await harness.submit()
    async with running_worker(streaming(token_flush_seconds=0), "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None and record.result["output"] == ANSWER
    assert record.attempts == 1 and record.attempt_log == [], "retried inside the step, no attempt charged"
    assert counter(LLM_STEP_RETRIES, "general", reason) == before + 1
    assert len(await harness.llm_requests()) == 2
    tokens = [e for e in await events_of(harness, message.task_id) if e.type == "token"]
    markers = [e for e in tokens if e.data.get("restart")]
    assert [m.data for m in markers] == [{"step": 1, "restart": True}]
    first_try = "".join(e.data["text"] for e in tokens if e.seq < markers[0].seq)
    assert first_try and ANSWER.startswith(first_try), "the first try's text went out before it broke"
    assert text_after_last_restart(tokens, 1) == ANSWER

"""The worker in-process against the real broker, database and development LLM (over HTTP, real client)."""

from __future__ import annotations

import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_devllm.replies import MARK
from taskyard_worker.app import running_worker
from tests.integration.worker.helpers import Harness, wait_outcome

pytestmark = pytest.mark.integration


async def test_completes_a_task_records_usage_and_acks(harness: Harness) -> None:
    message = await harness.submit({"question": "Explain what a message queue is.", "audience": "beginners"})
    async with running_worker(harness.settings, "general") as worker:
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
        await wait_outcome(worker, "completed")
    assert record.attempts == 1 and record.error is None and record.attempt_log == []
    assert record.lease_owner is None and record.lease_expires_at is None
    assert record.result is not None
    assert record.result["output"].startswith(MARK)
    assert record.result["steps"] == 1 and record.result["tool_calls"] == []
    assert record.usage.prompt_tokens > 0 and record.usage.completion_tokens > 0
    assert record.usage.total_tokens == record.usage.prompt_tokens + record.usage.completion_tokens
    # Acked: after the worker's channel closed, nothing came back to the queue, nothing was dead-lettered.
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.dead_letters() == 0
    [request] = await harness.llm_requests()
    system, user = request["messages"]
    assert system["role"] == "system" and "general assistant" in system["content"]
    # A structured input reaches the model as its JSON text.
    assert user == {
        "role": "user",
        "content": '{"audience": "beginners", "question": "Explain what a message queue is."}',
    }
    assert [t["function"]["name"] for t in request["tools"]] == ["calculator"]


async def test_calculator_round_trip(harness: Harness) -> None:
    message = await harness.submit("What is 12 * (3 + 4)?")
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
    assert record.result is not None
    assert "84" in record.result["output"]
    assert record.result["steps"] == 2
    assert record.result["tool_calls"] == [{"name": "calculator", "ok": True}]
    first, second = await harness.llm_requests()
    assert first["messages"][-1] == {"role": "user", "content": "What is 12 * (3 + 4)?"}
    assistant, tool = second["messages"][-2:]
    assert assistant["tool_calls"][0]["function"]["name"] == "calculator"
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "content": "84"}
    # Usage is summed over both calls (the dev model counts 8 completion tokens per tool call).
    assert record.usage.prompt_tokens > 0 and record.usage.completion_tokens > 8


async def test_llm_refusal_fails_the_task_and_acks(harness: Harness) -> None:
    await harness.script([{"status": 400, "error_message": "context too long"}])
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as worker:
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
        await wait_outcome(worker, "failed")
    assert record.error is not None
    # The provider's own words stay in the log: the tenant sees a fixed text per status.
    assert record.error.model_dump(mode="json") == {
        "type": "llm_error",
        "message": "LLM answered HTTP 400: the provider refused the request as invalid (for instance, longer "
        "than the model's context)",
    }
    assert "context too long" not in record.error.message
    assert record.result is None
    # Failed at once: no retry, no attempt charged beyond the first.
    assert record.attempts == 1 and record.attempt_log == [] and record.lease_owner is None
    # A failed task is a settled message, not a poison one: acked, not dead-lettered, not retried.
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.dead_letters() == 0
    assert len(await harness.llm_requests()) == 1


async def test_redelivered_message_for_a_finished_task_is_acked_without_running(harness: Harness) -> None:
    message = await harness.submit()
    async with running_worker(harness.settings, "general") as worker:
        done = await harness.wait(message.task_id, TaskStatus.COMPLETED)
        # The same message again, as the broker delivers it when an ack was lost.
        await harness.bus.send_work(message)
        await wait_outcome(worker, "duplicate")
    assert len(await harness.llm_requests()) == 1, "the LLM must not be called again"
    assert await harness.store.get(message.task_id) == done, "a finished task is not touched again"
    assert await harness.bus.work_depth() == 0
    assert await harness.bus.dead_letters() == 0


async def test_max_steps_exceeded_fails_the_task(harness: Harness) -> None:
    endless = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "1 + 1"}}]}
    await harness.script([endless], repeat_last=True)
    message = await harness.submit("Keep calculating.")
    async with running_worker(harness.settings, "general"):
        record = await harness.wait(message.task_id, TaskStatus.FAILED)
    assert record.error is not None
    assert record.error.type == "max_steps_exceeded"
    max_steps = 6  # the general specialist's, in specialists.yaml
    assert len(await harness.llm_requests()) == max_steps
    # The tokens of a failed task are recorded too.
    assert record.usage.total_tokens > 0

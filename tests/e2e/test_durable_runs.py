"""Durable agent runs end to end: a worker killed or stopped mid-task costs at most the step in progress,
and a provider blip costs nothing at all.

The development model server plays a five-step tool-using agent "by turn": the answer depends only on how
far the conversation got, so a resumed run gets the same answers again, and the server's request log counts
every LLM call a task cost.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import submit, wait_for_status
from tests.support.polling import eventually
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Short leases: a killed worker's task is taken over quickly.
WORKER_ENV = {"TASKYARD_WORKER_LEASE_SECONDS": "2", "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "30"}
TOOL_STEPS = 5


def five_step_agent(slow_step: int | None = None, delay: float = 3.0) -> list[dict[str, Any]]:
    """Five calculator steps, then the answer; ``slow_step`` (1-based) takes ``delay`` seconds."""
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": f"{n} * 7"}}]}
        for n in range(1, TOOL_STEPS + 1)
    ]
    steps.append({"content": "done after five steps"})
    if slow_step is not None:
        steps[slow_step - 1] = {**steps[slow_step - 1], "delay_seconds": delay}
    return steps


async def calls_for(devllm: DevLlm, model: str, task_input: str) -> int:
    """How many LLM calls the task with this input made (its user message names it)."""
    requests = await devllm.requests(model)
    return sum(
        any(m.get("role") == "user" and m.get("content") == task_input for m in r["messages"])
        for r in requests
    )


async def wait_calls(devllm: DevLlm, model: str, task_input: str, count: int) -> None:
    async def reached() -> bool:
        return await calls_for(devllm, model, task_input) >= count

    await eventually(reached, timeout=60, what=f"{count} LLM calls of {task_input!r}")


async def run_to_completion(client: httpx.AsyncClient, task_input: str) -> dict[str, Any]:
    created = await submit(client, {"input": task_input, "specialist": "general"})
    return await wait_for_status(client, created["id"], {"completed", "failed", "dead_lettered"}, timeout=90)


def resumed_from(document: dict[str, Any]) -> list[int]:
    return [e["resumed_from_step"] for e in document["attempt_history"] if e.get("event") == "resumed"]


async def test_a_clean_run_makes_one_call_per_step(cluster: Cluster, devllm: DevLlm):
    await devllm.script(cluster.model, five_step_agent(), by_turn=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        done = await run_to_completion(client, "durable run clean")
    assert done["status"] == "completed", done
    assert done["result"]["output"] == "done after five steps"
    assert done["result"]["steps"] == TOOL_STEPS + 1 and len(done["result"]["tool_calls"]) == TOOL_STEPS
    assert await calls_for(devllm, cluster.model, "durable run clean") == TOOL_STEPS + 1
    assert done["attempts"] == 1 and resumed_from(done) == []


async def test_sigkill_during_step_four_costs_one_repeated_call(cluster: Cluster, devllm: DevLlm):
    await devllm.script(cluster.model, five_step_agent(slow_step=4), by_turn=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    worker = await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        # A reference run of the same shape (same number of words): what the task should cost.
        clean = await run_to_completion(client, "durable run alpha")
        assert clean["status"] == "completed"
        created = await submit(client, {"input": "durable run bravo", "specialist": "general"})
        await wait_calls(devllm, cluster.model, "durable run bravo", 4)  # step 4's call is in flight
        cluster.kill(worker)
        await cluster.start_worker("general", **WORKER_ENV)
        done = await wait_for_status(
            client, created["id"], {"completed", "failed", "dead_lettered"}, timeout=90
        )
    assert done["status"] == "completed", done
    assert done["result"]["output"] == "done after five steps"
    calls = await calls_for(devllm, cluster.model, "durable run bravo")
    assert calls <= TOOL_STEPS + 2, f"{calls} LLM calls: more than the lost one repeated"
    assert resumed_from(done) == [3]
    # Each distinct call counted once: the same tokens as the run nobody interrupted.
    assert done["usage"] == clean["usage"]
    assert len(done["result"]["tool_calls"]) == TOOL_STEPS


async def test_sigterm_hands_the_task_back_after_its_step_and_the_next_worker_resumes(
    cluster: Cluster, devllm: DevLlm
):
    await devllm.script(cluster.model, five_step_agent(slow_step=3, delay=2), by_turn=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    worker = await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        created = await submit(client, {"input": "durable run charlie", "specialist": "general"})
        await wait_calls(devllm, cluster.model, "durable run charlie", 3)  # inside step 3
        assert worker.stop(timeout=60) == 0
        handed_back = await wait_for_status(client, created["id"], {"queued"})
        assert handed_back["attempts"] == 1, "a hand-back is not charged"
        assert await calls_for(devllm, cluster.model, "durable run charlie") == 3, "step 3 was finished"
        second = await cluster.start_worker("general", **WORKER_ENV)
        done = await wait_for_status(
            client, created["id"], {"completed", "failed", "dead_lettered"}, timeout=90
        )
        resumes = metric_sum(
            await cluster.metrics(second), "taskyard_task_resumes_total", specialist="general"
        )
    assert done["status"] == "completed", done
    assert await calls_for(devllm, cluster.model, "durable run charlie") == TOOL_STEPS + 1, "no call repeated"
    assert resumed_from(done) == [3] and done["attempts"] == 1
    assert resumes == 1


async def test_provider_errors_are_absorbed_inside_the_step(cluster: Cluster, devllm: DevLlm):
    await devllm.script(cluster.model, [{"status": 500}, {"status": 502}, {"content": "despite the blips"}])
    await cluster.start_api()
    await cluster.start_broker_agent()
    worker = await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        done = await run_to_completion(client, "two blips then an answer")
        metrics = await cluster.metrics(worker)
    assert done["status"] == "completed" and done["result"]["output"] == "despite the blips"
    assert done["attempts"] == 1 and done["attempt_history"] == [], "no attempt charged, none deferred"
    assert await calls_for(devllm, cluster.model, "two blips then an answer") == 3
    assert metric_sum(metrics, "taskyard_llm_step_retries_total", reason="server_error") == 2

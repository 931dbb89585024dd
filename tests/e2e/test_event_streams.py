"""Following a task's events end to end: a client reads the stream of a four-step tool-using task, leaves
after the third event, comes back with ``Last-Event-ID: 3`` and gets every later event exactly once, up to
``completed``; also when it submitted on one API process and streams from another (the wake-ups cross
processes through RabbitMQ).

The development model server plays the agent "by turn", with slow steps so that the task is still running
when the client comes back and later events arrive live.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import submit
from tests.support.scrape import metric_sum
from tests.support.sse import Frame, events_of

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TOOL_STEPS = 4
SSE = {"Accept": "text/event-stream"}
# A stream that should deliver does so well within this; far below a hang.
WITHIN = 60


def four_step_agent() -> list[dict[str, Any]]:
    """Four calculator steps, then the answer; steps 1 and 3 take a while."""
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": f"{n} * 6"}}]}
        for n in range(1, TOOL_STEPS + 1)
    ]
    steps.append({"content": "done after four steps"})
    for slow in (0, 2):
        steps[slow] = {**steps[slow], "delay_seconds": 1.0}
    return steps


async def read_events(
    client: httpx.AsyncClient, task_id: str, *, stop_after: int | None = None, **headers: str
) -> list[Frame]:
    """The stream's events until it ends, or until ``stop_after`` of them (then the client leaves)."""
    seen: list[Frame] = []
    async with client.stream("GET", f"/v1/tasks/{task_id}/events", headers={**SSE, **headers}) as stream:
        assert stream.status_code == 200
        async for frame in events_of(stream):
            seen.append(frame)
            if stop_after is not None and len(seen) == stop_after:
                break
    return seen


async def stored_events(client: httpx.AsyncClient, task_id: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        await client.get(f"/v1/tasks/{task_id}/events", params={"limit": 200})
    ).json()["items"]
    return items


async def leave_and_resume(
    submit_to: httpx.AsyncClient, stream_from: httpx.AsyncClient, task_input: str
) -> tuple[list[Frame], list[Frame], str]:
    created = await submit(submit_to, {"input": task_input, "specialist": "general"})
    first = await asyncio.wait_for(read_events(stream_from, created["id"], stop_after=3), WITHIN)
    rest = await asyncio.wait_for(read_events(stream_from, created["id"], **{"Last-Event-ID": "3"}), WITHIN)
    return first, rest, created["id"]


def check_the_story(first: list[Frame], rest: list[Frame], stored: list[dict[str, Any]]) -> None:
    assert [(f.seq, f.event) for f in first] == [(1, "accepted"), (2, "routed"), (3, "attempt_started")]
    seqs = [f.seq for f in rest]
    assert seqs == list(range(4, 4 + len(rest))), f"every later event exactly once, in order: {seqs}"
    assert (
        rest[-1].event == "completed" and rest[-1].json["data"]["result"]["output"] == "done after four steps"
    )
    kinds = [f.event for f in rest]
    assert kinds.count("tool_call") == TOOL_STEPS and kinds.count("llm_call") == TOOL_STEPS + 1
    # What the stream said is what the log holds: the same events, with the same data.
    assert [f.json for f in first + rest] == stored


async def test_a_client_that_leaves_resumes_after_last_event_id(cluster: Cluster, devllm: DevLlm):
    await devllm.script(cluster.model, four_step_agent(), by_turn=True)
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("general")
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=WITHIN) as client:
        first, rest, task_id = await leave_and_resume(client, client, "stream me: four steps")
        check_the_story(first, rest, await stored_events(client, task_id))
        assert (await client.get(f"/v1/tasks/{task_id}")).json()["status"] == "completed"


async def test_the_stream_of_a_task_submitted_on_another_api_process(cluster: Cluster, devllm: DevLlm):
    await devllm.script(cluster.model, four_step_agent(), by_turn=True)
    await cluster.start_api()
    submitting_url = cluster.api_url
    # The streaming process reads the store only once a minute by itself: the events reach it as wake-ups
    # from the other processes, through RabbitMQ.
    await cluster.start_api(TASKYARD_API_WATCH_POLL_SECONDS="60")
    streaming_url = cluster.api_url
    assert streaming_url != submitting_url
    await cluster.start_broker_agent()
    await cluster.start_worker("general")
    async with (
        httpx.AsyncClient(base_url=submitting_url, timeout=WITHIN) as submitting,
        httpx.AsyncClient(base_url=streaming_url, timeout=WITHIN) as streaming_client,
    ):
        first, rest, task_id = await leave_and_resume(submitting, streaming_client, "stream me elsewhere")
        check_the_story(first, rest, await stored_events(submitting, task_id))
        metrics = (await streaming_client.get("/metrics")).text
    assert metric_sum(metrics, "taskyard_event_streams_open") == 0, "both streams closed"

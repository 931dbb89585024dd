"""Failure handling end to end: poison messages, worker crashes, SIGTERM, replay, cancellation, deadlines."""

from __future__ import annotations

import os
import signal
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.procfs import children, connection_owner
from tests.support.api_client import count_with_status, submit, task, wait_for_status
from tests.support.polling import eventually
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Short leases so that a dead worker's tasks are taken over quickly.
WORKER_ENV = {"TASKYARD_WORKER_LEASE_SECONDS": "2", "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "10"}


async def slow_replies(devllm: DevLlm, model: str, seconds: float) -> None:
    """Every reply of ``model`` takes ``seconds``: tasks are in flight long enough to be hit by a crash."""
    await devllm.script(model, [{"delay_seconds": seconds, "content": "done slowly"}], repeat_last=True)


async def test_poison_message_is_dead_lettered_while_healthy_ones_complete(cluster: Cluster, devllm: DevLlm):
    await slow_replies(devllm, cluster.model, 0.3)
    await cluster.start_api()
    await cluster.start_broker_agent()
    marker = f"POISON-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        healthy = [
            await submit(client, {"input": f"healthy {i}", "specialist": "general"}) for i in range(25)
        ]
        poison = await submit(
            client, {"input": f"{marker}: this request kills its worker", "specialist": "general"}
        )
        healthy += [
            await submit(client, {"input": f"healthy {i}", "specialist": "general"}) for i in range(25, 50)
        ]

        # The test plays the poison: whenever a worker process sends the marked request to the LLM, it dies
        # (the worker child that made the call; its supervisor forks the next one).
        kills = 0
        worker = await cluster.start_worker("general", **WORKER_ENV)
        llm_port = urlsplit(devllm.base_url).port or 80

        async def poison_seen() -> int:
            return sum(marker in str(r["messages"]) for r in await devllm.requests(cluster.model))

        async def settled() -> bool:
            nonlocal kills
            if await poison_seen() > kills:
                callers = await devllm.callers(cluster.model)
                caller = next(address for name, address in callers.items() if marker in name)
                port = int(caller.rsplit(":", 1)[1])
                pid = connection_owner(port, llm_port, children(worker.proc.pid))
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                kills += 1
            document = await task(client, poison["id"])
            return (
                document["status"] == "dead_lettered" and await count_with_status(client, "completed") == 50
            )

        await eventually(settled, timeout=150, what="the poison task dead-lettered and 50 completed")

        # Two kills: one among the healthy tasks in the main child, one alone in a quarantine child, which
        # proves it poison: rejected there (dead-lettered) instead of run again up to the delivery limit.
        document = await task(client, poison["id"])
        assert document["dead_letter"]["reason"] == "rejected", document["dead_letter"]
        assert document["dead_letter"]["deaths"], "the death history from the message headers is kept"
        assert kills == 2
        for submitted in healthy:
            assert (await task(client, submitted["id"]))["status"] == "completed"
        letters = (await client.get("/v1/dead-letters", params={"reason": "rejected"})).json()["items"]
        assert [letter["task_id"] for letter in letters] == [poison["id"]]

        # An operator replays it once the cause is fixed (here: the test stops killing).
        replay = await client.post(f"/v1/dead-letters/{poison['id']}/replay")
        assert replay.status_code == 202, replay.text
        replayed = await wait_for_status(client, poison["id"], {"completed", "dead_lettered", "failed"})
        assert replayed["status"] == "completed"


async def test_worker_killed_mid_run_every_task_completes_exactly_once(cluster: Cluster, devllm: DevLlm):
    await slow_replies(devllm, cluster.model, 1.0)
    await cluster.start_api()
    await cluster.start_broker_agent()
    first = await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        ids = [
            (await submit(client, {"input": f"task {i}", "specialist": "general"}))["id"] for i in range(20)
        ]

        async def all_running() -> bool:
            return await count_with_status(client, "running") == 20

        await eventually(all_running, timeout=30, what="20 tasks running at once")
        cluster.kill(first)
        second = await cluster.start_worker("general", **WORKER_ENV)

        async def all_completed() -> bool:
            return await count_with_status(client, "completed") == 20

        await eventually(all_completed, timeout=120, what="20 tasks completed after the crash")
        for task_id in ids:
            document = await task(client, task_id)
            assert document["status"] == "completed" and document["result"]["output"]
        # Exactly once: one completion in each task's history, and 20 recorded by the surviving worker (its
        # metrics port merges all its children's: the quarantine children ran the tasks in flight at the crash).
        for task_id in ids:
            events = (await client.get(f"/v1/tasks/{task_id}/events")).json()["items"]
            assert [e["type"] for e in events].count("completed") == 1
        metrics = await cluster.metrics(second)
        assert metric_sum(metrics, "taskyard_tasks_finished_total", status="completed") == 20


async def test_sigterm_lets_in_flight_tasks_finish_without_charging_attempts(
    cluster: Cluster, devllm: DevLlm
):
    await slow_replies(devllm, cluster.model, 1.5)
    await cluster.start_api()
    await cluster.start_broker_agent()
    worker = await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        ids = [
            (await submit(client, {"input": f"task {i}", "specialist": "general"}))["id"] for i in range(5)
        ]

        async def all_running() -> bool:
            return await count_with_status(client, "running") == 5

        await eventually(all_running, timeout=30, what="5 tasks running")
        assert worker.stop(timeout=30) == 0
        for task_id in ids:
            document = await task(client, task_id)
            assert document["status"] == "completed", document
            assert document["attempts"] == 1


async def test_sigterm_past_the_grace_hands_tasks_back_uncharged(cluster: Cluster, devllm: DevLlm):
    await slow_replies(devllm, cluster.model, 20)
    await cluster.start_api()
    await cluster.start_broker_agent()
    env = {**WORKER_ENV, "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "0.5"}
    worker = await cluster.start_worker("general", **env)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        ids = [
            (await submit(client, {"input": f"task {i}", "specialist": "general"}))["id"] for i in range(3)
        ]

        async def all_running() -> bool:
            return await count_with_status(client, "running") == 3

        await eventually(all_running, timeout=30, what="3 tasks running")
        assert worker.stop(timeout=30) == 0
        for task_id in ids:
            document = await task(client, task_id)
            assert document["status"] == "queued", document
        await devllm.script(cluster.model, [{"content": "quick now"}], repeat_last=True)
        await cluster.start_worker("general", **env)
        for task_id in ids:
            document = await wait_for_status(client, task_id, {"completed", "failed", "dead_lettered"})
            assert document["status"] == "completed"
            assert document["attempts"] == 1, "a handed-back task is not charged an attempt"


async def test_cancel_queued_and_running_tasks(cluster: Cluster, devllm: DevLlm):
    await slow_replies(devllm, cluster.model, 30)
    await cluster.start_api()
    await cluster.start_broker_agent()
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        # No worker yet: the task waits in its queue.
        waiting = await submit(client, {"input": "wait for me", "specialist": "general"})
        await wait_for_status(client, waiting["id"], {"queued"})
        response = await client.post(f"/v1/tasks/{waiting['id']}/cancel")
        assert response.status_code == 200 and response.json()["status"] == "cancelled"

        await cluster.start_worker("general", **WORKER_ENV)
        running = await submit(client, {"input": "a long one", "specialist": "general"})
        await wait_for_status(client, running["id"], {"running"})
        response = await client.post(f"/v1/tasks/{running['id']}/cancel")
        assert response.status_code == 202, response.text
        # A control message reaches the worker holding it: cancelled within 2 seconds.
        await wait_for_status(client, running["id"], {"cancelled"}, timeout=2)
        assert (await client.post(f"/v1/tasks/{running['id']}/cancel")).status_code in (200, 409)
        # The cancelled queued task was skipped when picked up: it never ran.
        assert (await task(client, waiting["id"]))["started_at"] is None


async def test_deadline_passed_before_start_fails_as_expired(cluster: Cluster, devllm: DevLlm):
    await cluster.start_api()
    await cluster.start_broker_agent()
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        deadline = (datetime.now(UTC) + timedelta(seconds=2)).isoformat()
        doomed = await submit(client, {"input": "too late", "specialist": "general", "deadline": deadline})
        await wait_for_status(client, doomed["id"], {"queued"})

        async def past_deadline() -> bool:
            return datetime.now(UTC) > datetime.fromisoformat(deadline)

        await eventually(past_deadline, timeout=5, what="the deadline to pass")
        await cluster.start_worker("general", **WORKER_ENV)
        document = await wait_for_status(client, doomed["id"], {"failed", "completed"})
        assert document["status"] == "failed"
        assert document["error"]["type"] == "expired"
        assert document["started_at"] is None


async def test_transient_llm_errors_are_retried_through_delay_queues(cluster: Cluster, devllm: DevLlm):
    # Each attempt's call fails as often as the step tries it (llm_retries: 2, so 3 tries), twice over: only
    # then does an attempt fail and its retry go through the delay queues.
    failing_attempt = [{"status": 500}, {"status": 503}, {"status": 502}]
    await devllm.script(cluster.model, [*failing_attempt, *failing_attempt, {"content": "third time lucky"}])
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("summarizer", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        submitted = await submit(client, {"input": "summarize this", "specialist": "summarizer"})
        document = await wait_for_status(
            client, submitted["id"], {"completed", "failed", "dead_lettered"}, timeout=90
        )
        assert document["status"] == "completed", document
        assert document["attempts"] == 3
        history = document["attempt_history"]
        assert [entry["attempt"] for entry in history] == [1, 2]
        assert all(entry["charged"] and entry["delay_seconds"] >= 1 for entry in history)

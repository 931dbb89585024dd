"""End to end: 100 tasks over HTTP through the API, the broker agent and the specialist workers."""

from __future__ import annotations

import asyncio
import itertools

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from tests.support.polling import eventually
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# Requests the (deterministic) development model routes by their words; one family per specialist.
ROUTED = {
    "summarizer": [
        "Summarize this meeting transcript into key points: the team agreed to ship on Friday.",
        "Please condense this long report into a short summary and a TL;DR.",
    ],
    "support-analyst": [
        "Customer ticket: my refund for order 4411 never arrived and I am angry.",
        "Support complaint: the login page shows an error and the customer cannot access the account.",
    ],
    "researcher": [
        "Research which sources document quorum queues and cite the documentation.",
        "Investigate and compare what the docs say, with citations to each source.",
    ],
    "general": [
        "Brainstorm three ideas for a team offsite.",
        "Explain why the sky looks blue, briefly.",
    ],
}


async def submit(client: httpx.AsyncClient, body: dict) -> dict:
    response = await client.post("/v1/tasks", json=body)
    assert response.status_code == 202, response.text
    document = response.json()
    assert response.headers["location"] == f"/v1/tasks/{document['id']}"
    assert document["status"] in ("pending", "queued", "running", "completed")
    return document


async def test_one_hundred_tasks_complete_with_the_right_routing(cluster: Cluster, catalog):
    api = await cluster.start_api()
    broker = await cluster.start_broker_agent()
    workers = [await cluster.start_worker(name) for name in catalog.names]
    expected: dict[str, tuple[str, str]] = {}  # id -> (method, specialist)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        bodies = []
        names = itertools.cycle(catalog.names)
        for i in range(40):
            name = next(names)
            bodies.append(
                (
                    {"input": f"Explicit task {i} for {name}", "specialist": name, "metadata": {"n": str(i)}},
                    ("explicit", name),
                )
            )
        families = itertools.cycle([(name, text) for name, texts in ROUTED.items() for text in texts])
        for i in range(60):
            name, text = next(families)
            body = {"input": text} if i % 3 else {"input": {"request": text, "n": i}}
            bodies.append((body, ("llm", name)))

        semaphore = asyncio.Semaphore(20)

        async def one(body: dict, want: tuple[str, str]) -> None:
            async with semaphore:
                document = await submit(client, body)
            expected[document["id"]] = want

        await asyncio.gather(*(one(b, w) for b, w in bodies))
        assert len(expected) == 100

        async def all_completed() -> bool:
            for status in ("failed",):
                failed = (await client.get("/v1/tasks", params={"status": status, "limit": 200})).json()
                assert not failed["items"], f"tasks failed: {failed['items'][:2]}\n{cluster.logs()}"
            page = (await client.get("/v1/tasks", params={"status": "completed", "limit": 200})).json()
            return len(page["items"]) == 100

        await eventually(all_completed, timeout=120, what="100 completed tasks")

        for task_id, (method, specialist) in expected.items():
            document = (await client.get(f"/v1/tasks/{task_id}")).json()
            assert document["status"] == "completed"
            assert document["routing"]["method"] == method, document
            assert document["specialist"] == specialist, document
            assert document["result"]["output"], document
            assert document["usage"]["total_tokens"] > 0
            assert document["attempts"] == 1
            assert document["created_at"] <= document["started_at"] <= document["finished_at"]
            result = await client.get(f"/v1/tasks/{task_id}/result")
            assert result.status_code == 200

    assert metric_sum(await cluster.metrics(api), "taskyard_tasks_submitted_total") == 100
    broker_metrics = await cluster.metrics(broker)
    assert metric_sum(broker_metrics, "taskyard_routing_decisions_total", method="explicit") == 40
    assert metric_sum(broker_metrics, "taskyard_routing_decisions_total", method="llm") == 60
    completed = 0.0
    for worker in workers:
        completed += metric_sum(
            await cluster.metrics(worker), "taskyard_tasks_finished_total", status="completed"
        )
    assert completed == 100

"""End to end, real processes: a task with a not_before starts no earlier; a cron schedule makes exactly one
task per occurrence across two broker agents; missed occurrences collapse into one run after an outage;
a paused schedule makes nothing, and pause, resume and delete work over HTTP.

The every-minute test waits for three real minute boundaries (cron's finest step), up to about three
minutes: schedules have no seconds field, so it cannot be shortened honestly. It starts the services first,
so only the wait for the boundaries remains.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from taskyard_common.store import PostgresTaskStore
from taskyard_devkit.cluster import Cluster
from tests.support.polling import eventually
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPECIALIST = "summarizer"
FAST_SCHEDULER = {"TASKYARD_BROKER_SCHEDULER_INTERVAL_SECONDS": "1"}


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def schedule_tasks(client: httpx.AsyncClient, schedule_id: str) -> list[dict[str, Any]]:
    """Every task of the tenant the schedule created (its metadata names it)."""
    found, cursor = [], None
    while True:
        params = {"limit": 200, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/tasks", params=params)).json()
        found += [t for t in page["items"] if t["metadata"].get("schedule_id") == schedule_id]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


async def early_in_a_minute() -> None:
    """Start a step that must not meet a minute boundary before its schedulers are stopped."""

    async def early() -> bool:
        return datetime.now(UTC).second < 40

    await eventually(early, timeout=25, what="the first 40 seconds of a minute")


async def test_a_task_with_a_not_before_starts_no_earlier(cluster: Cluster):
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker(SPECIALIST)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        not_before = datetime.now(UTC) + timedelta(seconds=5)
        body = {"input": "Summarize: the launch moved to May.", "specialist": SPECIALIST}
        response = await client.post("/v1/tasks", json={**body, "not_before": rfc3339(not_before)})
        assert response.status_code == 202, response.text
        doc = response.json()
        assert doc["status"] == "scheduled"

        async def completed(task_id: str) -> bool:
            current = (await client.get(f"/v1/tasks/{task_id}")).json()
            assert current["status"] not in ("failed", "dead_lettered", "cancelled"), current
            return current["status"] == "completed"

        await eventually(lambda: completed(doc["id"]), timeout=60, what="the scheduled task to complete")

        done = (await client.get(f"/v1/tasks/{doc['id']}")).json()
        events = (await client.get(f"/v1/tasks/{doc['id']}/events")).json()["items"]
    # The store's clock decides both: routed, then started, never before not_before.
    stored_not_before = parse(done["not_before"])
    assert parse(done["started_at"]) >= stored_not_before
    by_type = {e["type"]: e for e in events}
    assert parse(by_type["accepted"]["data"]["not_before"]) == stored_not_before
    assert parse(by_type["routed"]["at"]) >= stored_not_before
    assert [e["type"] for e in events][:3] == ["accepted", "routed", "attempt_started"]
    # Its message waited in the delay queues, uncharged: one attempt.
    assert done["attempts"] == 1


@pytest.mark.timeout(330)
async def test_an_every_minute_schedule_makes_one_task_per_minute_across_two_broker_agents(
    cluster: Cluster,
):
    await cluster.start_api()
    agents = [await cluster.start_broker_agent(**FAST_SCHEDULER) for _ in range(2)]
    await cluster.start_worker(SPECIALIST)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        body = {
            "cron": "* * * * *",
            "overlap": "allow",
            "task": {"input": "Summarize the minute.", "specialist": SPECIALIST, "metadata": {"k": "v"}},
        }
        created = await client.post("/v1/schedules", json=body)
        assert created.status_code == 201, created.text
        schedule = created.json()
        first = parse(schedule["next_run_at"])
        occurrences = [first + timedelta(minutes=n) for n in range(3)]
        wanted = {rfc3339(o) for o in occurrences}

        async def three_minutes_made() -> bool:
            tasks = await schedule_tasks(client, schedule["id"])
            return wanted <= {t["metadata"]["schedule_occurrence"] for t in tasks}

        await eventually(three_minutes_made, timeout=240, what="three occurrences' tasks")
        tasks = await schedule_tasks(client, schedule["id"])
        later = await client.get(f"/v1/schedules/{schedule['id']}")

    # One task per occurrence, never two, whichever agent made it; nothing before the first occurrence.
    labels = [t["metadata"]["schedule_occurrence"] for t in tasks]
    assert len(labels) == len(set(labels)), labels
    assert all(parse(label) >= first for label in labels)
    made = [t for t in tasks if t["metadata"]["schedule_occurrence"] in wanted]
    assert len(made) == 3
    for task in made:
        assert task["metadata"]["schedule_id"] == schedule["id"] and task["metadata"]["k"] == "v"
        assert task["requested_specialist"] == SPECIALIST
        # Created once its occurrence had come (the database's clock), not before.
        assert parse(task["created_at"]) >= parse(task["metadata"]["schedule_occurrence"])
    doc = later.json()
    assert doc["last_outcome"] == "created" and doc["last_task_id"] in {t["id"] for t in tasks}
    assert parse(doc["next_run_at"]) > parse(doc["last_run_at"])
    created_total = 0.0
    for agent in agents:
        created_total += metric_sum(await cluster.metrics(agent), "taskyard_schedule_tasks_created_total")
    assert created_total == len(tasks)


async def test_missed_occurrences_run_once_after_the_schedulers_were_away(
    cluster: Cluster, store: PostgresTaskStore
):
    await cluster.start_api()
    first_agent = await cluster.start_broker_agent(**FAST_SCHEDULER)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        await early_in_a_minute()
        body = {"cron": "* * * * *", "task": {"input": "Summarize the minute.", "specialist": SPECIALIST}}
        schedule = (await client.post("/v1/schedules", json=body)).json()
        # The schedulers go away; meanwhile three occurrences (and the current one) pass.
        first_agent.stop()
        behind = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=3)
        await store.pool.execute(
            "UPDATE schedules SET next_run_at = $1 WHERE id = $2", behind, uuid.UUID(schedule["id"])
        )
        agent = await cluster.start_broker_agent(**FAST_SCHEDULER)

        async def ran() -> bool:
            return (await client.get(f"/v1/schedules/{schedule['id']}")).json()["last_outcome"] is not None

        await eventually(ran, timeout=30, what="the schedule's first run after the outage")
        doc = (await client.get(f"/v1/schedules/{schedule['id']}")).json()
        tasks = await schedule_tasks(client, schedule["id"])
    last_run = parse(doc["last_run_at"])
    # One task for all the missed occurrences: the latest one's.
    caught_up = [t for t in tasks if parse(t["metadata"]["schedule_occurrence"]) <= last_run]
    assert len(caught_up) == 1, tasks
    assert caught_up[0]["metadata"]["schedule_occurrence"] == rfc3339(last_run)
    assert last_run >= behind + timedelta(minutes=3)
    assert parse(doc["next_run_at"]) == last_run + timedelta(minutes=1)
    missed = metric_sum(
        await cluster.metrics(agent), "taskyard_schedule_occurrences_skipped_total", reason="missed"
    )
    assert missed >= 3


async def test_pause_resume_and_delete_over_http(cluster: Cluster, store: PostgresTaskStore):
    await cluster.start_api()
    agent = await cluster.start_broker_agent(**FAST_SCHEDULER)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        # No worker runs: the sentinel's task stays pending, so its next occurrence is skipped (overlap skip),
        # and no minute boundary may come before the resumed schedule is deleted.
        await early_in_a_minute()
        body = {"cron": "* * * * *", "task": {"input": "Summarize the minute.", "specialist": SPECIALIST}}
        paused = (await client.post("/v1/schedules", json=body)).json()
        sentinel = (await client.post("/v1/schedules", json=body)).json()
        doc = (await client.post(f"/v1/schedules/{paused['id']}/pause")).json()
        assert doc["paused"] is True and doc["next_run_at"] is None
        # Both due now (as after an outage): the paused one must stay silent while the other one runs.
        due = datetime.now(UTC) - timedelta(minutes=2)
        await store.pool.execute(
            "UPDATE schedules SET next_run_at = $1 WHERE id = ANY($2::uuid[])",
            due,
            [uuid.UUID(paused["id"]), uuid.UUID(sentinel["id"])],
        )

        async def sentinel_ran() -> bool:
            return (await client.get(f"/v1/schedules/{sentinel['id']}")).json()["last_outcome"] == "created"

        await eventually(sentinel_ran, timeout=30, what="the unpaused schedule's run")
        assert await schedule_tasks(client, paused["id"]) == []
        assert (await client.get(f"/v1/schedules/{paused['id']}")).json()["last_run_at"] is None

        resumed = (await client.post(f"/v1/schedules/{paused['id']}/resume")).json()
        # What fell while it was paused is not run: it continues from the next occurrence.
        assert resumed["paused"] is False and parse(resumed["next_run_at"]) > datetime.now(UTC)
        [sentinel_task] = await schedule_tasks(client, sentinel["id"])

        for schedule in (paused, sentinel):
            assert (await client.delete(f"/v1/schedules/{schedule['id']}")).status_code == 204
            assert (await client.get(f"/v1/schedules/{schedule['id']}")).status_code == 404
        assert (await client.get("/v1/schedules")).json()["items"] == []
        # Its tasks stay.
        assert (await client.get(f"/v1/tasks/{sentinel_task['id']}")).status_code == 200
    assert metric_sum(await cluster.metrics(agent), "taskyard_schedule_tasks_created_total") == 1

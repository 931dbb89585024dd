"""``GET /v1/usage``: the tenant's tasks, tokens and cost over a range, equal to the sum of its task
documents, per specialist, model or day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from taskyard_api.submission.budget import month_start
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import PostgresTaskStore
from tests.integration.api.conftest import assert_problem, created, running

pytestmark = pytest.mark.integration


async def _spent(store: PostgresTaskStore, specialist: str, usage: Usage, **fields: object) -> None:
    task = await running(store, specialist, **fields)
    assert await store.complete(task.id, {"output": "ok"}, usage, owner="w")


async def test_usage_is_the_sum_of_the_task_documents(client: httpx.AsyncClient, store: PostgresTaskStore):
    await _spent(
        store,
        "general",
        Usage(prompt_tokens=100, completion_tokens=20, total_tokens=120, cost=0.5, model="a"),
    )
    await _spent(
        store, "general", Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, cost=0.25, model="b")
    )
    await _spent(
        store,
        "researcher",
        Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2, cost=0.125, model="a"),
    )
    # Routed by an LLM call (priced) and never run; and another tenant's task, which must not count.
    routed = await created(store)
    decision = RoutingDecision(
        method=RoutingMethod.LLM,
        specialist="summarizer",
        reason="r",
        confidence=0.9,
        tokens=40,
        model="r",
        cost=0.0625,
    )
    assert await store.route(routed.id, decision)
    await _spent(store, "general", Usage(total_tokens=1000, cost=100.0, model="a"), tenant="other")

    documents = (await client.get("/v1/tasks")).json()["items"]
    assert len(documents) == 4
    assert next(d for d in documents if d["id"] == str(routed.id))["cost"] == 0.0625
    report = (await client.get("/v1/usage")).json()
    assert report["group_by"] is None and report["groups"] == []
    assert report["total"] == {
        "key": None,
        "tasks": 4,
        "prompt_tokens": sum(d["usage"]["prompt_tokens"] for d in documents),
        "completion_tokens": sum(d["usage"]["completion_tokens"] for d in documents),
        "routing_tokens": 40,
        "total_tokens": sum(d["usage"]["total_tokens"] + d["routing"]["tokens"] for d in documents),
        "cost": pytest.approx(sum(d["cost"] for d in documents)),
    }
    assert report["total"]["cost"] == pytest.approx(0.9375)

    by_specialist = (await client.get("/v1/usage", params={"group_by": "specialist"})).json()["groups"]
    assert [(g["key"], g["tasks"], g["cost"]) for g in by_specialist] == [
        ("general", 2, pytest.approx(0.75)),
        ("researcher", 1, pytest.approx(0.125)),
        ("summarizer", 1, pytest.approx(0.0625)),
    ]
    by_model = (await client.get("/v1/usage", params={"group_by": "model"})).json()["groups"]
    assert [(g["key"], g["tasks"], g["cost"], g["routing_tokens"]) for g in by_model] == [
        ("a", 2, pytest.approx(0.625), 0),
        ("b", 1, pytest.approx(0.25), 0),
        ("r", 1, pytest.approx(0.0625), 40),
    ]
    by_day = (await client.get("/v1/usage", params={"group_by": "day"})).json()["groups"]
    assert [g["tasks"] for g in by_day] == [4] and by_day[0]["key"] == datetime.now(UTC).strftime("%Y-%m-%d")


async def test_the_range_selects_by_creation_and_must_be_ordered(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    await _spent(store, "general", Usage(total_tokens=3, cost=1.0, model="a"))
    now = datetime.now(UTC)
    later = {"from": (now + timedelta(hours=1)).isoformat(), "to": (now + timedelta(hours=2)).isoformat()}
    empty = (await client.get("/v1/usage", params=later)).json()
    assert empty["total"] == {
        "key": None, "tasks": 0, "prompt_tokens": 0, "completion_tokens": 0, "routing_tokens": 0,
        "total_tokens": 0, "cost": 0.0,
    }  # fmt: skip
    this_month = (await client.get("/v1/usage")).json()
    assert datetime.fromisoformat(this_month["from"]) == month_start(now)
    assert this_month["total"]["tasks"] == 1
    backwards = await client.get("/v1/usage", params={"from": later["to"], "to": later["from"]})
    body = assert_problem(backwards, 422, "validation-error")
    assert body["errors"][0]["loc"] == ["query", "from"]
    assert_problem(await client.get("/v1/usage", params={"group_by": "tenant"}), 422, "validation-error")
    # Before the calendar's first instant in UTC: refused, never a query that cannot be encoded.
    for name in ("from", "to"):
        outside = await client.get("/v1/usage", params={name: "0001-01-01T00:30:00+01:00"})
        assert assert_problem(outside, 422, "validation-error")["errors"][0]["loc"] == ["query", name]


def test_month_start_is_the_first_instant_of_the_utc_month():
    assert month_start(datetime(2026, 3, 31, 23, 59, tzinfo=UTC)) == datetime(2026, 3, 1, tzinfo=UTC)
    east = datetime(2026, 4, 1, 0, 30, tzinfo=UTC).astimezone(tz=None)
    assert month_start(east) == datetime(2026, 4, 1, tzinfo=UTC)

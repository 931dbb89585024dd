"""A submission's own limits: ``timeout_seconds`` within what the specialist allows, a ``deadline`` ahead."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import yaml

from taskyard_common.catalog import load_catalog
from taskyard_common.settings import CatalogSettings
from taskyard_common.store import PostgresTaskStore
from tests.integration.api.conftest import IntakeReader, MakeSettings, assert_problem, serve


def tighter_catalog(source: Path, target: Path) -> Path:
    """The test catalog with the same specialists, but the summarizer capped at 400 s and the researcher at
    7200 s (the largest, so the cap of a task without a specialist)."""
    data = yaml.safe_load(source.read_text())
    for spec in data["specialists"]:
        if spec["name"] == "summarizer":
            spec["max_timeout_seconds"] = 400
        if spec["name"] == "researcher":
            spec["max_timeout_seconds"] = 7200
    target.write_text(yaml.safe_dump(data))
    load_catalog(target)  # still valid
    return target


async def test_timeout_and_deadline_are_checked_stored_and_announced(
    make_settings: MakeSettings,
    catalog_path: Path,
    tmp_path: Path,
    store: PostgresTaskStore,
    intake: Callable[[], Awaitable[IntakeReader]],
):
    catalog = CatalogSettings(path=tighter_catalog(catalog_path, tmp_path / "specialists.yaml"))
    settings = make_settings().model_copy(update={"catalog": catalog})
    async with serve(settings) as client:
        reader = await intake()
        maximum = (await client.get("/v1/specialists")).json()["items"]
        assert {s["name"]: s["max_timeout_seconds"] for s in maximum}["summarizer"] == 400

        deadline = datetime.now(UTC) + timedelta(hours=2)
        accepted = await client.post(
            "/v1/tasks",
            json={
                "input": "Summarize this.",
                "specialist": "summarizer",
                "timeout_seconds": 400,
                # Any offset is accepted; it is kept in UTC.
                "deadline": deadline.astimezone(timezone(timedelta(hours=2))).isoformat(),
            },
        )
        assert accepted.status_code == 202, accepted.text
        doc = accepted.json()
        assert doc["timeout_seconds"] == 400
        assert datetime.fromisoformat(doc["deadline"]) == deadline
        assert doc["deadline"].endswith("Z") or doc["deadline"].endswith("+00:00")
        assert doc["next_attempt_at"] is None and doc["cancel_requested_at"] is None
        assert doc["attempt_history"] == [] and doc["dead_letter"] is None
        record = await store.get(doc["id"])
        assert (record.timeout_seconds, record.deadline) == (400, deadline)
        assert (await client.get(f"/v1/tasks/{doc['id']}")).json() == doc
        [(message, _)] = await reader.take(1)
        assert (message.timeout_seconds, message.deadline) == (400, deadline)

        # Without a specialist the cap is the largest in the catalog; without limits the fields are null.
        unrouted = await client.post("/v1/tasks", json={"input": "Research this.", "timeout_seconds": 7200})
        assert unrouted.status_code == 202 and unrouted.json()["timeout_seconds"] == 7200
        plain = (await client.post("/v1/tasks", json={"input": "hi"})).json()
        assert plain["timeout_seconds"] is None and plain["deadline"] is None
        await reader.take(2)

        too_long = [
            ({"specialist": "summarizer", "timeout_seconds": 400.5}, "max_timeout_seconds of 'summarizer'"),
            ({"specialist": "general", "timeout_seconds": 3601}, "max_timeout_seconds of 'general'"),
            ({"timeout_seconds": 7201}, "largest max_timeout_seconds"),
        ]
        for fields, why in too_long:
            body = assert_problem(
                await client.post("/v1/tasks", json={"input": "x", **fields}), 422, "validation-error"
            )
            assert why in body["detail"]
            assert body["errors"][0]["loc"] == ["body", "timeout_seconds"]

        past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
        invalid = [
            {"timeout_seconds": 0},
            {"timeout_seconds": -5},
            {"timeout_seconds": "soon"},
            {"deadline": past},
            {"deadline": "2099-01-01T00:00:00"},  # no offset
            {"deadline": "2099-01-01"},
            {"deadline": 4102444800},  # a bare number is not RFC 3339
            {"deadline": "9999-12-31T23:59:59-05:00"},  # beyond year 9999 in UTC
            {"deadline": "tomorrow"},
        ]
        for fields in invalid:
            body = assert_problem(
                await client.post("/v1/tasks", json={"input": "x", **fields}), 422, "validation-error"
            )
            assert body["errors"][0]["loc"][:2] == ["body", next(iter(fields))], fields
        raw = b'{"input": "x", "timeout_seconds": Infinity}'
        infinite = await client.post("/v1/tasks", content=raw, headers={"content-type": "application/json"})
        assert_problem(infinite, 422, "validation-error")

        assert len((await client.get("/v1/tasks")).json()["items"]) == 3
        await reader.assert_empty()

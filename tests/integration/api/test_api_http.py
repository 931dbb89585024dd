"""The HTTP surface around the task endpoints: size and media-type limits, probes, metrics, OpenAPI, 500s."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.settings import DbSettings
from taskyard_devkit.ports import free_port
from tests.integration.api.conftest import PROBLEM, MakeSettings, assert_problem, serve


async def test_oversized_and_non_json_bodies_are_refused(make_settings: MakeSettings):
    async with serve(make_settings(max_body_bytes=1024)) as client:
        big = {"input": "x" * 2000}
        body = assert_problem(await client.post("/v1/tasks", json=big), 413, "payload-too-large")
        assert "1024" in body["detail"]

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"input": "'
            for _ in range(20):
                yield b"y" * 100
            yield b'"}'

        chunked = await client.post(
            "/v1/tasks", content=chunks(), headers={"content-type": "application/json"}
        )
        assert "content-length" not in chunked.request.headers
        assert chunked.request.headers["transfer-encoding"] == "chunked"
        assert_problem(chunked, 413, "payload-too-large")

        assert_problem(
            await client.post("/v1/tasks", content=b"input=hello", headers={"content-type": "text/plain"}),
            415,
            "unsupported-media-type",
        )
        assert_problem(
            await client.post(
                "/v1/tasks", content=b'{"input": "hi"}', headers={"content-type": "application/xml"}
            ),
            415,
            "unsupported-media-type",
        )
        no_type = client.build_request("POST", "/v1/tasks", content=b'{"input": "hi"}')
        no_type.headers.pop("content-type", None)
        assert_problem(await client.send(no_type), 415, "unsupported-media-type")

        # Just under the limit, and JSON with parameters or a +json suffix, are fine.
        for content_type in ("application/json; charset=utf-8", "application/vnd.taskyard+json"):
            small = await client.post(
                "/v1/tasks",
                content=b'{"input": "' + b"z" * 900 + b'"}',
                headers={"content-type": content_type},
            )
            assert small.status_code == 202, small.text
        assert len((await client.get("/v1/tasks")).json()["items"]) == 2
        # Refused before the handler ran, yet counted under the route it was meant for.
        metrics = (await client.get("/metrics")).text
        assert 'taskyard_http_requests_total{method="POST",route="/v1/tasks",status="413"}' in metrics
        assert 'taskyard_http_requests_total{method="POST",route="/v1/tasks",status="415"}' in metrics


async def test_probes_metrics_and_unknown_routes(client: httpx.AsyncClient):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    assert (await client.get("/readyz")).json() == {"status": "ready"}
    assert (await client.post("/v1/tasks", json={"input": "count me"})).status_code == 202
    await client.get(f"/v1/tasks/{'0' * 8}-0000-0000-0000-{'0' * 12}")

    metrics = await client.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    assert "taskyard_tasks_submitted_total" in text
    assert 'taskyard_http_requests_total{method="POST",route="/v1/tasks",status="202"}' in text
    assert 'route="/v1/tasks/{task_id}",status="404"' in text
    assert 'taskyard_submit_rejected_total{reason="queue_full"}' in text

    body = assert_problem(await client.get("/v1/nothing/here"), 404, "not-found")
    assert body["instance"] == "/v1/nothing/here"
    assert 'route="unmatched",status="404"' in (await client.get("/metrics")).text
    not_allowed = await client.delete("/v1/tasks")
    assert_problem(not_allowed, 405)
    assert "POST" in not_allowed.headers["allow"]


async def test_openapi_documents_every_route_and_its_problems(client: httpx.AsyncClient):
    document = (await client.get("/openapi.json")).json()
    paths = document["paths"]
    expected = {
        ("/v1/tasks", "post"): {"202", "402", "413", "415", "422", "500", "503"},
        ("/v1/tasks", "get"): {"200", "422", "500", "503"},
        ("/v1/tasks/{task_id}", "get"): {"200", "304", "404", "422", "500", "503"},
        ("/v1/tasks/{task_id}/events", "get"): {"200", "404", "422", "500", "503"},
        ("/v1/tasks/{task_id}/result", "get"): {"200", "404", "409", "500", "503"},
        ("/v1/tasks/{task_id}/cancel", "post"): {"200", "202", "404", "409", "500", "503"},
        ("/v1/tasks/{task_id}", "delete"): {"204", "403", "404", "409", "500", "503"},
        ("/v1/tenant/tasks", "delete"): {"200", "403", "500", "503"},
        ("/v1/tasks/{task_id}/webhook-deliveries", "get"): {"200", "404", "500", "503"},
        ("/v1/tasks/{task_id}/webhook-deliveries/{delivery_id}/redeliver", "post"): {
            "202",
            "403",
            "404",
            "500",
            "503",
        },
        ("/v1/task-groups", "post"): {"202", "402", "409", "413", "415", "422", "429", "500", "503"},
        ("/v1/task-groups/{group_id}", "get"): {"200", "404", "422", "500", "503"},
        ("/v1/task-groups/{group_id}/cancel", "post"): {"200", "202", "404", "409", "500", "503"},
        ("/v1/dead-letters", "get"): {"200", "422", "500", "503"},
        ("/v1/dead-letters/{task_id}", "get"): {"200", "404", "500", "503"},
        ("/v1/dead-letters/{task_id}", "delete"): {"204", "404", "500", "503"},
        ("/v1/dead-letters/{task_id}/replay", "post"): {"202", "404", "415", "422", "500", "503"},
        ("/v1/schedules", "post"): {"201", "403", "413", "415", "422", "500", "503"},
        ("/v1/schedules", "get"): {"200", "422", "500", "503"},
        ("/v1/schedules/{schedule_id}", "get"): {"200", "404", "500", "503"},
        ("/v1/schedules/{schedule_id}", "delete"): {"204", "403", "404", "500", "503"},
        ("/v1/schedules/{schedule_id}/pause", "post"): {"200", "403", "404", "500", "503"},
        ("/v1/schedules/{schedule_id}/resume", "post"): {"200", "403", "404", "500", "503"},
        ("/v1/tenants/{tenant}/limits", "get"): {"200", "404", "500", "503"},
        ("/v1/tenants/{tenant}/limits", "put"): {"200", "404", "415", "422", "500", "503"},
        ("/v1/tenants/{tenant}/limits", "delete"): {"204", "404", "500", "503"},
        ("/v1/specialists", "get"): {"200", "500"},
        ("/v1/specialists/{name}", "put"): {
            "200",
            "201",
            "400",
            "403",
            "409",
            "413",
            "415",
            "422",
            "500",
            "503",
        },
        ("/v1/specialists/{name}", "delete"): {"204", "403", "404", "409", "500", "503"},
        ("/v1/usage", "get"): {"200", "422", "500", "503"},
        ("/v1/limits", "get"): {"200", "403", "500", "503"},
        ("/v1/tenants/{tenant}/budget", "get"): {"200", "403", "404", "422", "500", "503"},
        ("/v1/tenants/{tenant}/budget", "put"): {
            "200",
            "400",
            "403",
            "404",
            "413",
            "415",
            "422",
            "500",
            "503",
        },
        ("/healthz", "get"): {"200", "500"},
        ("/readyz", "get"): {"200", "500", "503"},
        ("/metrics", "get"): {"200", "500"},
    }
    assert {(path, method) for path, item in paths.items() for method in item} == set(expected)
    for (path, method), statuses in expected.items():
        responses = paths[path][method]["responses"]
        assert statuses <= set(responses), (path, method, sorted(responses))
        for status, response in responses.items():
            assert response["description"]
            if status[0] in "45":
                assert response["content"] == {PROBLEM: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    schemas = document["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert {"type", "title", "status", "detail", "instance"} <= set(schemas["Problem"]["properties"])
    assert "Location" in paths["/v1/tasks"]["post"]["responses"]["202"]["headers"]
    assert "ETag" in paths["/v1/tasks"]["post"]["responses"]["202"]["headers"]
    read = paths["/v1/tasks/{task_id}"]["get"]
    assert "ETag" in read["responses"]["200"]["headers"] and "ETag" in read["responses"]["304"]["headers"]
    assert {p["name"] for p in read["parameters"]} == {"task_id", "wait", "If-None-Match", "fields"}
    events = paths["/v1/tasks/{task_id}/events"]["get"]
    assert set(events["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert {p["name"] for p in events["parameters"]} == {"task_id", "after", "limit", "Last-Event-ID"}
    assert "Retry-After" in paths["/v1/tasks"]["post"]["responses"]["503"]["headers"]
    assert "Location" in paths["/v1/schedules"]["post"]["responses"]["201"]["headers"]

    # The status enum is TaskStatus itself, so it cannot drift from what the services store.
    assert schemas["TaskStatus"]["enum"] == [status.value for status in TaskStatus]
    cancel = paths["/v1/tasks/{task_id}/cancel"]["post"]
    assert cancel["tags"] == ["tasks"]
    task_ref = {"$ref": "#/components/schemas/TaskDocument"}
    for status in ("200", "202"):
        assert cancel["responses"][status]["content"]["application/json"]["schema"] == task_ref
    replay = paths["/v1/dead-letters/{task_id}/replay"]["post"]
    assert replay["tags"] == ["dead-letters"]
    assert "Location" in replay["responses"]["202"]["headers"]
    assert "Retry-After" in replay["responses"]["503"]["headers"]
    assert "content" not in paths["/v1/dead-letters/{task_id}"]["delete"]["responses"]["204"]
    reasons = next(
        p["schema"] for p in paths["/v1/dead-letters"]["get"]["parameters"] if p["name"] == "reason"
    )
    assert schemas[reasons["anyOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"] == [
        "delivery_limit",
        "rejected",
        "expired",
        "maxlen",
    ]
    document_fields = set(schemas["TaskDocument"]["properties"])
    assert {"next_attempt_at", "deadline", "timeout_seconds", "cancel_requested_at"} <= document_fields
    assert {"attempt_history", "dead_letter"} <= document_fields
    assert {"timeout_seconds", "deadline"} <= set(schemas["TaskSubmission"]["properties"])


async def test_specialists_come_from_the_catalog(client: httpx.AsyncClient, catalog):
    items = (await client.get("/v1/specialists")).json()["items"]
    assert [item["name"] for item in items] == catalog.names
    summarizer = next(item for item in items if item["name"] == "summarizer")
    assert summarizer["max_steps"] == 2 and "summarize" in summarizer["keywords"]
    assert "instructions" not in summarizer


async def test_internal_errors_answer_a_bare_500_problem(client: httpx.AsyncClient, db_settings: DbSettings):
    # A real failure the API does not expect: its table vanished under it.
    conn = await asyncpg.connect(db_settings.url.get_secret_value())
    try:
        await conn.execute(f'DROP TABLE "{db_settings.db_schema}".tasks CASCADE')
    finally:
        await conn.close()
    for response in (await client.get("/v1/tasks"), await client.post("/v1/tasks", json={"input": "hi"})):
        body = assert_problem(response, 500, "internal-error")
        assert body["request_id"] == response.headers["x-request-id"]
        assert set(body) == {"type", "title", "status", "detail", "instance", "request_id"}
        assert "tasks" not in body["detail"] and "relation" not in response.text


async def test_metrics_on_a_port_of_their_own_are_not_served_on_the_api_port(make_settings):
    """With TASKYARD_API_METRICS_PORT (the chart sets it), /metrics answers 404 on the API's port, the
    one an Ingress exposes, and Prometheus scrapes the metrics port."""
    port = free_port()
    async with serve(make_settings(metrics_port=port)) as client:
        assert_problem(await client.get("/metrics"), 404, "not-found")
        assert (await client.get("/healthz")).status_code == 200
        async with httpx.AsyncClient() as scraper:
            scraped = await scraper.get(f"http://127.0.0.1:{port}/metrics")
        assert scraped.status_code == 200 and "taskyard_http_requests_total" in scraped.text

"""Task groups (POST/GET /v1/task-groups, POST .../cancel) played with an httpx MockTransport; the OpenAPI
contract test checks the SDK's models against the real routes."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.unit.client.fakes import async_client, client, problem

GROUP = str(uuid.uuid4())
CHILDREN = [str(uuid.uuid4()), str(uuid.uuid4())]


def group_document(status: str = "running", **fields: object) -> dict[str, object]:
    return {
        "id": GROUP,
        "status": status,
        "total": len(CHILDREN),
        "children": {
            "items": [{"id": c, "status": "queued", "specialist": None} for c in CHILDREN],
            "next_cursor": None,
        },
        "counts": {"queued": 1, "running": 1},
        "reduce_task_id": None,
        "created_at": "2025-05-01T09:30:00Z",
        **fields,
    }


def test_submit_a_group_with_a_reduce_step_and_one_idempotency_key_across_retries():
    requests: list[httpx.Request] = []

    def api(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if len(requests) == 1:
            return problem(503, "broker-unavailable", headers={"Retry-After": "0"})
        return httpx.Response(202, json=group_document())

    with client(api) as sdk:
        group = sdk.submit_group(
            [
                {"input": "Summarize: a"},
                {"input": {"text": "b"}, "specialist": "summarizer", "metadata": {"k": "v"}},
            ],
            reduce={"specialist": "general", "instructions": "Merge the summaries."},
        )
    assert group.id == uuid.UUID(GROUP) and group.child_ids == [uuid.UUID(c) for c in CHILDREN]
    assert group.counts == {"queued": 1, "running": 1} and group.reduce_task_id is None
    assert group.model_extra == {"created_at": "2025-05-01T09:30:00Z"}
    assert [r.url.path for r in requests] == ["/v1/task-groups"] * 2
    assert len({r.headers["idempotency-key"] for r in requests}) == 1
    assert json.loads(requests[0].content) == {
        "tasks": [
            {"input": "Summarize: a"},
            {"input": {"text": "b"}, "specialist": "summarizer", "metadata": {"k": "v"}},
        ],
        "reduce": {"specialist": "general", "instructions": "Merge the summaries."},
    }


def test_a_group_task_must_be_shaped_like_the_contract():
    with client(lambda request: httpx.Response(500)) as sdk:
        with pytest.raises(ValueError):
            sdk.submit_group([{"text": "no input key"}])
        with pytest.raises(ValueError):
            sdk.submit_group([{"input": "x", "webhook": {}}])


async def test_read_and_cancel_a_group():
    paths: list[tuple[str, str]] = []

    def api(request: httpx.Request) -> httpx.Response:
        paths.append((request.method, request.url.path))
        if request.method == "POST":
            return httpx.Response(200, json=group_document("cancelled", reduce_task_id=str(uuid.uuid4())))
        return httpx.Response(200, json=group_document())

    async with async_client(api) as sdk:
        assert (await sdk.group(GROUP)).status == "running"
        cancelled = await sdk.cancel_group(GROUP)
    assert cancelled.status == "cancelled" and cancelled.reduce_task_id is not None
    assert paths == [("GET", f"/v1/task-groups/{GROUP}"), ("POST", f"/v1/task-groups/{GROUP}/cancel")]

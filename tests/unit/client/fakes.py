"""Documents as the API answers them, for the SDK's unit tests (an httpx.MockTransport plays the API)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

from taskyard_client import AsyncClient, Client, RetryPolicy

# No waiting in unit tests: every retry is immediate.
FAST = RetryPolicy(max_attempts=4, base_delay=0, max_delay=5, max_total=10)
Handler = Callable[[httpx.Request], httpx.Response]


def task_document(status: str = "pending", **fields: Any) -> dict[str, Any]:
    task_id = fields.pop("id", str(uuid.uuid4()))
    return {
        "id": task_id,
        "status": status,
        "specialist": None,
        "requested_specialist": None,
        "routing": None,
        "attempts": 0,
        "created_at": "2025-05-01T09:30:00.123456Z",
        "started_at": None,
        "finished_at": None,
        "result": None,
        "error": None,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        "input": "do it",
        "metadata": {},
        "next_attempt_at": None,
        "deadline": None,
        "timeout_seconds": None,
        "cancel_requested_at": None,
        "attempt_history": [],
        "dead_letter": None,
        "webhook": None,
        "links": {"self": f"/v1/tasks/{task_id}", "result": f"/v1/tasks/{task_id}/result"},
        **fields,
    }


def problem(
    status: int, slug: str, detail: str = "", *, headers: dict[str, str] | None = None, **extensions: Any
) -> httpx.Response:
    body = {
        "type": f"https://taskyard.dev/problems/{slug}",
        "title": slug.replace("-", " ").capitalize(),
        "status": status,
        "detail": detail or None,
        "request_id": "r1",
        **extensions,
    }
    return httpx.Response(
        status, json=body, headers={"content-type": "application/problem+json", **(headers or {})}
    )


def event_json(seq: int, kind: str, **data: Any) -> dict[str, Any]:
    return {"seq": seq, "type": kind, "data": data, "at": f"2025-05-01T09:30:{seq:02d}.000000Z"}


def frames(*events: dict[str, Any]) -> bytes:
    return b"".join(
        f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n".encode()
        for e in events
    )


class DroppedStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body that sends some bytes, then the connection drops (or just ends, with ``drop=False``)."""

    def __init__(self, body: bytes, *, drop: bool = True) -> None:
        self.body = body
        self.drop = drop

    def __iter__(self) -> Iterator[bytes]:
        yield self.body
        if self.drop:
            raise httpx.ReadError("connection dropped")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body
        if self.drop:
            raise httpx.ReadError("connection dropped")


def sse(body: bytes, *, drop: bool = False) -> httpx.Response:
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=DroppedStream(body, drop=drop)
    )


def client(handler: Handler, *, retry: RetryPolicy = FAST) -> Client:
    return Client("http://api.test", "tyk_test_key", transport=httpx.MockTransport(handler), retry=retry)


def async_client(handler: Handler, *, retry: RetryPolicy = FAST) -> AsyncClient:
    return AsyncClient("http://api.test", "tyk_test_key", transport=httpx.MockTransport(handler), retry=retry)

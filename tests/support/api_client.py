"""Talking to a running API the way a careful client does: submit, retry a 503 after Retry-After, poll."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.support.polling import eventually

TERMINAL = {"completed", "failed", "dead_lettered", "cancelled"}


async def submit(
    client: httpx.AsyncClient, body: dict[str, Any], *, retry_503_for: float = 0
) -> dict[str, Any]:
    """POST a task; with ``retry_503_for`` > 0, a 503 is retried (after a short pause) for that long."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + retry_503_for
    while True:
        response = await client.post("/v1/tasks", json=body)
        if response.status_code == 202:
            return response.json()
        if response.status_code == 503 and loop.time() < deadline:
            assert "retry-after" in response.headers
            assert response.headers["content-type"].startswith("application/problem+json")
            await asyncio.sleep(0.2)
            continue
        raise AssertionError(f"submission refused: {response.status_code} {response.text}")


async def task(client: httpx.AsyncClient, task_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/tasks/{task_id}")
    assert response.status_code == 200, response.text
    return response.json()


async def wait_for_status(
    client: httpx.AsyncClient, task_id: str, statuses: set[str], *, timeout: float = 60
) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen.update(await task(client, task_id))
        return seen["status"] in statuses

    await eventually(
        reached, timeout=timeout, what=f"task {task_id} to reach {statuses} (last: {seen.get('status')})"
    )
    return seen


async def count_with_status(client: httpx.AsyncClient, status: str) -> int:
    total, cursor = 0, None
    while True:
        params: dict[str, Any] = {"status": status, "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/tasks", params=params)).json()
        total += len(page["items"])
        cursor = page["next_cursor"]
        if not cursor:
            return total

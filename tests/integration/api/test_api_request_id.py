"""``X-Request-ID``: echoed when sane, generated otherwise, on every answer, in problems and in log lines."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from taskyard_api.http.request_id import RequestIdLogFilter
from taskyard_common.settings import DbSettings
from tests.integration.api.conftest import MakeSettings, assert_problem, serve

GENERATED = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
async def client(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The app without API keys: request ids do not depend on who asks (auth has its own tests)."""
    async with serve(make_settings(auth_enabled=False)) as api:
        yield api


async def test_a_sane_client_id_is_echoed_and_anything_else_replaced(client: httpx.AsyncClient):
    for sane in ("abc", "req-42.retry_1:7", "A" * 128, "0"):
        response = await client.get("/healthz", headers={"X-Request-ID": sane})
        assert response.headers["x-request-id"] == sane
    insane: list[str | bytes] = ["A" * 129, "has space", "semi;colon", "a/b", "é".encode(), "\t", b"x\xff"]
    for value in insane:
        response = await client.get("/healthz", headers={"X-Request-ID": value})
        assert GENERATED.fullmatch(response.headers["x-request-id"]), value
    # Without one, each request gets its own.
    first, second = (await client.get("/healthz")), (await client.get("/healthz"))
    assert GENERATED.fullmatch(first.headers["x-request-id"])
    assert first.headers["x-request-id"] != second.headers["x-request-id"]
    # Only one id per answer, even when the client sends two.
    both = await client.get("/healthz", headers=[("X-Request-ID", "one"), ("X-Request-ID", "two")])
    assert both.headers.get_list("x-request-id") == ["one"]


async def test_every_answer_and_problem_carries_it(make_settings: MakeSettings):
    async with serve(make_settings(max_body_bytes=64, auth_enabled=False)) as client:
        sent = {"X-Request-ID": "trace-1"}
        accepted = await client.post("/v1/tasks", json={"input": "hi"}, headers=sent)
        assert accepted.status_code == 202 and accepted.headers["x-request-id"] == "trace-1"
        assert "request_id" not in accepted.json()
        problems = {
            404: await client.get("/v1/tasks/nope", headers=sent),
            405: await client.put("/v1/tasks", headers=sent),
            413: await client.post("/v1/tasks", json={"input": "x" * 100}, headers=sent),
            415: await client.post(
                "/v1/tasks", content=b"hi", headers={**sent, "content-type": "text/plain"}
            ),
            422: await client.get("/v1/tasks?limit=0", headers=sent),
        }
        for status, response in problems.items():
            body = assert_problem(response, status)
            assert response.headers["x-request-id"] == "trace-1"
            assert body["request_id"] == "trace-1", status
        generated = await client.get("/v1/tasks/nope")
        assert assert_problem(generated, 404)["request_id"] == generated.headers["x-request-id"]
        assert (await client.get("/metrics")).headers["x-request-id"]


async def test_a_500_and_its_log_lines_carry_the_same_id(
    client: httpx.AsyncClient, db_settings: DbSettings, caplog: pytest.LogCaptureFixture
):
    conn = await asyncpg.connect(db_settings.url.get_secret_value())
    try:
        await conn.execute(f'DROP TABLE "{db_settings.db_schema}".tasks CASCADE')
    finally:
        await conn.close()
    log_filter = RequestIdLogFilter()
    caplog.handler.addFilter(log_filter)
    try:
        with caplog.at_level(logging.INFO):
            chosen = await client.get("/v1/tasks", headers={"X-Request-ID": "incident-7"})
            generated = await client.post("/v1/tasks", json={"input": "hi"})
    finally:
        caplog.handler.removeFilter(log_filter)
    for response in (chosen, generated):
        body = assert_problem(response, 500, "internal-error")
        request_id = response.headers["x-request-id"]
        assert body["request_id"] == request_id
        logged = [r for r in caplog.records if getattr(r, "request_id", None) == request_id]
        assert any("unhandled error" in r.getMessage() and r.exc_info for r in logged), request_id
    assert chosen.headers["x-request-id"] == "incident-7"
    # Records logged outside any request carry no id.
    caplog.handler.addFilter(log_filter)
    try:
        logging.getLogger("taskyard.test").warning("outside")
    finally:
        caplog.handler.removeFilter(log_filter)
    [outside] = [r for r in caplog.records if r.getMessage() == "outside"]
    assert not hasattr(outside, "request_id")

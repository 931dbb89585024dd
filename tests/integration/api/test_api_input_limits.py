"""Every input limit of the API answers a problem document (never a 500, never internal detail)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from taskyard_api.settings import ApiSettings
from taskyard_common.settings import AmqpSettings, DbSettings
from tests.integration.api.conftest import IntakeReader, MakeSettings, assert_problem, serve

JSON = {"content-type": "application/json"}


@pytest.fixture
async def client(make_settings: MakeSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The app without API keys: these limits hold whoever asks (auth has its own tests)."""
    async with serve(make_settings(auth_enabled=False)) as api:
        yield api


def assert_no_internals(response: httpx.Response, *secrets: str) -> None:
    """Nothing a client should not see: tracebacks, source paths, SQL, driver names, connection URLs."""
    text = response.text
    for leak in ("Traceback", 'File "', ".py", "SELECT", "INSERT", "asyncpg", "aio_pika", *secrets):
        assert leak not in text, (leak, text)


def urls(amqp: AmqpSettings, db: DbSettings) -> tuple[str, str]:
    return amqp.url.get_secret_value(), db.url.get_secret_value()


def test_default_input_limit_is_256_kib():
    assert ApiSettings().max_input_bytes == 262144


async def test_input_size_is_measured_on_its_utf8_json_encoding(
    make_settings: MakeSettings, intake: Callable[[], Awaitable[IntakeReader]]
):
    async with serve(make_settings(max_input_bytes=100, auth_enabled=False)) as client:
        reader = await intake()
        # A string's quotes count: 98 characters are 100 bytes of JSON; "é" is two bytes in UTF-8.
        fits = ["x" * 98, "é" * 49, {"k": "v" * 90}]  # {"k":"v…"} is 8 + 90 bytes
        for value in fits:
            response = await client.post("/v1/tasks", json={"input": value})
            assert response.status_code == 202, response.text
        for value in ("x" * 99, "é" * 50, {"k": "v" * 93}, 'a"' * 40):
            response = await client.post("/v1/tasks", json={"input": value})
            body = assert_problem(response, 422, "validation-error")
            assert body["errors"] == [
                {
                    "loc": ["body", "input"],
                    "msg": "input may be at most 100 bytes (UTF-8 JSON encoding)",
                    "type": "input_too_large",
                }
            ]
            assert "input" in body["detail"] and "100 bytes" in body["detail"]
        await reader.take(len(fits))
        await reader.assert_empty()


async def test_metadata_entries_keys_and_values_are_bounded(client: httpx.AsyncClient):
    accepted = {
        "sixty-four entries": {f"k{i}": "v" for i in range(64)},
        "longest key and value": {"k" * 128: "v" * 1024},
        "empty value": {"k": ""},
    }
    for why, metadata in accepted.items():
        response = await client.post("/v1/tasks", json={"input": "x", "metadata": metadata})
        assert response.status_code == 202, (why, response.text)
        assert response.json()["metadata"] == metadata
    refused = {
        "65 entries": {f"k{i}": "v" for i in range(65)},
        "empty key": {"": "v"},
        "key of 129": {"k" * 129: "v"},
        "value of 1025": {"k": "v" * 1025},
        "number value": {"k": 1},
        "nested value": {"k": {"a": "b"}},
        "NUL in a value": {"k": "a\x00b"},
        "not an object": ["k", "v"],
    }
    for why, metadata in refused.items():
        response = await client.post("/v1/tasks", json={"input": "x", "metadata": metadata})
        body = assert_problem(response, 422, "validation-error")
        assert body["errors"][0]["loc"][:2] == ["body", "metadata"], why


async def test_structure_encoding_and_unknown_fields_are_refused(
    client: httpx.AsyncClient, amqp_settings: AmqpSettings, db_settings: DbSettings
):
    def nested(depth: int) -> dict:
        value: dict = {"leaf": 1}
        for _ in range(depth - 1):
            value = {"n": value}
        return value

    assert (await client.post("/v1/tasks", json={"input": nested(32)})).status_code == 202
    deep = assert_problem(await client.post("/v1/tasks", json={"input": nested(34)}), 422, "validation-error")
    assert deep["errors"][0]["loc"][:2] == ["body", "input"]
    assert "nested deeper than 32" in deep["errors"][0]["msg"]

    bodies = {
        # Nested far past what the JSON parser recurses into: unreadable, but never a 500.
        "nested 100000 deep": b'{"input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "invalid UTF-8": b'{"input": "caf\xe9"}',
        "truncated UTF-8": b'{"input": "\xe2\x82"}',
        "lone surrogate escape": b'{"input": "\\ud800"}',
        "NUL escape": b'{"input": "a\\u0000"}',
        "NaN": b'{"input": {"n": NaN}}',
        "not JSON": b"{input: hi}",
        "empty": b"",
        "a JSON string": b'"hello"',
        "unknown field": b'{"input": "x", "priority": 5}',
        "empty input": b'{"input": "   "}',
        "empty object input": b'{"input": {}}',
        "list input": b'{"input": ["a"]}',
    }
    for why, raw in bodies.items():
        response = await client.post("/v1/tasks", content=raw, headers=JSON)
        assert response.status_code in (400, 422), (why, response.status_code, response.text)
        body = assert_problem(response, response.status_code)
        assert body["type"].endswith(("validation-error", "about:blank")), (why, body)
        assert_no_internals(response, *urls(amqp_settings, db_settings))
    # What the JSON parser cannot read at all is a 400 (documented), not a 422.
    for why in ("nested 100000 deep", "invalid UTF-8", "truncated UTF-8"):
        assert_problem(await client.post("/v1/tasks", content=bodies[why], headers=JSON), 400)
    utf8 = await client.post("/v1/tasks", content=b'{"input": "caf\xc3\xa9"}', headers=JSON)
    assert utf8.status_code == 202 and utf8.json()["input"] == "café"
    assert_problem(await client.post("/v1/tasks", json={"input": "x", "extra": 1}), 422, "validation-error")
    assert_problem(
        await client.post("/v1/tasks", content=b'{"input": "x"}', headers={"content-type": "text/plain"}),
        415,
        "unsupported-media-type",
    )
    # Replay bodies get the same treatment.
    replay = f"/v1/dead-letters/{uuid.uuid4()}/replay"
    assert_problem(await client.post(replay, content=b'{"specialist": "\xff"}', headers=JSON), 400)
    assert_problem(await client.post(replay, json={"specialist": "x", "more": 1}), 422, "validation-error")
    assert_problem(await client.post(replay, content=b"x", headers={"content-type": "text/csv"}), 415)


MALFORMED_IDS = [
    "not-a-uuid",
    "1234",
    "0" * 300,
    "%00",
    "%FF%FE",
    "caf%C3%A9",
    "..",
    "%2e%2e%2fetc",
    "00000000-0000-0000-0000-00000000000g",
    "{00000000-0000-0000-0000-000000000000",
    "'; DROP TABLE tasks; --",
]


@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("GET", "/v1/tasks/{}"),
        ("GET", "/v1/tasks/{}/result"),
        ("POST", "/v1/tasks/{}/cancel"),
        ("GET", "/v1/dead-letters/{}"),
        ("DELETE", "/v1/dead-letters/{}"),
        ("POST", "/v1/dead-letters/{}/replay"),
    ],
)
async def test_malformed_ids_are_not_found_on_every_path(
    client: httpx.AsyncClient,
    amqp_settings: AmqpSettings,
    db_settings: DbSettings,
    method: str,
    template: str,
):
    for ident in [*MALFORMED_IDS, str(uuid.uuid4())]:
        response = await client.request(method, template.format(ident))
        # A path that decodes to more segments ("../") matches no route: not found too.
        assert_problem(response, 404, "not-found")
        assert_no_internals(response, *urls(amqp_settings, db_settings))


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


@pytest.mark.parametrize("path", ["/v1/tasks", "/v1/dead-letters"])
async def test_query_parameters_are_validated(
    client: httpx.AsyncClient, amqp_settings: AmqpSettings, db_settings: DbSettings, path: str
):
    some_id = uuid.uuid4()
    invalid = [
        {"limit": "0"},
        {"limit": "-1"},
        {"limit": "201"},
        {"limit": "ten"},
        {"limit": "1e3"},
        {"limit": "9" * 40},
        {"cursor": "!!!"},
        {"cursor": "a" * 201},
        {"cursor": _cursor("not a cursor")},
        {"cursor": _cursor(f"2025-05-01T09:30:00|{some_id}")},  # no offset
        {"cursor": _cursor(f"0001-01-01T00:00:00+14:00|{some_id}")},  # before year 1 in UTC
        {"cursor": _cursor("2025-05-01T09:30:00+00:00|not-a-uuid")},
        {"cursor": "w6k"},  # valid base64 of non-ASCII bytes
        {"specialist": "a\x00b"},
        {"specialist": "s" * 64},
        {"status" if path == "/v1/tasks" else "reason": "bogus"},
    ]
    for params in invalid:
        response = await client.get(path, params=params)
        body = assert_problem(response, 422, "validation-error")
        assert body["errors"][0]["loc"] == ["query", next(iter(params))], (params, body)
        assert_no_internals(response, *urls(amqp_settings, db_settings))
    # Valid filters that match nothing are an empty page.
    for params in (
        {"specialist": "nobody"},
        {"specialist": "ÄÖ ü"},
        {"cursor": _cursor(f"2025-05-01T09:30:00+02:00|{some_id}")},
    ):
        response = await client.get(path, params=params)
        assert response.status_code == 200, (params, response.text)
        page = response.json()
        assert (page["items"], page["next_cursor"], page.get("truncated", False)) == ([], None, False)


async def test_problem_bodies_reveal_no_internals(
    make_settings: MakeSettings, amqp_settings: AmqpSettings, db_settings: DbSettings
):
    secrets = urls(amqp_settings, db_settings)
    async with serve(make_settings(max_body_bytes=64, auth_enabled=False)) as client:
        responses = [
            await client.post("/v1/tasks", json={"input": "x" * 100}),
            await client.post("/v1/tasks", content=b"<x/>", headers={"content-type": "application/xml"}),
            await client.post("/v1/tasks", json={"input": "x", "specialist": "poet"}),
            await client.get("/v1/tasks/nope/result"),
            await client.get("/nowhere"),
            await client.put("/v1/tasks"),
        ]
        for response in responses:
            body = assert_problem(response, response.status_code)
            assert body["type"].startswith("https://taskyard.dev/problems/") or body["type"] == "about:blank"
            assert body["request_id"] == response.headers["x-request-id"]
            assert_no_internals(response, *secrets)
        assert json.loads(responses[2].text)["known_specialists"]

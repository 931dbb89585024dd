"""The submit scenario's load generator against a tiny real HTTP server on the loopback."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bench.http_load import LoadSpec, encode_request, run_load


@asynccontextmanager
async def tiny_server(*, close_every: int = 0, status: int = 202) -> AsyncIterator[tuple[int, list[bytes]]]:
    """Answers each request with ``status`` in two writes (head, then body); with ``close_every``, every
    n-th answer says ``Connection: close`` and closes."""
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(
                    next(
                        line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
                    ).split(b":")[1]
                )
                seen.append(await reader.readexactly(length))
                closing = close_every and len(seen) % close_every == 0
                body = b'{"ok":true}'
                extra = b"Connection: close\r\n" if closing else b""
                writer.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\n" % status + extra)
                await writer.drain()
                writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()
                if closing:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], seen
    finally:
        server.close()
        await server.wait_closed()


def _spec(port: int, **kw: object) -> LoadSpec:
    fields: dict = {"host": "127.0.0.1", "port": port, "path": "/v1/tasks", "body": '{"input":"x"}'}
    fields.update(concurrency=4, seconds=0.3, warmup_seconds=0.1)
    fields.update(kw)
    return LoadSpec(**fields)


def test_the_request_is_complete_http_1_1() -> None:
    raw = encode_request(_spec(8000, headers={"Authorization": "Bearer k"}))
    head, body = raw.split(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n")
    assert b"Content-Length: 13" in head and b"Authorization: Bearer k" in head
    assert body == b'{"input":"x"}'


async def test_closed_loop_counts_answers_and_reconnects_after_connection_close() -> None:
    async with tiny_server(close_every=7) as (port, seen):
        result = await run_load(_spec(port))
    assert result.ok > 20 and not result.errors
    assert len(result.latencies_s) == result.ok and all(0 < s < 0.3 for s in result.latencies_s)
    assert set(seen) == {b'{"input":"x"}'}
    assert result.wall_s == 0.3 and result.cpu_s > 0


async def test_open_loop_sends_at_the_rate_and_counts_refusals() -> None:
    async with tiny_server(status=503) as (port, _):
        result = await run_load(_spec(port, rate=200, seconds=0.5))
    assert result.ok == 0
    # Every request due in the 0.5 s window is counted, refused.
    assert 95 <= result.errors["503"] <= 101 and result.unsent == 0


async def test_count_mode_stops_at_exactly_count_accepted_requests() -> None:
    async with tiny_server(close_every=5) as (port, seen):
        result = await run_load(_spec(port, count=37, seconds=10, warmup_seconds=0))
    assert result.ok == 37 and len(seen) == 37 and not result.errors
    assert len(result.latencies_s) == 37 and result.wall_s < 10


async def test_count_mode_retries_a_503_and_counts_it() -> None:
    async with tiny_server(status=503) as (port, seen):
        result = await run_load(_spec(port, count=3, concurrency=1, seconds=0.5, warmup_seconds=0))
    # Refused each time, retried after a pause until the cap: never counted as accepted.
    assert result.ok == 0 and result.errors["503"] == len(seen) >= 2

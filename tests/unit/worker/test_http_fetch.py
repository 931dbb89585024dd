"""http_fetch: the allowlist, and real fetches from a tiny HTTP server on 127.0.0.1 that the test runs."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from taskyard_worker.settings import WorkerSettings
from taskyard_worker.tools.base import ToolError
from taskyard_worker.tools.http_fetch import HttpFetch, check_url, host_allowed

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("python.org", True),
        ("docs.python.org", True),
        ("a.b.docs.python.org", True),
        ("PYTHON.ORG", True),
        ("python.org.", True),
        ("evilpython.org", False),
        ("python.org.evil.com", False),
        ("org", False),
        ("example.com", True),
        ("", False),
    ],
)
def test_host_matching(host: str, allowed: bool) -> None:
    assert host_allowed(host, ["python.org", "example.com"]) is allowed


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https"),
        ("ftp://python.org/x", "only http and https"),
        ("gopher://python.org/", "only http and https"),
        ("python.org/x", "absolute"),
        ("/relative", "absolute"),
        ("https://user:pw@python.org/", "credentials"),
        ("https://evil.com/", "not allowed"),
        ("http://169.254.169.254/latest/meta-data/", "not allowed"),
    ],
)
def test_refused_urls(url: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        check_url(httpx.URL(url), ["python.org"])


def test_empty_allowlist_refuses_everything() -> None:
    with pytest.raises(ToolError, match="disabled"):
        check_url(httpx.URL("https://python.org/"), [])


def _response(status: str, content_type: str, body: bytes, extra: str = "") -> Writer:
    async def write(writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n{extra}"
        writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
        await writer.drain()

    return write


def _redirect(location: str) -> Writer:
    return _response("302 Found", "text/plain", b"", f"Location: {location}\r\n")


async def _endless(writer: asyncio.StreamWriter) -> None:
    # Chunked, with no end: only a client that stops reading at its cap ever returns.
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"x" * 4096
    while True:
        writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await writer.drain()


async def _stall(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc")
    await writer.drain()
    await asyncio.Event().wait()  # never sends the rest


# 20 MB of zeros compress to about 20 KB: one raw chunk that httpx would inflate all at once.
_BOMB = gzip.compress(bytes(20_000_000), compresslevel=9)


ROUTES: dict[str, Writer] = {
    "/bomb": _response("200 OK", "text/plain", _BOMB, "Content-Encoding: gzip\r\n"),
    "/gzip": _response(
        "200 OK", "text/plain", gzip.compress(b"small and gzipped"), "Content-Encoding: gzip\r\n"
    ),
    "/deflate": _response(
        "200 OK", "text/plain", zlib.compress(b"zlib deflate"), "Content-Encoding: deflate\r\n"
    ),
    "/raw-deflate": _response(
        "200 OK", "text/plain", zlib.compress(b"raw deflate", wbits=-15), "Content-Encoding: deflate\r\n"
    ),
    "/brotli": _response("200 OK", "text/plain", b"???", "Content-Encoding: br\r\n"),
    "/hello": _response("200 OK", "text/plain; charset=utf-8", "héllo from the test server".encode()),
    "/json": _response("200 OK", "application/json", b'{"answer": 42}'),
    "/missing": _response("404 Not Found", "text/plain", b"no such page"),
    "/big": _response("200 OK", "text/plain", b"a" * 1_000_000),
    "/image": _response("200 OK", "image/png", b"\x89PNG\r\n\x1a\n" + bytes(100)),
    "/to-hello": _redirect("/hello"),
    "/to-other-host": _redirect("http://other.invalid/secret"),
    "/to-file": _redirect("file:///etc/passwd"),
    "/loop": _redirect("/loop"),
    "/endless": _endless,
    "/stall": _stall,
}


@pytest.fixture
async def server() -> AsyncIterator[str]:
    handlers: set[asyncio.Task[None]] = set()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.add(task)
        try:
            request_line = await reader.readline()
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            path = request_line.decode().split()[1]
            await ROUTES.get(path, _response("404 Not Found", "text/plain", b""))(writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            handlers.discard(task)

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await srv.wait_closed()


@pytest.fixture
async def fetch() -> AsyncIterator[HttpFetch]:
    tool = HttpFetch(
        WorkerSettings(http_allowlist=["127.0.0.1"], http_max_bytes=10_000, http_timeout_seconds=2)
    )
    try:
        yield tool
    finally:
        await tool.close()


async def test_fetches_text_with_status_and_content_type(server: str, fetch: HttpFetch) -> None:
    text = await fetch.run({"url": f"{server}/hello"})
    assert text.startswith("HTTP 200\ncontent-type: text/plain; charset=utf-8\n")
    assert "héllo from the test server" in text
    assert "HTTP 404" in await fetch.run({"url": f"{server}/missing"})
    assert '{"answer": 42}' in await fetch.run({"url": f"{server}/json"})


async def test_caps_the_size(server: str, fetch: HttpFetch) -> None:
    text = await fetch.run({"url": f"{server}/big"})
    assert text.split("\n\n", 1)[1] == "a" * 10_000 + "\n[truncated after 10000 bytes]"


async def test_stops_reading_an_endless_body(server: str, fetch: HttpFetch) -> None:
    text = await fetch.run({"url": f"{server}/endless"})
    body = text.split("\n\n", 1)[1]
    assert body == "x" * 10_000 + "\n[truncated after 10000 bytes]"


async def test_follows_redirects_only_within_the_allowlist(server: str, fetch: HttpFetch) -> None:
    assert "héllo" in await fetch.run({"url": f"{server}/to-hello"})
    with pytest.raises(ToolError, match=r"'other\.invalid' is not allowed"):
        await fetch.run({"url": f"{server}/to-other-host"})
    with pytest.raises(ToolError, match="only http and https"):
        await fetch.run({"url": f"{server}/to-file"})
    with pytest.raises(ToolError, match="redirects"):
        await fetch.run({"url": f"{server}/loop"})


async def test_omits_binary_content(server: str, fetch: HttpFetch) -> None:
    text = await fetch.run({"url": f"{server}/image"})
    assert "content-type: image/png" in text
    assert "non-text content omitted" in text


async def test_refuses_hosts_outside_the_allowlist_without_connecting(fetch: HttpFetch) -> None:
    with pytest.raises(ToolError, match="not allowed"):
        await fetch.run({"url": "http://localhost:1/"})
    with pytest.raises(ToolError, match="url"):
        await fetch.run({"address": "http://127.0.0.1/"})


async def test_times_out(server: str) -> None:
    tool = HttpFetch(WorkerSettings(http_allowlist=["127.0.0.1"], http_timeout_seconds=0.3))
    try:
        with pytest.raises(ToolError, match=r"within 0\.3 s"):
            await tool.run({"url": f"{server}/stall"})
    finally:
        await tool.close()


async def test_connection_errors_are_tool_errors(fetch: HttpFetch) -> None:
    # Port 9 (discard) is closed on the loopback interface of a test machine.
    with pytest.raises(ToolError, match="failed"):
        await fetch.run({"url": "http://127.0.0.1:9/"})


async def test_decodes_gzip_and_deflate(server: str, fetch: HttpFetch) -> None:
    assert (await fetch.run({"url": f"{server}/gzip"})).endswith("\n\nsmall and gzipped")
    assert (await fetch.run({"url": f"{server}/deflate"})).endswith("\n\nzlib deflate")
    assert (await fetch.run({"url": f"{server}/raw-deflate"})).endswith("\n\nraw deflate")
    with pytest.raises(ToolError, match="unsupported content-encoding 'br'"):
        await fetch.run({"url": f"{server}/brotli"})


async def test_a_gzip_bomb_is_capped_while_inflating(server: str, fetch: HttpFetch) -> None:
    """The cap holds during decompression: the fetch never holds the 20 MB the bomb inflates to (httpx's
    own decoder inflates a whole raw chunk at once), only about the cap plus one raw chunk."""
    tracemalloc.start()
    try:
        text = await fetch.run({"url": f"{server}/bomb"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text.split("\n\n", 1)[1] == "\0" * 10_000 + "\n[truncated after 10000 bytes]"
    assert peak < 2_000_000

"""http_fetch: the allowlist, and real fetches from a tiny HTTP server on 127.0.0.1 that the test runs."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import ipaddress
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from taskyard_worker.settings import WorkerSettings
from taskyard_worker.tools.base import ToolError
from taskyard_worker.tools.http_fetch import HttpFetch, check_url
from taskyard_worker.tools.url_policy import AllowEntry, address_allowed, host_allowed

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


ALLOW = [AllowEntry.parse(e) for e in ("python.org", ".example.com", "api.example.net:8443")]


@pytest.mark.parametrize(
    ("host", "port", "scheme", "allowed"),
    [
        ("python.org", 443, "https", True),
        ("python.org", 80, "http", True),
        ("PYTHON.ORG", 443, "https", True),
        ("python.org.", 443, "https", True),
        # Exact names: no implicit subdomains, no suffix matches.
        ("docs.python.org", 443, "https", False),
        ("evilpython.org", 443, "https", False),
        ("python.org.evil.com", 443, "https", False),
        # A leading dot allows the subdomains (not the domain itself).
        ("docs.example.com", 443, "https", True),
        ("a.b.example.com", 80, "http", True),
        ("example.com", 443, "https", False),
        ("evilexample.com", 443, "https", False),
        # Ports: the scheme's default unless the entry names one.
        ("python.org", 8080, "http", False),
        ("python.org", 443, "http", False),
        ("api.example.net", 8443, "https", True),
        ("api.example.net", 443, "https", False),
        ("", 443, "https", False),
    ],
)
def test_host_and_port_matching(host: str, port: int, scheme: str, allowed: bool) -> None:
    assert host_allowed(host, port, scheme, ALLOW) is allowed


@pytest.mark.parametrize("entry", ["", ":80", "python.org:99999", "::1", "[not-ip]:80"])
def test_bad_allowlist_entries_are_refused_at_start(entry: str) -> None:
    with pytest.raises(ValueError):
        AllowEntry.parse(entry)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # the cloud metadata service
        ("100.64.0.1", False),  # shared address space (carrier-grade NAT)
        ("0.0.0.0", False),
        ("224.0.0.1", False),
        ("::1", False),
        ("::", False),
        ("fd00::1", False),  # unique local
        ("fe80::1", False),  # link local
        ("::ffff:127.0.0.1", False),  # IPv4-mapped
        ("::ffff:169.254.169.254", False),
        ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
        ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
        ("::ffff:8.8.8.8", True),
    ],
)
def test_only_public_addresses_are_allowed(address: str, allowed: bool) -> None:
    assert address_allowed(ipaddress.ip_address(address), []) is allowed


def test_allowed_networks_lift_the_address_check_for_themselves_only() -> None:
    networks = [ipaddress.ip_network("127.0.0.1/32"), ipaddress.ip_network("fd00::/64")]
    assert address_allowed(ipaddress.ip_address("127.0.0.1"), networks)
    assert address_allowed(ipaddress.ip_address("fd00::5"), networks)
    assert not address_allowed(ipaddress.ip_address("127.0.0.2"), networks)
    assert not address_allowed(ipaddress.ip_address("169.254.169.254"), networks)


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
        ("https://docs.python.org/", "not allowed"),
        ("https://python.org:8443/", "port 8443 is not allowed"),
        ("http://169.254.169.254/latest/meta-data/", "not allowed"),
    ],
)
def test_refused_urls(url: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        check_url(httpx.URL(url), [AllowEntry.parse("python.org")])


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
    "/docs/page.html": _response(
        "200 OK",
        "text/html; charset=utf-8",
        b"<html><head><title>Guide</title><style>p{}</style></head><body><p>Read the "
        b'<a href="next.html">next part</a> or <a href="/index.html">start</a>.</p></body></html>',
    ),
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
            host = b""
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                if line.lower().startswith(b"host:"):
                    host = line.split(b":", 1)[1].strip()
            path = request_line.decode().split()[1]
            if path == "/host":  # says which Host header it was sent
                await _response("200 OK", "text/plain", host)(writer)
            else:
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


def _local(server: str, *, extra: tuple[str, ...] = (), **settings: Any) -> WorkerSettings:
    """The test server's exact address and port, and the one network it may resolve to, allowed
    explicitly: nothing else on the loopback interface is reachable."""
    return WorkerSettings(
        http_allowlist=[server.removeprefix("http://"), *extra],
        http_allowed_networks=["127.0.0.1/32"],
        **settings,
    )


@pytest.fixture
async def fetch(server: str) -> AsyncIterator[HttpFetch]:
    tool = HttpFetch(_local(server, http_max_bytes=10_000, http_timeout_seconds=2))
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


async def test_an_html_page_is_read_as_text_with_its_links_resolved_against_the_name_asked(
    server: str,
) -> None:
    """The socket goes to the pinned address; the links the model is shown name the host it asked for."""
    port = httpx.URL(server).port

    async def loopback(_host: str, _port: int) -> list[str]:
        return ["127.0.0.1"]

    tool = HttpFetch(
        WorkerSettings(http_allowlist=[f"site.test:{port}"], http_allowed_networks=["127.0.0.1/32"]),
        resolver=loopback,
    )
    try:
        text = await tool.run({"url": f"http://site.test:{port}/docs/page.html"})
    finally:
        await tool.close()
    head, body = text.split("\n\n", 1)
    assert head == "HTTP 200\ncontent-type: text/html; charset=utf-8\nshown as: text, links as [text](URL)"
    assert body == (
        f"Title: Guide\n\nRead the [next part](http://site.test:{port}/docs/next.html) or "
        f"[start](http://site.test:{port}/index.html)."
    )


async def test_stops_reading_an_endless_body(server: str, fetch: HttpFetch) -> None:
    text = await fetch.run({"url": f"{server}/endless"})
    body = text.split("\n\n", 1)[1]
    assert body == "x" * 10_000 + "\n[truncated after 10000 bytes]"


async def test_follows_redirects_only_within_the_allowlist(server: str, fetch: HttpFetch) -> None:
    assert "héllo" in await fetch.run({"url": f"{server}/to-hello"})
    with pytest.raises(ToolError, match=r"'other\.invalid' port 80 is not allowed"):
        await fetch.run({"url": f"{server}/to-other-host"})
    with pytest.raises(ToolError, match="only http and https"):
        await fetch.run({"url": f"{server}/to-file"})
    with pytest.raises(ToolError, match="redirects"):
        await fetch.run({"url": f"{server}/loop"})


async def test_omits_binary_content(server: str, fetch: HttpFetch) -> None:
    text = await fetch.run({"url": f"{server}/image"})
    assert "content-type: image/png" in text
    assert "non-text content omitted" in text


async def test_refuses_hosts_outside_the_allowlist_without_connecting(server: str, fetch: HttpFetch) -> None:
    with pytest.raises(ToolError, match="not allowed"):
        await fetch.run({"url": "http://localhost:1/"})
    # The allowed address on another port: a port is part of what is allowed.
    with pytest.raises(ToolError, match="port 9 is not allowed"):
        await fetch.run({"url": "http://127.0.0.1:9/"})
    with pytest.raises(ToolError, match="url"):
        await fetch.run({"address": "http://127.0.0.1/"})


async def test_times_out(server: str) -> None:
    tool = HttpFetch(_local(server, http_timeout_seconds=0.3))
    try:
        with pytest.raises(ToolError, match=r"within 0\.3 s"):
            await tool.run({"url": f"{server}/stall"})
    finally:
        await tool.close()


async def test_connection_errors_are_tool_errors(server: str) -> None:
    # Port 9 (discard) is closed on the loopback interface of a test machine.
    tool = HttpFetch(_local(server, extra=("127.0.0.1:9",)))
    try:
        with pytest.raises(ToolError, match="failed"):
            await tool.run({"url": "http://127.0.0.1:9/"})
    finally:
        await tool.close()


async def test_a_name_that_resolves_to_an_internal_address_is_refused(server: str) -> None:
    """The allowlist names the host, the address check decides: ``localhost`` is allowed by name but
    resolves to loopback, which only an explicitly allowed network makes reachable."""
    port = httpx.URL(server).port
    by_name = HttpFetch(WorkerSettings(http_allowlist=[f"localhost:{port}"]))
    try:
        with pytest.raises(ToolError, match="resolves to a non-public address"):
            await by_name.run({"url": f"http://localhost:{port}/hello"})
    finally:
        await by_name.close()
    for literal in ("127.0.0.1", "[::1]", "[::ffff:127.0.0.1]", "169.254.169.254"):
        tool = HttpFetch(WorkerSettings(http_allowlist=[f"{literal}:{port}"]))
        try:
            with pytest.raises(ToolError, match="non-public address"):
                await tool.run({"url": f"http://{literal}:{port}/hello"})
        finally:
            await tool.close()


async def test_the_checked_address_is_the_one_connected_to(server: str) -> None:
    """DNS rebinding: a name answers a permitted address to the check, then an internal one. The tool
    resolves once per hop and connects to the address it checked, sending the name as the Host header."""
    port = httpx.URL(server).port
    answers = [["127.0.0.1"]]
    asked: list[str] = []

    async def rebinding(host: str, _port: int) -> list[str]:
        asked.append(host)
        # First the checked address, then somewhere the check would refuse (and nothing listens).
        return answers.pop() if answers else ["10.255.255.1"]

    tool = HttpFetch(
        WorkerSettings(http_allowlist=[f"rebind.test:{port}"], http_allowed_networks=["127.0.0.1/32"]),
        resolver=rebinding,
    )
    try:
        text = await tool.run({"url": f"http://rebind.test:{port}/host"})
        assert text.split("\n\n", 1)[1] == f"rebind.test:{port}"
        assert asked == ["rebind.test"]
        with pytest.raises(ToolError, match="non-public address"):
            await tool.run({"url": f"http://rebind.test:{port}/host"})
    finally:
        await tool.close()


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

"""GET a web page for the model, only from hosts an operator allowed, with bounded size and time.

The model chooses the URL, and a task's input may be written by anyone: without an allowlist this tool
would let a prompt make the worker reach internal services (SSRF). So every URL, and every redirect hop, is
checked against ``TASKYARD_WORKER_HTTP_ALLOWLIST`` (host and port) and its resolved addresses against the
public ranges, and the connection goes to the checked address (see ``url_policy``); an empty list refuses
everything.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx

from taskyard_worker.settings import WorkerSettings
from taskyard_worker.tools.base import Tool, ToolError, string_argument
from taskyard_worker.tools.html_text import html_to_text, is_html
from taskyard_worker.tools.http_body import ACCEPT_ENCODING, read_capped
from taskyard_worker.tools.url_policy import (
    DEFAULT_PORTS,
    AllowEntry,
    Resolver,
    host_allowed,
    resolve_checked,
    system_resolver,
)

MAX_URL_CHARS = 2000
MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml", "application/javascript")


def check_url(url: httpx.URL, allowlist: Sequence[AllowEntry]) -> None:
    """Refuse, with a message the model can act on, any URL the tool must not fetch (its addresses are
    checked when it is resolved, just before connecting)."""
    if url.scheme and url.scheme not in ("http", "https"):
        raise ToolError(f"only http and https URLs can be fetched, not {url.scheme}:")
    if not url.is_absolute_url:
        raise ToolError("the URL must be absolute, starting with http:// or https://")
    if url.userinfo:
        raise ToolError("URLs with credentials are not allowed")
    if not allowlist:
        raise ToolError("fetching is disabled: no host is allowed for this worker")
    port = url.port or DEFAULT_PORTS[url.scheme]
    if not host_allowed(url.host, port, url.scheme, allowlist):
        allowed = ", ".join(_describe(e) for e in allowlist)
        raise ToolError(f"host {url.host!r} port {port} is not allowed; allowed: {allowed}")


def _describe(entry: AllowEntry) -> str:
    host = f"*.{entry.host}" if entry.subdomains else entry.host
    return host if entry.port is None else f"{host}:{entry.port}"


def _parse(raw: str) -> httpx.URL:
    try:
        return httpx.URL(raw)
    except (httpx.InvalidURL, ValueError):
        raise ToolError("not a valid URL") from None


class HttpFetch(Tool):
    name = "http_fetch"
    description = (
        "Fetch a web page or document with HTTP GET and return its status, content type and text "
        "(an HTML page as its visible text, each link as [text](URL); truncated when long). "
        "Only some hosts are allowed."
    )
    parameters = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "an absolute http or https URL"}},
        "required": ["url"],
        "additionalProperties": False,
    }

    def __init__(self, settings: WorkerSettings, *, resolver: Resolver = system_resolver) -> None:
        self._resolver = resolver
        self._allowlist = tuple(AllowEntry.parse(entry) for entry in settings.http_allowlist)
        self._networks = tuple(settings.http_allowed_networks)
        self._max_bytes = settings.http_max_bytes
        self._timeout = settings.http_timeout_seconds
        # One client (one connection pool) per process. Redirects are followed here, hop by hop, so each
        # target is checked against the allowlist; trust_env=False: no proxy or .netrc from the environment
        # can change where requests go or what credentials they carry. No keep-alive: a pooled connection
        # is keyed by address, and must not carry a request for another name than the one it was opened for.
        self._client = httpx.AsyncClient(
            follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),
            timeout=httpx.Timeout(self._timeout),
            trust_env=False,
            headers={"User-Agent": "taskyard-worker (http_fetch tool)", "Accept-Encoding": ACCEPT_ENCODING},
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def run(self, arguments: dict[str, Any]) -> str:
        url = _parse(string_argument(arguments, "url", max_length=MAX_URL_CHARS))
        check_url(url, self._allowlist)
        try:
            # The client's timeout bounds each read; this bounds the whole call, a slow drip included.
            async with asyncio.timeout(self._timeout):
                return await self._fetch(url)
        except TimeoutError:
            raise ToolError(f"no complete answer from {url.host} within {self._timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"request to {url.host} failed: {type(exc).__name__}") from None

    async def _fetch(self, url: httpx.URL) -> str:
        for _ in range(MAX_REDIRECTS + 1):
            async with self._open(url, await self._pinned(url)) as response:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    url = url.join(location)
                    check_url(url, self._allowlist)
                    continue
                body, truncated = await self._read_capped(response)
                return self._render(url, response, body, truncated)
        raise ToolError(f"more than {MAX_REDIRECTS} redirects")

    async def _pinned(self, url: httpx.URL) -> httpx.URL:
        """``url`` with its host replaced by the address that was resolved and checked."""
        port = url.port or DEFAULT_PORTS[url.scheme]
        address = await resolve_checked(url.host, port, self._networks, self._resolver)
        return url.copy_with(host=str(address))

    def _open(self, url: httpx.URL, pinned: httpx.URL) -> AbstractAsyncContextManager[httpx.Response]:
        # The name travels as the Host header and as the TLS server name, so virtual hosting and
        # certificate checks see the name while the socket goes to the checked address.
        host = url.host if url.port is None else f"{url.host}:{url.port}"
        extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
        request = self._client.build_request("GET", pinned, headers={"Host": host}, extensions=extensions)
        return _streamed(self._client, request)

    async def _read_capped(self, response: httpx.Response) -> tuple[bytes, bool]:
        # Stream and stop at the cap: a declared Content-Length cannot be trusted, a chunked body has none,
        # and a compressed one is inflated here under the cap (see ``http_body``), not by httpx.
        encoding = response.headers.get("content-encoding", "")
        return await read_capped(response.aiter_raw(), encoding, self._max_bytes)

    def _render(self, url: httpx.URL, response: httpx.Response, body: bytes, truncated: bool) -> str:
        content_type = response.headers.get("content-type", "")
        head = f"HTTP {response.status_code}\ncontent-type: {content_type or 'unknown'}\n"
        if content_type and not content_type.lower().startswith(_TEXT_TYPES):
            return head + f"\n[{len(body)} bytes of non-text content omitted]"
        text = body.decode(response.encoding or "utf-8", errors="replace")
        if is_html(content_type):
            # Links resolve against the name the model asked for, not the pinned address the socket used.
            head += "shown as: text, links as [text](URL)\n"
            text = html_to_text(text, str(url))
        note = f"\n[truncated after {self._max_bytes} bytes]" if truncated else ""
        return f"{head}\n{text}{note}"


@asynccontextmanager
async def _streamed(client: httpx.AsyncClient, request: httpx.Request) -> AsyncIterator[httpx.Response]:
    response = await client.send(request, stream=True)
    try:
        yield response
    finally:
        await response.aclose()

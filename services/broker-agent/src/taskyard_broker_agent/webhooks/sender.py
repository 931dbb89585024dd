"""One delivery attempt over HTTP: resolve the host, check every address, POST to the address checked.

The host is resolved at every attempt and refused when any of its addresses is refused (a host name that
resolves to a public and a private address is refused too: the client might connect to either). The
connection then goes to the address that was checked, never to a second resolution, so a DNS answer
changed between the check and the connection (DNS rebinding) cannot reach a refused address: the URL's host
is replaced by the address, the ``Host`` header and the TLS server name (SNI and certificate check) keep
the name. Connections are never reused (no keep-alive): a pooled connection is keyed by address, and two
host names on one address must not share a TLS session verified for one of them. Redirects are not
followed (a 3xx is a failed attempt), proxies from the environment are ignored.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from taskyard_common.webhooks import IPAddress, WebhookSettings, literal_address, refusal

# host, port -> its addresses.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

_DEFAULT_PORTS = {"http": 80, "https": 443}


async def resolve(host: str, port: int) -> list[IPAddress]:
    """Every address the system resolver gives for ``host``, in its order, without duplicates."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        # An IPv6 sockaddr may carry a zone (fe80::1%eth0): drop it, it is link-local either way.
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


@dataclass(frozen=True)
class Attempt:
    """How one attempt went: an HTTP status, or an error (connection, timeout, a refused address)."""

    status_code: int | None
    error: str | None
    duration_ms: float
    refused: bool = False

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300

    def log_entry(self, at: str) -> dict[str, object]:
        return {
            "at": at,
            "status_code": self.status_code,
            "error": self.error,
            "duration_ms": round(self.duration_ms, 1),
        }


class Sender:
    def __init__(
        self, settings: WebhookSettings, *, resolver: Resolver = resolve, verify: ssl.SSLContext | None = None
    ) -> None:
        """``verify``: the TLS context that checks receivers' certificates (default: the system's CAs)."""
        self._settings = settings
        self._resolve = resolver
        self._client = httpx.AsyncClient(
            verify=verify if verify is not None else True,
            timeout=httpx.Timeout(settings.timeout_seconds),
            limits=httpx.Limits(max_keepalive_connections=0),
            follow_redirects=False,
            trust_env=False,
        )

    async def close(self) -> None:
        await self._client.aclose()

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> Attempt:
        """POST ``body`` to ``url``; the whole attempt, resolution included, within the timeout."""
        start = time.perf_counter()

        def took() -> float:
            return (time.perf_counter() - start) * 1000

        try:
            async with asyncio.timeout(self._settings.timeout_seconds):
                target = httpx.URL(url)
                address = await self._checked_address(target)
                if isinstance(address, str):
                    return Attempt(None, address, took(), refused=True)
                return Attempt(await self._send(target, address, body, headers), None, took())
        except (TimeoutError, httpx.TimeoutException):
            return Attempt(None, f"timed out after {self._settings.timeout_seconds:g} s", took())
        except OSError as exc:  # resolution failed
            return Attempt(None, f"cannot resolve the host: {exc.strerror or type(exc).__name__}", took())
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            return Attempt(None, f"{type(exc).__name__}: {exc}"[:500], took())

    async def _checked_address(self, target: httpx.URL) -> IPAddress | str:
        """The address to connect to, or why the host is refused."""
        host = target.host
        literal = literal_address(host)
        if literal is not None:
            addresses = [literal]
        else:
            port = target.port or _DEFAULT_PORTS.get(target.scheme, 443)
            addresses = await self._resolve(host, port)
            if not addresses:
                return f"refused: {host} resolves to no address"
        for address in addresses:
            reason = refusal(address, self._settings)
            if reason is not None:
                return (
                    f"refused: {reason}" if literal is not None else f"refused: {host} resolves to {reason}"
                )
        return addresses[0]

    async def _send(self, target: httpx.URL, address: IPAddress, body: bytes, headers: dict[str, str]) -> int:
        pinned = target.copy_with(host=str(address))
        # The Host header as the URL names it (with a port that is not the scheme's default).
        host_header = target.netloc.decode("ascii")
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        async with self._client.stream(
            "POST", pinned, content=body, headers={**headers, "host": host_header}, extensions=extensions
        ) as response:
            # The status is the answer; the body is never read (a receiver may send anything).
            return response.status_code

"""A tiny HTTP endpoint for the services that are not web servers: ``/healthz``, ``/readyz``, ``/metrics``.

Kubernetes probes and Prometheus need only these three GETs, so a few lines on ``asyncio.start_server``
beat another web framework in every worker image.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

from taskyard_common.settings import HealthSettings

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], Awaitable[bool]]


class HealthServer:
    def __init__(
        self, settings: HealthSettings, ready: ReadyCheck, registry: CollectorRegistry = REGISTRY
    ) -> None:
        """``registry``: what ``/metrics`` serves (a worker's main child: its pod's processes merged)."""
        self._settings = settings
        self._ready = ready
        self._registry = registry
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int | None:
        if self._server is None or not self._server.sockets:
            return None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        if self._settings.port == 0:
            return
        self._server = await asyncio.start_server(self._handle, self._settings.host, self._settings.port)
        log.info("health and metrics on http://%s:%s", self._settings.host, self.port)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(5):
                request_line = await reader.readline()
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
            parts = request_line.decode("latin-1").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            status, ctype, body = await self._route(parts[0] if parts else "", path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, OSError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        if path == "/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == "/readyz":
            try:
                ready = await self._ready()
            except Exception:
                ready = False
            return (
                ("200 OK", "text/plain", b"ready\n")
                if ready
                else ("503 Service Unavailable", "text/plain", b"not ready\n")
            )
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._registry)
        return "404 Not Found", "text/plain", b"not found\n"

"""A webhook receiver for tests: a tiny HTTP/1.1 server on 127.0.0.1 that records every request.

It answers each request with the next status of ``statuses`` (then 200), or waits ``hang_seconds`` first
(to make an attempt time out), and closes the connection after each answer. Built on
``asyncio.start_server``: what a dispatcher does on the wire is all a test needs to see.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import ssl
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lowercase names
    body: bytes

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


def verifies(secret: str, request: Received) -> bool:
    """The documented check (docs/api.md, Webhooks): HMAC-SHA256 over ``id.timestamp.body`` with the
    base64-decoded secret, any ``v1,`` signature of the header matching."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    content = (
        f"{request.headers['webhook-id']}.{request.headers['webhook-timestamp']}.".encode() + request.body
    )
    expected = base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    for part in request.headers["webhook-signature"].split():
        version, _, signature = part.partition(",")
        if version == "v1" and hmac.compare_digest(signature, expected):
            return True
    return False


@dataclass
class Receiver:
    statuses: list[int] = field(default_factory=list)
    hang_seconds: float = 0.0
    requests: list[Received] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def answer(self, statuses: Iterable[int]) -> None:
        self.statuses = list(statuses)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request_line = (await reader.readline()).decode("latin-1").split()
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if len(request_line) < 2:
                return
            self.requests.append(Received(request_line[0], request_line[1], headers, body))
            if self.hang_seconds:
                await asyncio.sleep(self.hang_seconds)
            status = self.statuses.pop(0) if self.statuses else 200
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".encode())
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()


@asynccontextmanager
async def webhook_receiver(*statuses: int, tls: ssl.SSLContext | None = None) -> AsyncIterator[Receiver]:
    """A running receiver answering ``statuses`` in turn, then 200; over TLS with ``tls`` (a server
    context)."""
    receiver = Receiver(statuses=list(statuses))
    server = await asyncio.start_server(receiver._handle, "127.0.0.1", 0, ssl=tls)
    receiver.port = server.sockets[0].getsockname()[1]
    try:
        yield receiver
    finally:
        server.close()
        await server.wait_closed()

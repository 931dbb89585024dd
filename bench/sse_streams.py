"""Open Server-Sent Events streams against the API and hold them, from a process of its own.

The submit path's stream row (``bench.scenarios.submit_path``) measures submissions while many clients watch
tasks: this process submits ``streams`` tasks (nothing consumes them, so they stay pending and their streams
stay open), opens one ``GET /v1/tasks/{id}/events`` stream per task on a bare keep-alive socket, waits for
each stream's first event (``accepted``), then prints one JSON line (``Opened``) and holds the streams until
its stdin closes. It then prints a second line (``Held``): what the streams received meanwhile, and how many
the server ended early. Like ``bench.http_load`` it never shares the benchmark's event loop, and costs little
once the streams are open (a heartbeat per stream every 15 s).

The spec comes as JSON in ``argv[1]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

# Streams opened at once; the rest wait, so the API sees a burst it can take rather than a flood.
OPEN_CONCURRENCY = 50
OPEN_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class StreamSpec:
    host: str
    port: int
    streams: int
    body: str  # the submission, JSON text
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Opened:
    opened: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    open_s: float = 0.0


@dataclass
class Held:
    # Bytes of heartbeats and events received while held, and streams the server ended meanwhile.
    bytes_received: int = 0
    ended_early: int = 0
    cpu_s: float = 0.0


def _head(method: str, path: str, spec: StreamSpec, extra: dict[str, str]) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {spec.host}:{spec.port}"]
    lines += [f"{name}: {value}" for name, value in {**spec.headers, **extra}.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _submit(spec: StreamSpec) -> str:
    reader, writer = await asyncio.open_connection(spec.host, spec.port)
    try:
        body = spec.body.encode()
        headers = {
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "Connection": "close",
        }
        writer.write(_head("POST", "/v1/tasks", spec, headers) + body)
        answer = await reader.read()
    finally:
        writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 202"):
        raise ValueError(f"submission refused: {head[:40]!r}")
    task_id: str = json.loads(payload)["id"]
    return task_id


class _Stream:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.received = 0
        self.ended = False

    async def hold(self) -> None:
        while chunk := await self.reader.read(4096):
            self.received += len(chunk)
        self.ended = True


async def _open(spec: StreamSpec, slots: asyncio.Semaphore) -> _Stream:
    async with slots:
        task_id = await _submit(spec)
        reader, writer = await asyncio.open_connection(spec.host, spec.port)
        writer.write(_head("GET", f"/v1/tasks/{task_id}/events", spec, {"Accept": "text/event-stream"}))
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            writer.close()
            raise ValueError(f"stream refused: {head[:40]!r}")
        seen = b""
        while b"event: accepted" not in seen:
            chunk = await reader.read(4096)
            if not chunk:
                raise ConnectionError("the stream ended before its first event")
            seen += chunk
        return _Stream(reader, writer)


async def run(spec: StreamSpec) -> None:
    cpu = time.process_time()
    slots = asyncio.Semaphore(OPEN_CONCURRENCY)
    started = time.perf_counter()
    attempts = [asyncio.ensure_future(_open(spec, slots)) for _ in range(spec.streams)]
    done, pending = await asyncio.wait(attempts, timeout=OPEN_TIMEOUT_SECONDS)
    opened = Opened(open_s=time.perf_counter() - started)
    streams: list[_Stream] = []
    for attempt in pending:
        attempt.cancel()
        opened.errors["timeout"] = opened.errors.get("timeout", 0) + 1
    for attempt in done:
        if attempt.exception() is None:
            streams.append(attempt.result())
        else:
            name = type(attempt.exception()).__name__
            opened.errors[name] = opened.errors.get(name, 0) + 1
    opened.opened = len(streams)
    _print(asdict(opened))

    holding = [asyncio.ensure_future(stream.hold()) for stream in streams]
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)  # until the benchmark closes our stdin
    held = Held(bytes_received=sum(s.received for s in streams), ended_early=sum(s.ended for s in streams))
    for task in holding:
        task.cancel()
    for stream in streams:
        stream.writer.close()
    held.cpu_s = time.process_time() - cpu
    _print(asdict(held))


def _print(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


class StreamHolder:
    """The benchmark's side: start the process, wait until the streams are open, close them later."""

    def __init__(self, process: asyncio.subprocess.Process, opened: Opened) -> None:
        self._process = process
        self.opened = opened

    @classmethod
    async def start(cls, spec: StreamSpec) -> StreamHolder:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.sse_streams",
            json.dumps(asdict(spec)),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        try:
            async with asyncio.timeout(OPEN_TIMEOUT_SECONDS + 30):
                line = await process.stdout.readline()
        except TimeoutError:
            process.kill()
            await process.wait()
            raise
        if not line:
            await process.wait()
            raise RuntimeError(f"the stream holder exited ({process.returncode}) before opening its streams")
        return cls(process, Opened(**json.loads(line)))

    async def close(self) -> Held:
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.close()
        try:
            async with asyncio.timeout(30):
                line = await self._process.stdout.readline()
                await self._process.wait()
        except TimeoutError:
            self._process.kill()
            await self._process.wait()
            raise
        return Held(**json.loads(line)) if line else Held()


def _main() -> None:
    spec = StreamSpec(**json.loads(sys.argv[1]))
    asyncio.run(run(spec))


if __name__ == "__main__":
    _main()

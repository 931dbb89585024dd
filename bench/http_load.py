"""A lean HTTP/1.1 load generator for the submit and no-op scenarios, run in a process of its own.

The first harness drove the API from one pooled ``httpx.AsyncClient`` inside the benchmark process. On two
cores that client was a large part of what was measured: each request cost it about as much CPU as the API
spent serving it, and its pool got slower per request as connections were added. Here each connection is a
bare ``asyncio.Protocol`` over one keep-alive socket that writes one pre-encoded request and parses only the
status line and ``Content-Length`` of the answer, in a separate process (``python -m bench.http_load``), so
the generator costs a small fraction of what it measures and never shares the benchmark's event loop.

Two ways to load:

- closed loop (``rate`` 0): ``concurrency`` connections, each sending its next request when the answer to
  the previous one arrived; the figure is what the API sustains at that concurrency;
- open loop (``rate`` > 0): requests are due at a fixed rate whatever the answers, spread over
  ``concurrency`` connections; a request's latency runs from when it was due, so waiting for a free
  connection counts (no coordinated omission).

The spec comes as JSON in ``argv[1]``, the result goes to stdout as JSON (``LoadResult``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

# Latencies need sub-millisecond resolution: uvloop's ``loop.time()`` counts whole milliseconds.
clock = time.perf_counter

# After a 503, a 429 or a connection error the client pauses this long, as a careful client would (each
# one is counted).
RETRY_PAUSE_SECONDS = 0.2
# An answer slower than this counts as an error (the connection is dropped): the run never hangs.
REQUEST_TIMEOUT_SECONDS = 15.0


@dataclass(frozen=True)
class LoadSpec:
    host: str
    port: int
    path: str
    body: str  # JSON text, sent as is
    concurrency: int
    seconds: float
    warmup_seconds: float = 1.0
    rate: float = 0.0  # requests per second; 0: closed loop
    # Closed loop only: stop after this many 202s (0: run for ``seconds``); ``seconds`` is then only a cap and
    # nothing is warm-up: every request counts.
    count: int = 0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class LoadResult:
    ok: int = 0
    wall_s: float = 0.0
    errors: dict[str, int] = field(default_factory=dict)
    latencies_s: list[float] = field(default_factory=list)
    # Open loop only: requests that were due but never sent before the window closed (backlog).
    unsent: int = 0
    # CPU seconds the generator itself used (warm-up included): it shares the cores with the API.
    cpu_s: float = 0.0


def encode_request(spec: LoadSpec) -> bytes:
    body = spec.body.encode()
    lines = [
        f"POST {spec.path} HTTP/1.1",
        f"Host: {spec.host}:{spec.port}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in spec.headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Connection(asyncio.Protocol):
    """One keep-alive connection with at most one request in flight."""

    def __init__(self) -> None:
        self._transport: Any = None  # asyncio's or uvloop's transport
        self._buffer = bytearray()
        self._needed: int | None = None  # bytes of the whole answer, once its head is parsed
        self._status = 0
        self._close_after = False
        self._waiter: asyncio.Future[int] | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(ConnectionError("connection closed by the server"))

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        if self._needed is None:
            end = self._buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self._buffer[:end]).lower()
            self._status = int(head[9:12])
            at = head.find(b"\r\ncontent-length:")
            if at < 0:
                raise ValueError("the load generator needs a Content-Length in every answer")
            stop = head.find(b"\r\n", at + 2)
            length = int(head[at + 17 : stop if stop > 0 else None])
            self._close_after = b"\r\nconnection: close" in head
            self._needed = end + 4 + length
        if len(self._buffer) >= self._needed:
            del self._buffer[: self._needed]
            self._needed = None
            if self._close_after and self._transport is not None:
                self._transport.close()
            if self._waiter is not None and not self._waiter.done():
                self._waiter.set_result(self._status)

    async def request(self, payload: bytes) -> int:
        assert self._transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(payload)
        return await self._waiter


class _Client:
    """A connection that reconnects when the server closed it."""

    def __init__(self, spec: LoadSpec) -> None:
        self._spec = spec
        self._connection: _Connection | None = None

    async def send(self, payload: bytes) -> str:
        """The answer's status code, or the name of the error instead."""
        try:
            if self._connection is None or self._connection.closed:
                loop = asyncio.get_running_loop()
                _, self._connection = await loop.create_connection(
                    _Connection, self._spec.host, self._spec.port
                )
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                return str(await self._connection.request(payload))
        except (OSError, ValueError, TimeoutError) as exc:
            self.close()
            self._connection = None
            return type(exc).__name__

    def close(self) -> None:
        if self._connection is not None and self._connection._transport is not None:
            self._connection._transport.close()


def _count(result: LoadResult, code: str) -> None:
    result.errors[code] = result.errors.get(code, 0) + 1


async def _closed_count(spec: LoadSpec, payload: bytes, result: LoadResult) -> None:
    """``spec.count`` accepted requests as fast as ``concurrency`` closed-loop clients get them accepted."""
    start = clock()
    end = start + spec.seconds
    remaining = spec.count

    async def one_client(client: _Client) -> None:
        nonlocal remaining
        while remaining > 0 and clock() < end:
            remaining -= 1
            while (now := clock()) < end:
                code = await client.send(payload)
                if code == "202":
                    result.ok += 1
                    result.latencies_s.append(clock() - now)
                    break
                _count(result, code)
                if code not in ("503", "429") and code.isdigit():
                    break  # refused for good: counted, not retried
                await asyncio.sleep(RETRY_PAUSE_SECONDS)

    clients = [_Client(spec) for _ in range(spec.concurrency)]
    try:
        await asyncio.gather(*(one_client(c) for c in clients))
    finally:
        for client in clients:
            client.close()
    result.wall_s = clock() - start


async def _closed_loop(spec: LoadSpec, payload: bytes, result: LoadResult) -> None:
    start = clock() + spec.warmup_seconds
    end = start + spec.seconds

    async def one_client(client: _Client) -> None:
        while (now := clock()) < end:
            code = await client.send(payload)
            done = clock()
            measured = now >= start and done <= end
            if code == "202":
                if measured:
                    result.ok += 1
                    result.latencies_s.append(done - now)
                continue
            if measured:
                _count(result, code)
            if code in ("503", "429") or not code.isdigit():
                await asyncio.sleep(RETRY_PAUSE_SECONDS)

    clients = [_Client(spec) for _ in range(spec.concurrency)]
    try:
        await asyncio.gather(*(one_client(c) for c in clients))
    finally:
        for client in clients:
            client.close()
    result.wall_s = spec.seconds


async def _open_loop(spec: LoadSpec, payload: bytes, result: LoadResult) -> None:
    idle: asyncio.Queue[_Client] = asyncio.Queue()
    clients = [_Client(spec) for _ in range(spec.concurrency)]
    for client in clients:
        idle.put_nowait(client)
    start = clock() + spec.warmup_seconds
    end = start + spec.seconds
    # Warm-up at the same rate, from warm-up start: the first measured requests find warm connections.
    origin = clock()
    interval = 1.0 / spec.rate
    in_flight: set[asyncio.Task[None]] = set()
    waiting = 0  # due, but no connection free yet

    async def one_request(due: float) -> None:
        nonlocal waiting
        waiting += 1
        client = await idle.get()
        waiting -= 1
        try:
            code = await client.send(payload)
        finally:
            idle.put_nowait(client)
        done = clock()
        # Every request due in the window counts, however late its answer (the tail is the point).
        if not start <= due < end:
            return
        if code == "202":
            result.ok += 1
            result.latencies_s.append(done - due)
        else:
            _count(result, code)

    sent = 0
    try:
        while (now := clock()) < end:
            due_count = int((now - origin) / interval) + 1
            while sent < due_count:
                due = origin + sent * interval
                task = asyncio.create_task(one_request(due))
                in_flight.add(task)
                task.add_done_callback(in_flight.discard)
                sent += 1
            await asyncio.sleep(min(interval, 0.001))
        # The window is over: what was due but is still waiting for a connection is the backlog.
        result.unsent = waiting
        if in_flight:
            await asyncio.wait(in_flight, timeout=10)
    finally:
        for task in in_flight:
            task.cancel()
        for client in clients:
            client.close()
    result.wall_s = spec.seconds


async def run_load(spec: LoadSpec) -> LoadResult:
    payload = encode_request(spec)
    result = LoadResult()
    cpu = time.process_time()
    if spec.rate > 0:
        await _open_loop(spec, payload, result)
    elif spec.count > 0:
        await _closed_count(spec, payload, result)
    else:
        await _closed_loop(spec, payload, result)
    result.cpu_s = time.process_time() - cpu
    return result


async def run_in_process(spec: LoadSpec, *, timeout: float) -> LoadResult:
    """Run ``spec`` in a separate Python process (this interpreter) and read its result."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.http_load",
        json.dumps(asdict(spec)),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(timeout):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    if process.returncode != 0:
        raise RuntimeError(f"load generator failed ({process.returncode}): {err.decode()[-2000:]}")
    data: dict[str, Any] = json.loads(out)
    return LoadResult(**data)


def _main() -> None:
    spec = LoadSpec(**json.loads(sys.argv[1]))
    try:
        import uvloop  # type: ignore[import-not-found]  # a cheaper loop when it is installed

        runner = uvloop.run
    except ImportError:
        runner = asyncio.run
    result = runner(run_load(spec))
    json.dump(asdict(result), sys.stdout)


if __name__ == "__main__":
    _main()

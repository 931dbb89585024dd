"""The one way taskyard builds its LLM client: the real ``openai.AsyncOpenAI`` on any compatible endpoint."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import ssl
from collections.abc import Iterator

import httpx2  # the openai SDK's own HTTP client: its ``http_client`` must be one of these
import openai

from taskyard_common.errors import PermanentError, TransientError
from taskyard_common.model_specs import ModelSpec
from taskyard_common.settings import LlmSettings

# Connections per client of a ``ClientPool``: a few dozen per client rather than one large pool per
# process, which kept the cost per call flat at hundreds of calls in flight (docs/benchmarks.md).
CONNECTIONS_PER_CLIENT = 32


def settings_for(settings: LlmSettings, spec: ModelSpec | None) -> LlmSettings:
    """The endpoint settings of a model: its catalog entry's ``base_url`` if it has one, else the configured
    endpoint (the API key and timeouts stay the configured ones)."""
    if spec is None or spec.endpoint is None:
        return settings
    return settings.model_copy(update={"base_url": spec.endpoint})


@functools.cache
def default_ssl_context() -> ssl.SSLContext:
    """The TLS context every LLM client of the process shares (what each would build: the default CA
    store, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured): loading the CA store costs 40 ms of CPU, once per
    client otherwise, and a worker's supervisor forks children that inherit it (``supervisor.py``)."""
    return httpx2.create_ssl_context()


def make_client(
    settings: LlmSettings, *, timeout: float | None = None, max_connections: int | None = None
) -> openai.AsyncOpenAI:
    """A client with the SDK's own retries off: retrying is taskyard's job, with its own policy.

    Its HTTP transport is aiohttp's (the SDK's ``DefaultAioHttpClient``), which costs about half the CPU
    per call of the SDK's default httpx/httpcore (docs/benchmarks.md), and the worker's CPU per task is what
    bounds throughput. The transport raises httpx's exceptions, so the SDK's errors and ``classify`` still
    apply: a read timeout is ``APITimeoutError``, and so is a refused connection (the transport maps
    aiohttp's connection errors to a connect timeout): transient either way. ``max_connections`` caps the
    connections (else the SDK's 1,000)."""
    limits = openai.DEFAULT_CONNECTION_LIMITS
    if max_connections is not None:
        limits = httpx2.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    http_client = openai.DefaultAioHttpClient(limits=limits, verify=default_ssl_context())
    return openai.AsyncOpenAI(
        base_url=settings.base_url,
        # A local OpenAI-compatible server may need no key, but the SDK insists on one.
        api_key=settings.api_key.get_secret_value() if settings.api_key else "unused",
        timeout=timeout or settings.timeout_seconds,
        max_retries=0,
        http_client=http_client,
    )


class ClientPool:
    """The LLM clients of one process, sized for ``concurrency`` calls in flight: enough clients of at
    most ``CONNECTIONS_PER_CLIENT`` connections each, every call on the least busy one."""

    def __init__(self, clients: list[openai.AsyncOpenAI]) -> None:
        if not clients:
            raise ValueError("a client pool needs at least one client")
        self._clients = clients
        self._busy = [0] * len(clients)

    @classmethod
    def create(cls, settings: LlmSettings, *, concurrency: int, timeout: float | None = None) -> ClientPool:
        count = max(1, math.ceil(concurrency / CONNECTIONS_PER_CLIENT))
        # Twice the share as a ceiling: a call never waits for a connection while another client idles.
        share = math.ceil(concurrency / count)
        clients = [make_client(settings, timeout=timeout, max_connections=2 * share) for _ in range(count)]
        return cls(clients)

    def __len__(self) -> int:
        return len(self._clients)

    @contextlib.contextmanager
    def client(self) -> Iterator[openai.AsyncOpenAI]:
        """The least busy client, counted busy until the block ends."""
        busy = self._busy
        index = busy.index(min(busy)) if len(busy) > 1 else 0
        busy[index] += 1
        try:
            yield self._clients[index]
        finally:
            busy[index] -= 1

    async def close(self) -> None:
        await asyncio.gather(*(client.close() for client in self._clients))


def classify(exc: Exception) -> Exception:
    """Map an ``openai`` exception onto the taxonomy: 429, 5xx, timeouts and connection errors are transient."""
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 or exc.status_code >= 500:
            return TransientError(f"LLM answered HTTP {exc.status_code}")
        return PermanentError(f"LLM answered HTTP {exc.status_code}")
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | TimeoutError):
        return TransientError(f"LLM unreachable: {type(exc).__name__}")
    return exc

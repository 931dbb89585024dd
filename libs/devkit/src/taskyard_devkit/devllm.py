"""The development model server (``taskyard-devllm``): started, and scripted over its control API.

It is a real OpenAI-compatible HTTP server whose replies are deterministic, so tests and benchmarks exercise
the services' real LLM clients without a model. Its scripts and recorded requests are kept per model name:
each test takes a model name of its own and shares one server.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service


@dataclass
class DevLlm:
    base_url: str  # ends in /v1, as the openai client expects

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    @property
    def health_url(self) -> str:
        return f"{self.root}/healthz"

    def new_model(self) -> str:
        """A model name of the caller's own: scripts and recorded requests are kept per model name."""
        return f"test-{uuid.uuid4().hex[:10]}"

    async def script(
        self,
        model: str,
        steps: list[dict[str, Any]],
        *,
        repeat_last: bool = False,
        by_turn: bool = False,
        when: str | None = None,
    ) -> None:
        """Queue ``steps`` for ``model``; ``by_turn``: answer the step of the conversation's turn instead,
        for the conversations whose first user message contains ``when`` (None: all)."""
        body = {"steps": steps, "repeat_last": repeat_last, "by_turn": by_turn, "when": when}
        async with httpx.AsyncClient() as client:
            response = await client.post(f"{self.root}/_control/scripts/{model}", json=body)
            response.raise_for_status()

    async def limit(self, model: str, rpm: int) -> None:
        """Answer ``model``'s requests above ``rpm`` per minute with 429 (like a provider)."""
        async with httpx.AsyncClient() as client:
            response = await client.put(f"{self.root}/_control/limits/{model}", json={"rpm": rpm})
            response.raise_for_status()

    async def stats(self, model: str) -> dict[str, Any]:
        """``{answered, rate_limited, first_at, last_at}``: the model's requests answered and refused (429),
        and when the first and last answered one came (seconds of the server's monotonic clock)."""
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.root}/_control/stats/{model}")
            response.raise_for_status()
            stats: dict[str, Any] = response.json()
            return stats

    async def requests(self, model: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.root}/_control/requests/{model}")
            response.raise_for_status()
            requests: list[dict[str, Any]] = response.json()["requests"]
            return requests

    async def conversations(self, model: str) -> tuple[dict[str, int], dict[str, int]]:
        """(calls, final answers) per conversation of ``model``, named by the start of its first user
        message: every call is counted, not only the last 1,000 ``requests`` keeps."""
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.root}/_control/conversations/{model}")
            response.raise_for_status()
            body = response.json()
            return body["calls"], body["answers"]

    async def watch_conversations(
        self, model: str, client: httpx.AsyncClient, *, contains: str | None = None
    ) -> tuple[dict[str, int], dict[str, str]]:
        """(calls, callers) per conversation of ``model`` in one request, on the caller's ``client``: for a
        loop that asks many times a second (a new client builds an SSL context, about 25 ms of CPU here);
        ``contains``: only the conversations whose name holds that text (the server filters: a thousand
        entries serialized and parsed ten times a second cost the measured processes' CPUs)."""
        params = {} if contains is None else {"contains": contains}
        response = await client.get(f"{self.root}/_control/conversations/{model}", params=params)
        response.raise_for_status()
        body = response.json()
        return body["calls"], body["callers"]

    async def callers(self, model: str) -> dict[str, str]:
        """The client address ("host:port") of each conversation's latest call: which process asked."""
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.root}/_control/conversations/{model}")
            response.raise_for_status()
            callers: dict[str, str] = response.json()["callers"]
            return callers


def start_devllm(
    log_dir: Path, *, latency_seconds: float | None = None, rpm: int | None = None
) -> tuple[Service, DevLlm]:
    """Start the server on a free port; the caller waits for ``DevLlm.health_url`` (with ``wait_http_ok``
    or its sync twin, whichever it can) and stops the ``Service``.

    ``latency_seconds`` delays every reply (the benchmark's stand-in for a model's time); None leaves the
    server's default; ``rpm`` answers each model's requests above that rate with 429."""
    port = free_port()
    argv = ["taskyard-devllm", "--port", str(port)]
    if latency_seconds is not None:
        argv += ["--latency-seconds", str(latency_seconds)]
    if rpm is not None:
        argv += ["--rpm", str(rpm)]
    return Service("devllm", argv, {}, log_dir), DevLlm(f"http://127.0.0.1:{port}/v1")

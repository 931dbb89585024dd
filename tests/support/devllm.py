"""Drive the development model server (a real OpenAI-compatible HTTP server) from tests."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class DevLlm:
    base_url: str  # ends in /v1, as the openai client expects

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def new_model(self) -> str:
        """A model name of the caller's own: scripts and recorded requests are kept per model name."""
        return f"test-{uuid.uuid4().hex[:10]}"

    async def script(self, model: str, steps: list[dict[str, Any]], *, repeat_last: bool = False) -> None:
        async with httpx.AsyncClient() as client:
            response = await client.post(
                f"{self.root}/_control/scripts/{model}", json={"steps": steps, "repeat_last": repeat_last}
            )
            response.raise_for_status()

    async def requests(self, model: str) -> list[dict[str, Any]]:
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.root}/_control/requests/{model}")
            response.raise_for_status()
            return response.json()["requests"]

"""The one way taskyard builds its LLM client: the real ``openai.AsyncOpenAI`` on any compatible endpoint."""

from __future__ import annotations

import openai

from taskyard_common.errors import PermanentError, TransientError
from taskyard_common.settings import LlmSettings


def make_client(settings: LlmSettings, *, timeout: float | None = None) -> openai.AsyncOpenAI:
    """A client with the SDK's own retries off: retrying is taskyard's job, with its own policy."""
    return openai.AsyncOpenAI(
        base_url=settings.base_url,
        # A local OpenAI-compatible server may need no key, but the SDK insists on one.
        api_key=settings.api_key.get_secret_value() if settings.api_key else "unused",
        timeout=timeout or settings.timeout_seconds,
        max_retries=0,
    )


def classify(exc: Exception) -> Exception:
    """Map an ``openai`` exception onto the taxonomy: 429, 5xx, timeouts and connection errors are transient."""
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 or exc.status_code >= 500:
            return TransientError(f"LLM answered HTTP {exc.status_code}")
        return PermanentError(f"LLM answered HTTP {exc.status_code}")
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | TimeoutError):
        return TransientError(f"LLM unreachable: {type(exc).__name__}")
    return exc

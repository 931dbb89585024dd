"""One chat completion of the agent loop: the call, its errors mapped onto the taxonomy, and the retries
inside the step.

A provider blip (5xx, a timeout, a refused connection, a stream broken off) is tried again here, with
exponential backoff and jitter, ``llm_retries`` times (the specialist's setting) before the attempt fails:
one bad answer must not cost a whole attempt and, without checkpoints, every step before it. A 429 is not retried here: the task is
deferred uncharged through the delay queues (the provider asked for a wait, maybe a long one).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from taskyard_common.errors import PermanentError, TransientError
from taskyard_common.llm import classify
from taskyard_common.messages import Usage
from taskyard_common.model_specs import ModelSpec, price
from taskyard_common.task_errors import TaskErrorType
from taskyard_worker.redaction import redact

log = logging.getLogger(__name__)

# Backoff between the tries of one step: 0.5 s, 1 s, 2 s, ... never more than this (the chart's grace
# period allows this much per retry).
STEP_BACKOFF_BASE_SECONDS = 0.5
STEP_BACKOFF_MAX_SECONDS = 8.0


class AgentError(PermanentError):
    """The task failed for good; ``kind`` is the ``type`` recorded in the task's error."""

    kind = TaskErrorType.AGENT_ERROR


class MaxStepsExceeded(AgentError):
    kind = TaskErrorType.MAX_STEPS_EXCEEDED


class InvalidToolCall(AgentError):
    """The model wrote a tool call that could not be read, again after a correction message."""

    kind = TaskErrorType.INVALID_TOOL_CALL


class InvalidOutput(AgentError):
    """The final answer did not satisfy the specialist's ``output_schema``, again after a correction."""

    kind = TaskErrorType.INVALID_OUTPUT


class BudgetExceeded(AgentError):
    """The task's cost reached its tenant's ``max_cost_per_task``: no further LLM call is made."""

    kind = TaskErrorType.BUDGET_EXCEEDED


@dataclass(frozen=True)
class CostCap:
    """What a task may cost (``limit``, USD) and what it had cost when this attempt started (``spent``:
    routing, earlier attempts and the recorded steps)."""

    limit: float
    spent: float

    def check(self, attempt_cost: float) -> None:
        """Raise ``BudgetExceeded`` when the task has used its limit up: any further call would pass it."""
        total = self.spent + attempt_cost
        if total >= self.limit:
            raise BudgetExceeded(
                f"the task cost {total:.6f} USD, its tenant's max_cost_per_task is {self.limit:.6f} USD"
            )


class AttemptTimeout(TransientError):
    """The attempt ran past its time limit. Transient: the LLM may be faster next time, and the retry
    policy (``max_attempts``) bounds how often a task that is simply too long is tried."""


class LlmRateLimited(TransientError):
    """The LLM answered 429. ``retry_after`` is the wait it asked for in seconds (None: it did not say)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FleetRateLimited(LlmRateLimited):
    """The model's fleet-wide ``rpm``/``tpm`` (``llm_limits``) needs a longer wait than one in place: the
    task is deferred, uncharged, for about that long; nothing was sent."""


class LlmRejected(AgentError):
    """The LLM refused the request (a 4xx other than 429): the same request would be refused again."""

    kind = TaskErrorType.LLM_ERROR


class LlmUnavailable(TransientError):
    """A 5xx, a timeout or a connection error: worth another try inside the step. ``reason`` is the label
    of ``taskyard_llm_step_retries_total``."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a 429 asks for: ``retry-after-ms``, else ``Retry-After`` in seconds or as an HTTP date.
    None when absent or unreadable (the retry policy's backoff applies then)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        with contextlib.suppress(ValueError):
            return max(0.0, float(millis) / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(value))
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


# What a refusal means, by status, in words of ours: the task's error is shown to whoever submitted it, and
# the provider's own text can hold what they must not see (an OpenAI 401 names the worker's masked key).
_REFUSALS = {
    400: "the provider refused the request as invalid (for instance, longer than the model's context)",
    401: "the provider refused the worker's credentials: an operator must fix the LLM settings",
    403: "the provider refused the worker's credentials: an operator must fix the LLM settings",
    404: "the model was not found at the provider",
    413: "the request was too large for the provider",
    422: "the provider could not process the request",
}
# A provider's machine-readable error code ("context_length_exceeded") is kept when it looks like one.
_SAFE_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _refusal(exc: openai.OpenAIError, mapped: Exception) -> str:
    """The tenant-visible text of a 4xx: a stable message per status (and a safe error code), never the
    provider's words; those go to the log, redacted."""
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    body = getattr(exc, "body", None)
    code = body.get("code") if isinstance(body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    if message:
        log.warning("the LLM refused a call (HTTP %s): %s", status, redact(str(message))[:300])
    text = f"{mapped}: {_REFUSALS[status]}" if status in _REFUSALS else str(mapped)
    if isinstance(code, str) and _SAFE_CODE.fullmatch(code):
        text += f" (code {code})"
    return text


def _unavailable_reason(exc: openai.OpenAIError) -> str | None:
    """The step-retry label of an error worth another try, else None."""
    if isinstance(exc, openai.APIStatusError):
        return "server_error" if exc.status_code >= 500 else None
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error"
    return None


def map_error(exc: openai.OpenAIError) -> Exception:
    """An ``openai`` error as the agent's taxonomy."""
    mapped = classify(exc)
    if isinstance(mapped, PermanentError):
        return LlmRejected(_refusal(exc, mapped))
    if isinstance(exc, openai.RateLimitError):
        return LlmRateLimited(str(mapped), retry_after_seconds(exc.response.headers))
    reason = _unavailable_reason(exc)
    if reason is not None:
        return LlmUnavailable(str(mapped), reason)
    if mapped is exc:
        # Not an HTTP status, a timeout nor a connection error (say, an unparsable answer): the retry
        # policy's max_attempts bounds how often it is tried again.
        return TransientError(f"LLM call failed: {type(exc).__name__}")
    return mapped


def usage_of(response: ChatCompletion, model: str, spec: ModelSpec | None = None) -> Usage:
    """The call's tokens, priced from ``spec`` (the catalog entry of ``model``, the model that answered)."""
    if response.usage is None:
        return Usage(model=model)
    # Servers that report usage partly leave fields out (None, despite the types).
    prompt = response.usage.prompt_tokens or 0
    completion = response.usage.completion_tokens or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=response.usage.total_tokens or prompt + completion,
        cost=price(spec, prompt, completion),
        model=model,
    )


def reply_of(response: ChatCompletion) -> dict[str, Any]:
    """The assistant's reply in wire form, only its function tool calls kept (the only tools offered)."""
    message = response.choices[0].message
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.function.name, "arguments": c.function.arguments},
        }
        for c in message.tool_calls or []
        if isinstance(c, ChatCompletionMessageFunctionToolCall)
    ]
    if not calls:
        content = message.content if message.content is not None else (message.refusal or "")
        return {"role": "assistant", "content": content}
    return {"role": "assistant", "content": message.content, "tool_calls": calls}

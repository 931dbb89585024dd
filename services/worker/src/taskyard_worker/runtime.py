"""The agent loop: chat completions with the specialist's tools until the model answers without a tool call.

One ``Agent`` per process (it holds the shared LLM client and tools); each attempt gets a fresh ``RunTrace``,
which the caller reads even when the run fails, so the tokens a failed attempt used are still recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall

from taskyard_common import metrics
from taskyard_common.catalog import SpecialistSpec
from taskyard_common.errors import PermanentError, TransientError
from taskyard_common.llm import ClientPool, classify
from taskyard_common.messages import TaskInput, Usage
from taskyard_common.task_errors import TaskErrorType
from taskyard_worker.tools import ToolError, ToolRegistry

log = logging.getLogger(__name__)


_COMPLETIONS_PATH = "/chat/completions"


class AgentError(PermanentError):
    """The task failed for good; ``kind`` is the ``type`` recorded in the task's error."""

    kind = TaskErrorType.AGENT_ERROR


class MaxStepsExceeded(AgentError):
    kind = TaskErrorType.MAX_STEPS_EXCEEDED


class AttemptTimeout(TransientError):
    """The attempt ran past its time limit. Transient: the LLM may be faster next time, and the retry
    policy (``max_attempts``) bounds how often a task that is simply too long is tried."""


class LlmRateLimited(TransientError):
    """The LLM answered 429. ``retry_after`` is the wait it asked for in seconds (None: it did not say)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LlmRejected(AgentError):
    """The LLM refused the request (a 4xx other than 429): the same request would be refused again."""

    kind = TaskErrorType.LLM_ERROR


@dataclass(frozen=True)
class AgentResult:
    output: str
    steps: int
    tool_calls: list[dict[str, Any]]
    usage: Usage


@dataclass
class RunTrace:
    """What a run has done so far: filled in as it goes, readable after a failure."""

    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def user_content(task_input: TaskInput) -> str:
    """A string input goes as is; a structured one as its JSON text."""
    if isinstance(task_input, str):
        return task_input
    return json.dumps(task_input, ensure_ascii=False, sort_keys=True)


def _usage(response: ChatCompletion) -> Usage:
    if response.usage is None:
        return Usage()
    return Usage(
        prompt_tokens=response.usage.prompt_tokens,
        completion_tokens=response.usage.completion_tokens,
        total_tokens=response.usage.total_tokens,
    )


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


def _provider_detail(exc: openai.OpenAIError) -> str:
    """The provider's own explanation of a refusal (e.g. "context length exceeded"), short: the task's
    error is shown to whoever submitted it, and this is what tells them what to change."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return f": {str(message)[:300]}" if message else ""


class Agent:
    def __init__(
        self,
        spec: SpecialistSpec,
        client: openai.AsyncOpenAI | ClientPool,
        default_model: str,
        tools: ToolRegistry,
        *,
        max_tool_output_chars: int,
    ) -> None:
        self.spec = spec
        self.model = spec.model or default_model
        self._clients = client if isinstance(client, ClientPool) else ClientPool([client])
        self._tools = tools
        self._tool_schemas = tools.openai_tools()
        self._max_tool_output_chars = max_tool_output_chars

    def attempt_timeout(self, requested: float | None) -> float:
        """The run time one attempt gets: what the task asked for (capped by the specialist's
        ``max_timeout_seconds``), else the specialist's ``timeout_seconds``."""
        if requested is None:
            return self.spec.timeout_seconds
        return min(requested, self.spec.max_timeout_seconds)

    async def run(
        self, task_input: TaskInput, trace: RunTrace | None = None, *, timeout_seconds: float | None = None
    ) -> AgentResult:
        """Run one attempt. Raises ``AgentError`` (fail the task) or ``TransientError`` (try again later,
        ``AttemptTimeout`` when the attempt ran out of time)."""
        trace = trace if trace is not None else RunTrace()
        limit = self.attempt_timeout(timeout_seconds)
        try:
            async with asyncio.timeout(limit) as deadline:
                return await self._loop(task_input, trace)
        except TimeoutError:
            if deadline.expired():
                raise AttemptTimeout(f"the attempt did not finish within {limit:g} s") from None
            raise

    async def _loop(self, task_input: TaskInput, trace: RunTrace) -> AgentResult:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.spec.instructions},
            {"role": "user", "content": user_content(task_input)},
        ]
        while trace.steps < self.spec.max_steps:
            response = await self._complete(messages)
            trace.steps += 1
            trace.usage += _usage(response)
            if not response.choices:
                raise TransientError("the LLM answered no choices")
            message = response.choices[0].message
            # Only function tools are offered, so only function calls can come back.
            calls = [
                c for c in message.tool_calls or [] if isinstance(c, ChatCompletionMessageFunctionToolCall)
            ]
            if not calls:
                output = message.content if message.content is not None else (message.refusal or "")
                return AgentResult(output, trace.steps, list(trace.tool_calls), trace.usage)
            messages.append(
                {
                    "role": "assistant",
                    "content": message.content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.function.name, "arguments": c.function.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            if trace.steps >= self.spec.max_steps:
                break  # no call left to read the results: running the tools would be wasted work
            # The calls of one reply are independent by contract: run them concurrently.
            results = await asyncio.gather(*(self._call_tool(c) for c in calls))
            for call, (ok, text) in zip(calls, results, strict=True):
                # The name is the model's choice, possibly not a tool's: bound what gets stored.
                trace.tool_calls.append({"name": call.function.name[:64], "ok": ok})
                messages.append({"role": "tool", "tool_call_id": call.id, "content": self._clip(text)})
        raise MaxStepsExceeded(
            f"no final answer within {self.spec.max_steps} steps (the model kept calling tools)"
        )

    async def _complete(self, messages: list[dict[str, Any]]) -> ChatCompletion:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self._tool_schemas:
            body["tools"] = self._tool_schemas
        try:
            with metrics.track_llm_request(self.model), self._clients.client() as client:
                # The SDK's generic ``post`` (its documented way to call any endpoint) rather than
                # ``chat.completions.create``: the body is already in wire form (plain dicts, our own tool
                # schemas), and ``create`` would walk every parameter against its type hints to transform it
                # again, on every call. Errors, auth and parsing stay the SDK's.
                return await client.post(_COMPLETIONS_PATH, body=body, cast_to=ChatCompletion)
        except openai.OpenAIError as exc:
            mapped = classify(exc)
            if isinstance(mapped, PermanentError):
                raise LlmRejected(f"{mapped}{_provider_detail(exc)}") from exc
            if isinstance(exc, openai.RateLimitError):
                raise LlmRateLimited(str(mapped), retry_after_seconds(exc.response.headers)) from exc
            if mapped is exc:
                # Not an HTTP status, a timeout nor a connection error (say, an unparsable answer): the
                # retry policy's max_attempts bounds how often it is tried again.
                raise TransientError(f"LLM call failed: {type(exc).__name__}") from exc
            raise mapped from exc

    async def _call_tool(self, call: ChatCompletionMessageFunctionToolCall) -> tuple[bool, str]:
        """(ok, the text the model reads). Errors become results the model can react to, never crashes."""
        name = call.function.name
        tool = self._tools.get(name)
        if tool is None:
            return False, f"error: there is no tool named {name!r}; available: {', '.join(self._tools.names)}"
        try:
            arguments = json.loads(call.function.arguments or "{}")
        except json.JSONDecodeError:
            return False, "error: the arguments are not valid JSON"
        if not isinstance(arguments, dict):
            return False, "error: the arguments must be a JSON object"
        try:
            text = await tool.run(arguments)
        except ToolError as exc:
            return False, f"error: {exc}"
        except Exception:
            # A bug in a tool must not take the task down with it: the model hears a generic error, the
            # traceback goes to the log (the arguments do not: they may hold user data).
            log.exception("tool %s crashed", name)
            return False, "error: the tool failed unexpectedly"
        return True, text

    def _clip(self, text: str) -> str:
        limit = self._max_tool_output_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[tool output truncated to {limit} characters]"

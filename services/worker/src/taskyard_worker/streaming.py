"""A streamed chat completion (a specialist with ``stream: true``): its chunks read as they come, their text
handed to a ``TokenSink`` (the task's ``token`` events), and folded into the same ``ChatCompletion`` the
whole-reply call returns, so the agent loop after the call is the same either way.

A stream that ends without its ``finish_reason``, reports an error mid-way or runs past the LLM timeout
raises ``StreamBroken``: the caller tries the whole call again (an in-step retry), as it would a 5xx.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from taskyard_worker.redaction import redact

log = logging.getLogger(__name__)

STREAM_OPTIONS = {"stream": True, "stream_options": {"include_usage": True}}
_FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call"})


class StreamBroken(Exception):
    """The stream failed before its end; ``reason`` is the in-step retry's label."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class TokenSink(Protocol):
    """Where the text of a streamed reply goes while it is written (``tokens.TokenStream``)."""

    def text(self, delta: str) -> None:
        """A piece of the reply's content."""
        ...

    def mute(self) -> None:
        """The reply turned out to be a tool call: drop its text not sent yet, take no more of it."""
        ...


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAccumulator:
    """The chunks of one streamed completion, folded into the completion they make up (choice 0)."""

    def __init__(self) -> None:
        self._first: ChatCompletionChunk | None = None
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._usage: dict[str, int] | None = None
        self.finish_reason: str | None = None

    @property
    def has_tool_calls(self) -> bool:
        return bool(self._calls)

    def add(self, chunk: ChatCompletionChunk) -> str:
        """Take one chunk; returns the content it adds ("" if none)."""
        if self._first is None:
            self._first = chunk
        if chunk.usage is not None:
            usage = chunk.usage
            self._usage = {
                "prompt_tokens": usage.prompt_tokens or 0,
                "completion_tokens": usage.completion_tokens or 0,
                "total_tokens": usage.total_tokens or 0,
            }
        choice = next((c for c in chunk.choices or [] if c.index == 0), None)
        if choice is None:
            return ""
        if choice.finish_reason is not None:
            self.finish_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            return ""
        if delta.refusal:
            self._refusal.append(delta.refusal)
        for part in delta.tool_calls or []:
            call = self._calls.setdefault(part.index, _Call())
            call.id = call.id or (part.id or "")
            if part.function is not None:
                # The name comes whole in the call's first delta; the arguments in fragments.
                call.name = call.name or (part.function.name or "")
                call.arguments.append(part.function.arguments or "")
        text = delta.content or ""
        if text:
            self._content.append(text)
        return text

    def completion(self) -> ChatCompletion:
        """The completion the chunks made up, as the whole-reply call would have answered it."""
        first = self._first
        calls = [
            {
                "id": call.id or f"call_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": "".join(call.arguments)},
            }
            for index, call in sorted(self._calls.items())
        ]
        finish = self.finish_reason if self.finish_reason in _FINISH_REASONS else "stop"
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(self._content) if self._content else None,
            "refusal": "".join(self._refusal) or None,
            "tool_calls": calls or None,
        }
        return ChatCompletion.model_validate(
            {
                "id": first.id if first else "",
                "object": "chat.completion",
                "created": first.created if first else 0,
                "model": first.model if first else "",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": self._usage,
            }
        )


def accumulate(chunks: Iterable[ChatCompletionChunk]) -> ChatCompletion:
    """The completion a whole stream of chunks makes up."""
    accumulator = ChunkAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.completion()


async def stream_completion(
    client: openai.AsyncOpenAI, path: str, body: dict[str, Any], tokens: TokenSink | None
) -> ChatCompletion:
    """One streamed call of ``body``: its text to ``tokens`` as it comes, the completion at the end. Errors
    before the stream are the SDK's (``APIStatusError``, ...); a break after it began is ``StreamBroken``
    or the SDK's ``APIConnectionError``/``APITimeoutError``. The whole call is bounded by the client's
    timeout, as a whole reply is."""
    limit = client.timeout if isinstance(client.timeout, int | float) else None
    accumulator = ChunkAccumulator()
    muted = False
    try:
        async with asyncio.timeout(limit):
            stream = await client.post(
                path,
                body={**body, **STREAM_OPTIONS},
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=openai.AsyncStream[ChatCompletionChunk],
            )
            async with stream:
                async for chunk in stream:
                    text = accumulator.add(chunk)
                    if tokens is None or muted:
                        continue
                    if accumulator.has_tool_calls:
                        tokens.mute()
                        muted = True
                    elif text:
                        tokens.text(text)
    except TimeoutError:
        raise StreamBroken(f"the stream did not end within {limit} s", "timeout") from None
    except openai.APIError as exc:
        if type(exc) is not openai.APIError:
            raise
        # An error event in the stream (the provider failed after it began): try the call again.
        # The provider's words stay in the log (redacted): this text can end up in the task's error.
        log.warning("the LLM's stream failed: %s", redact(exc.message)[:300])
        raise StreamBroken("the LLM's stream failed with an error event", "server_error") from exc
    if accumulator.finish_reason is None:
        raise StreamBroken("the stream ended before its finish_reason", "connection_error")
    return accumulator.completion()

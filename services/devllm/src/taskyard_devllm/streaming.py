"""Streamed replies (``"stream": true``): a completion cut into OpenAI ``chat.completion.chunk`` events.

The content goes out in word pieces, each tool call as a first delta (id, name) and then its arguments in
fragments, then the ``finish_reason``, the usage when ``stream_options.include_usage`` asks for it, and
``data: [DONE]``: what a client's delta accumulation has to cope with on a real provider. A script may
slow the chunks down (``chunk_delay_seconds``) or break the stream off after some of them
(``fail_after_chunks``: an error event, or a dropped connection), to test a client's retries.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

log = logging.getLogger("taskyard_devllm")

_PIECE = re.compile(r"\s*\S+|\s+")
ARGUMENT_FRAGMENT = 10


class ScriptedDisconnect(Exception):
    """Raised inside a stream to drop its connection mid-way (the server closes it without an end)."""


def pieces(content: str) -> list[str]:
    """``content`` in word pieces, each with the white space before it: joined, they are ``content``."""
    return _PIECE.findall(content)


def _chunk(completion: dict[str, Any], delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": completion["id"],
        "object": "chat.completion.chunk",
        "created": completion["created"],
        "model": completion["model"],
        "system_fingerprint": completion["system_fingerprint"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _call_deltas(index: int, call: dict[str, Any]) -> list[dict[str, Any]]:
    arguments = call["function"]["arguments"]
    first = {
        "index": index,
        "id": call["id"],
        "type": "function",
        "function": {"name": call["function"]["name"], "arguments": ""},
    }
    rest = [
        {"index": index, "function": {"arguments": arguments[i : i + ARGUMENT_FRAGMENT]}}
        for i in range(0, len(arguments), ARGUMENT_FRAGMENT)
    ]
    return [first, *rest]


def chunks(completion: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The chunks of a ``chat.completion`` (``app._completion``'s), in the order OpenAI sends them."""
    choice = completion["choices"][0]
    message = choice["message"]
    out = [_chunk(completion, {"role": "assistant", "content": ""})]
    out += [_chunk(completion, {"content": piece}) for piece in pieces(message.get("content") or "")]
    for index, call in enumerate(message.get("tool_calls") or []):
        out += [_chunk(completion, {"tool_calls": [delta]}) for delta in _call_deltas(index, call)]
    out.append(_chunk(completion, {}, choice["finish_reason"]))
    if include_usage:
        for chunk in out:
            chunk["usage"] = None
        out.append({**_chunk(completion, {}), "choices": [], "usage": completion["usage"]})
    return out


async def events(
    chunks: list[dict[str, Any]],
    *,
    chunk_delay_seconds: float = 0.0,
    fail_after_chunks: int | None = None,
    fail_with: str = "error",
) -> AsyncIterator[bytes]:
    """The server-sent events of ``chunks``, ``chunk_delay_seconds`` apart; after ``fail_after_chunks`` of
    them, an error event (``fail_with="error"``, as OpenAI reports a failure mid-stream) or a dropped
    connection (``"disconnect"``) instead of the rest."""
    for number, chunk in enumerate(chunks):
        if number == fail_after_chunks:
            if fail_with == "disconnect":
                log.info("scripted disconnect after %d chunks", number)
                raise ScriptedDisconnect(f"scripted disconnect after {number} chunks")
            error = {"message": "scripted stream error", "type": "server_error", "code": "500"}
            yield f"data: {json.dumps({'error': error})}\n\n".encode()
            return
        if number and chunk_delay_seconds:
            await asyncio.sleep(chunk_delay_seconds)
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"

"""The pages an answer drew on: an answer given after ``http_fetch`` read pages ends with their URLs.

A specialist's instructions can ask the model to cite every URL it used, and a small model often forgets
(the local model fetched the right page and answered from it without naming it). The worker knows which
pages were read: the ``http_fetch`` calls of the conversation whose result was a 2xx response. So a final
answer that does not already cite each of them gets a ``Sources:`` list of the ones it leaves out. Nothing is
added for a page that failed to load or for a conversation that fetched nothing, and an answer that names
every page it read is stored as the model wrote it.

Pure functions over the conversation's messages (a resumed run's included), unit-tested without a model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from taskyard_worker.conversation import tool_calls_of, tool_name
from taskyard_worker.tools.http_fetch import HttpFetch

# How a successful ``http_fetch`` result starts (``HttpFetch._render``): "HTTP 200\n...".
_OK_PREFIX = "HTTP 2"


def _url_of(call: dict[str, Any]) -> str | None:
    function = call.get("function")
    raw = function.get("arguments") if isinstance(function, dict) else None
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return None
    url = arguments.get("url") if isinstance(arguments, dict) else None
    return url.strip() if isinstance(url, str) and url.strip() else None


def fetched_pages(messages: Sequence[dict[str, Any]]) -> list[str]:
    """The URLs ``http_fetch`` read with a 2xx answer, in the order first asked, each once."""
    asked: dict[str, str] = {}  # tool call id -> URL
    for message in messages:
        if message.get("role") == "assistant":
            for call in tool_calls_of(message):
                url = _url_of(call)
                if tool_name(call) == HttpFetch.name and url is not None:
                    asked[str(call.get("id", ""))] = url
    pages: list[str] = []
    for message in messages:
        url = asked.get(str(message.get("tool_call_id", ""))) if message.get("role") == "tool" else None
        content = message.get("content")
        if url is not None and isinstance(content, str) and content.startswith(_OK_PREFIX):
            if url not in pages:
                pages.append(url)
    return pages


def with_sources(answer: str, messages: Sequence[dict[str, Any]]) -> str:
    """``answer``, followed by the fetched pages it does not cite (none left out: unchanged)."""
    missing = [url for url in fetched_pages(messages) if url not in answer]
    if not missing:
        return answer
    return answer.rstrip() + "\n\nSources:\n" + "\n".join(f"- {url}" for url in missing)

"""The pages an answer drew on (sources.py): listed after an answer that leaves them out."""

from __future__ import annotations

import json
from typing import Any

from taskyard_worker.sources import fetched_pages, with_sources

PAGE = "http://127.0.0.1:8000/about.html"
OTHER = "http://127.0.0.1:8000/news.html"


def fetch(call_id: str, url: str, name: str = "http_fetch") -> dict[str, Any]:
    arguments = json.dumps({"url": url})
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


CONVERSATION = [
    {"role": "system", "content": "You are a researcher."},
    {"role": "user", "content": "When was Aldermoor founded?"},
    fetch("c1", PAGE),
    result("c1", "HTTP 200\ncontent-type: text/html\n\nFounded in 1962."),
    fetch("c2", OTHER),
    result("c2", "error: request to 127.0.0.1 failed: ConnectError"),
    fetch("c3", PAGE),
    result("c3", "HTTP 200\ncontent-type: text/html\n\nFounded in 1962."),
]


def test_the_pages_read_with_a_2xx_answer_once_each_in_order() -> None:
    assert fetched_pages(CONVERSATION) == [PAGE]
    not_found = [fetch("c1", OTHER), result("c1", "HTTP 404\ncontent-type: text/html\n\nNot found")]
    assert fetched_pages(not_found) == []


def test_an_answer_that_leaves_a_page_out_ends_with_it() -> None:
    assert with_sources("Aldermoor was founded in 1962.  ", CONVERSATION) == (
        f"Aldermoor was founded in 1962.\n\nSources:\n- {PAGE}"
    )


def test_an_answer_that_cites_every_page_is_kept_as_written() -> None:
    answer = f"Founded in 1962 ({PAGE})."
    assert with_sources(answer, CONVERSATION) == answer


def test_no_fetch_no_sources() -> None:
    calculator = [fetch("c1", "1 + 1", name="calculator"), result("c1", "HTTP 200 is not a page")]
    assert with_sources("2", calculator) == "2"
    assert with_sources("2", [{"role": "user", "content": "1 + 1?"}]) == "2"


def test_malformed_calls_are_ignored() -> None:
    broken = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "function": {"name": "http_fetch", "arguments": "{not json"}}],
    }
    no_url = fetch("c2", "")
    messages = [broken, result("c1", "HTTP 200\n\nx"), no_url, result("c2", "HTTP 200\n\nx")]
    assert fetched_pages(messages) == []

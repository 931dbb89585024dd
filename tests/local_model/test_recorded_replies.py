"""The local model's recorded replies (fixtures/recorded_replies.json, scripts/record_tool_replies.py) read by
the model server's handler and by the worker: fast, without the model, in the default run.

Every reply that holds a calculator call (bare, pretty-printed, fenced, after an answer worked out in the
model's head, with doubled braces) must become that call in the server, so the worker gets ``tool_calls``;
and the worker's own reading of the same text (for endpoints without this server) must agree. A reply
without a call stays the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from taskyard_worker.text_tool_calls import Verdict, looks_like_tool_call, read_text_calls
from tests.local_model.conftest import load_script

server = load_script("local_model_server")

REPLIES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "recorded_replies.json").read_text(encoding="utf-8")
)["replies"]


def _id(reply: dict[str, Any]) -> str:
    return f"{reply['request'][:24]}-grammar={reply['grammar']}"


@pytest.mark.parametrize("reply", REPLIES, ids=[_id(r) for r in REPLIES])
def test_a_recorded_reply_is_read_alike_by_the_server_and_the_worker(reply: dict[str, Any]) -> None:
    text = reply["text"]
    parsed = server.parse_calls(text, {"calculator"})
    worker = read_text_calls(text, ["calculator"])
    if not looks_like_tool_call(text):
        assert parsed is None and worker.verdict is Verdict.ANSWER
        return
    assert parsed is not None, text
    calls, _ = parsed
    assert [c["function"]["name"] for c in calls] == ["calculator"]
    assert worker.verdict is Verdict.CALLS, worker.problem
    assert [json.loads(c["arguments"]) for c in worker.calls] == [
        json.loads(c["function"]["arguments"]) for c in calls
    ]


def test_the_recordings_hold_the_issue_requests_and_the_doubled_braces() -> None:
    requests = {r["request"] for r in REPLIES}
    assert {'{"question": "What is 12 * (3 + 4)?"}', "What is 17 * 23 + 4? Use the calculator."} <= requests
    # Under the first grammar (it held only the reply's opening) the model still wrote "{{" after its answer.
    assert any("{{" in r["text"] for r in REPLIES if r["grammar"] == "first")
    assert not any("{{" in r["text"] for r in REPLIES if r["grammar"] == "second")

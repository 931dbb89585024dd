"""The local model server's streamed replies (``"stream": true``), without the model: its text goes on as
llama-cpp-python streams it, and a tool call in it comes out as OpenAI tool-call deltas."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.local_model.conftest import load_script

server = load_script("local_model_server")

CALCULATOR = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
CALL = '{"name": "calculator", "arguments": {"expression": "1+1"}}'


def llama_chunks(pieces: list[str]) -> list[dict[str, Any]]:
    """The chunks llama-cpp-python's chat handler streams: the role, one per piece, then the finish."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {
            "id": "chatcmpl-1",
            "model": "m",
            "created": 1,
            "object": "chat.completion.chunk",
            "choices": [choice],
        }

    return [chunk({"role": "assistant"}), *(chunk({"content": p}) for p in pieces), chunk({}, "stop")]


class StreamingLlama:
    def __init__(self, pieces: list[str]) -> None:
        def template(**kwargs: Any) -> Any:
            assert kwargs["stream"] is True
            return iter(llama_chunks(pieces))

        self._chat_handlers = {"chat_template.default": template}


def streamed(pieces: list[str], **kwargs: Any) -> list[dict[str, Any]]:
    chunks = server.taskyard_tools(
        llama=StreamingLlama(pieces), messages=[], **{"tools": CALCULATOR, "stream": True, **kwargs}
    )
    return list(chunks)


def contents(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["choices"][0]["delta"]["content"] for c in chunks if c["choices"][0]["delta"].get("content")]


def calls(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls") or []]


def finish(chunks: list[dict[str, Any]]) -> str:
    assert [c["choices"][0]["finish_reason"] for c in chunks][:-1] == [None] * (len(chunks) - 1)
    return chunks[-1]["choices"][0]["finish_reason"]


def test_plain_text_goes_on_as_it_comes():
    pieces = ["The", " answer", " is", " 84."]
    chunks = streamed(pieces)
    assert contents(chunks) == pieces and calls(chunks) == []
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert finish(chunks) == "stop"


@pytest.mark.parametrize(
    "pieces",
    [
        ["<tool", "_call>", CALL[:20], CALL[20:], "</tool_call>"],
        ["  \n", "<tool_call>\n" + CALL + "\n</tool_call>"],
        ["```json\n", CALL, "\n```\nThat is 2."],  # a call opening the reply, its guessed result dropped
        [CALL],
    ],
)
def test_a_reply_that_is_a_call_streams_its_call_as_a_delta(pieces: list[str]):
    chunks = streamed(pieces)
    assert contents(chunks) == []
    [call] = calls(chunks)
    assert call["index"] == 0 and call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"]["name"] == "calculator"
    assert json.loads(call["function"]["arguments"]) == {"expression": "1+1"}
    assert finish(chunks) == "tool_calls"


def test_text_before_a_block_goes_on_and_the_block_becomes_calls():
    block = "<tool_call>" + CALL + "</tool_call>"
    chunks = streamed(["Let me ", "compute.", "\n<", "tool_call>", CALL, "</tool_call>\n", block, " Done."])
    assert contents(chunks) == ["Let me ", "compute.", "\n", "\n Done."]
    # The same text as the whole reply has around its calls.
    whole = server.parse_calls("Let me compute.\n" + block + "\n" + block + " Done.", {"calculator"})
    assert "".join(contents(chunks)) == whole[1]
    assert [c["index"] for c in calls(chunks)] == [0, 1]
    assert finish(chunks) == "tool_calls"


@pytest.mark.parametrize(
    ("pieces", "expected"),
    [
        (['{"answer"', ": 84}"], ['{"answer": 84}']),  # JSON, not a call: held to the end, then text
        (["a <", "b> c"], ["a ", "<b> c"]),  # a "<" that opens no block
        (["Sure: ", "<tool_call>not json", "</tool_call>"], ["Sure: ", "<tool_call>not json</tool_call>"]),
    ],
)
def test_text_that_only_looked_like_a_call_comes_out_whole(pieces: list[str], expected: list[str]):
    chunks = streamed(pieces)
    assert contents(chunks) == expected and calls(chunks) == []
    assert "".join(contents(chunks)) == "".join(pieces)
    assert finish(chunks) == "stop"


@pytest.mark.parametrize("kwargs", [{"tool_choice": "none"}, {"tools": None}])
def test_a_stream_without_tools_to_call_is_llama_cpps_own(kwargs: dict[str, Any]):
    pieces = ["<tool_call>", CALL, "</tool_call>"]
    assert streamed(pieces, **kwargs) == llama_chunks(pieces)

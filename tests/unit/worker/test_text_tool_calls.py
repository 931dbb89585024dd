"""Tool calls written as text: the recorded replies of small models in fixtures/text_tool_calls.json."""

import json
from pathlib import Path
from typing import Any

import pytest

from taskyard_worker.text_tool_calls import (
    Verdict,
    as_tool_calls,
    correction,
    echoes_correction,
    looks_like_tool_call,
    read_text_calls,
)

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "fixtures" / "text_tool_calls.json").read_text(encoding="utf-8")
)
OFFERED = ("calculator",)


@pytest.mark.parametrize("case", CASES, ids=[c["why"] for c in CASES])
def test_recorded_reply_is_read_as_expected(case: dict[str, Any]) -> None:
    read = read_text_calls(case["content"], OFFERED)
    assert read.verdict == case["verdict"], read.problem
    calls = [{"name": c["name"], "arguments": json.loads(c["arguments"])} for c in read.calls]
    assert calls == case.get("calls", [])
    assert bool(read.problem) == (read.verdict is Verdict.GARBLED)


def test_the_issue_example_is_a_calculator_call() -> None:
    read = read_text_calls('{{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}}', OFFERED)
    assert read.verdict is Verdict.CALLS
    assert read.calls == [{"name": "calculator", "arguments": '{"expression": "12 * (3 + 4)"}'}]


def test_without_tools_offered_every_text_is_an_answer() -> None:
    assert read_text_calls('{"name": "calculator", "arguments": {}}', ()).verdict is Verdict.ANSWER


def test_an_unknown_tool_is_named_in_the_problem() -> None:
    read = read_text_calls('{"name": "web_search", "arguments": {}}', OFFERED)
    assert read.verdict is Verdict.GARBLED and "web_search" in read.problem


def test_a_sentence_about_names_and_arguments_is_not_a_call() -> None:
    assert not looks_like_tool_call("The name of the argument is not important.")
    assert looks_like_tool_call('{"name": "x", "arguments": 1}')


def test_the_correction_says_what_went_wrong_and_which_tools_exist() -> None:
    message = correction("the tool call is not valid JSON", ["calculator", "http_fetch"])
    assert message["role"] == "user"
    assert "not valid JSON" in message["content"] and "calculator, http_fetch" in message["content"]


def test_a_text_call_becomes_a_wire_form_reply() -> None:
    reply, read = as_tool_calls({"role": "assistant", "content": CASES[0]["content"]}, OFFERED)
    assert read.verdict is Verdict.CALLS and reply["content"] is None
    [call] = reply["tool_calls"]
    assert call["id"].startswith("call_text_") and call["type"] == "function"
    assert call["function"] == {"name": "calculator", "arguments": '{"expression": "12 * (3 + 4)"}'}


def test_a_reply_with_structured_calls_or_an_answer_is_unchanged() -> None:
    structured = {"role": "assistant", "content": "{}", "tool_calls": [{"id": "a"}]}
    assert as_tool_calls(structured, OFFERED) == (structured, read_text_calls("", ()))
    answer = {"role": "assistant", "content": "84"}
    assert as_tool_calls(answer, OFFERED)[0] is answer


def test_an_answer_repeating_the_correction_is_recognised():
    text = correction("not valid JSON", ["calculator"])["content"]
    assert echoes_correction(text) and echoes_correction(text.split(". ", 1)[1].replace(" ", "\n  "))
    assert not echoes_correction("Category: billing\nUrgency: high")

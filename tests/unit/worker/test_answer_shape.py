from __future__ import annotations

from typing import Any

import pytest

from taskyard_common.catalog import SpecialistSpec
from taskyard_worker.answer_shape import AnswerShape, canonical
from taskyard_worker.llm_calls import InvalidOutput

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"urgency": {"enum": ["low", "high"]}},
    "required": ["urgency"],
}


def shape(schema: dict[str, Any] | None = SCHEMA) -> AnswerShape:
    spec = SpecialistSpec(name="support", description="d", instructions="i", output_schema=schema)
    return AnswerShape(spec)


def answer(content: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def test_without_a_schema_nothing_is_asked_or_checked() -> None:
    plain = shape(None)
    body: dict[str, Any] = {}
    plain.ask(body)
    assert body == {}
    assert plain.read(answer("any text")) == (None, None) and plain.recorded("any text") is None


def test_a_reply_is_read_once_as_an_answer_a_problem_or_neither() -> None:
    attempt = shape()
    assert attempt.read(answer('{"urgency": "low"}')) == ({"urgency": "low"}, None)
    data, problem = attempt.read(answer("Urgency: high"))
    assert data is None and problem is not None and "not JSON" in problem
    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}
    assert attempt.read(calls) == (None, None)  # tool calls are not an answer to check


def test_one_correction_per_attempt_then_the_task_fails() -> None:
    attempt = shape()
    correction = attempt.refuse("the answer is not JSON")
    assert correction["role"] == "user" and "the answer is not JSON" in correction["content"]
    with pytest.raises(InvalidOutput, match="after a correction: at urgency") as caught:
        attempt.refuse("at urgency")
    assert caught.value.kind == "invalid_output"
    # A new attempt has its own correction.
    assert shape().refuse("p")["role"] == "user"


def test_a_recorded_answer_is_read_again_on_resume() -> None:
    assert shape().recorded('{"urgency": "high"}') == {"urgency": "high"}
    with pytest.raises(InvalidOutput, match="recorded answer"):
        shape().recorded("high")


def test_the_correction_names_the_problem_and_shows_a_short_schema() -> None:
    message = shape().refuse("the answer is not JSON")
    assert message["role"] == "user"
    assert "the answer is not JSON" in message["content"] and '"urgency"' in message["content"]
    big = {"type": "object", "description": "x" * 3000}
    assert "The schema" not in shape(big).refuse("p")["content"]


def test_the_stored_text_is_the_objects_json() -> None:
    assert canonical({"b": "ü", "a": 1}) == '{"b": "ü", "a": 1}'

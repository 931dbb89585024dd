from __future__ import annotations

from typing import Any

import pytest

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.output_schemas import OutputError
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


def test_without_a_schema_nothing_is_asked_or_checked() -> None:
    plain = shape(None)
    body: dict[str, Any] = {}
    plain.ask(body)
    assert body == {} and not plain.required
    assert plain.check("any text") is None and plain.recorded("any text") is None
    assert not plain.conforms('{"urgency": "low"}')


def test_one_correction_per_attempt_then_the_task_fails() -> None:
    attempt = shape()
    with pytest.raises(OutputError, match="not JSON"):
        attempt.check("Urgency: high")
    with pytest.raises(InvalidOutput, match="after a correction") as caught:
        attempt.check('{"urgency": "urgent"}')
    assert caught.value.kind == "invalid_output"
    # A new attempt has its own correction.
    assert shape().check('{"urgency": "low"}') == {"urgency": "low"}


def test_a_recorded_answer_is_read_again_on_resume() -> None:
    assert shape().recorded('{"urgency": "high"}') == {"urgency": "high"}
    with pytest.raises(InvalidOutput, match="recorded answer"):
        shape().recorded("high")


def test_the_correction_names_the_problem_and_shows_a_short_schema() -> None:
    message = shape().correction("the answer is not JSON")
    assert message["role"] == "user"
    assert "the answer is not JSON" in message["content"] and '"urgency"' in message["content"]
    big = {"type": "object", "description": "x" * 3000}
    assert "The schema" not in shape(big).correction("p")["content"]


def test_the_stored_text_is_the_objects_json() -> None:
    assert canonical({"b": "ü", "a": 1}) == '{"b": "ü", "a": 1}'

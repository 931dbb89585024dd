from __future__ import annotations

from typing import Any

import pytest

from taskyard_common.catalog import SpecialistSpec
from taskyard_common.output_schemas import (
    MAX_SCHEMA_BYTES,
    OutputError,
    check_schema,
    read_answer,
    response_format,
)

TICKET: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"enum": ["billing", "technical"]},
        "urgency": {"enum": ["low", "medium", "high", "critical"]},
        "summary": {"type": "string"},
    },
    "required": ["category", "urgency"],
}


def spec(**fields: Any) -> SpecialistSpec:
    return SpecialistSpec(name="support", description="tickets", instructions="triage", **fields)


def test_a_valid_answer_is_read_as_its_object() -> None:
    answer = '{"category": "billing", "urgency": "high", "summary": "charged twice"}'
    assert read_answer(answer, TICKET) == {
        "category": "billing",
        "urgency": "high",
        "summary": "charged twice",
    }


def test_a_fenced_answer_is_read() -> None:
    assert (
        read_answer('```json\n{"category": "technical", "urgency": "low"}\n```', TICKET)["urgency"] == "low"
    )


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Category: billing\nUrgency: high", "not JSON"),
        ('["billing", "high"]', "one JSON object, not list"),
        ('{"category": "support", "urgency": "high"}', "at category"),
        ('{"category": "billing"}', "'urgency' is a required property"),
        ('{"category": "billing", "urgency": "urgent"}', "at urgency"),
    ],
)
def test_an_answer_outside_the_schema_says_what_is_wrong(answer: str, reason: str) -> None:
    with pytest.raises(OutputError, match=reason):
        read_answer(answer, TICKET)


def test_the_error_quotes_a_long_answer_only_in_part() -> None:
    with pytest.raises(OutputError) as caught:
        read_answer("no json " * 500, TICKET)
    assert len(str(caught.value)) < 300


def test_response_format_names_the_specialist() -> None:
    body = response_format(TICKET, "support-analyst")
    assert body == {
        "type": "json_schema",
        "json_schema": {"name": "support-analyst_answer", "schema": TICKET},
    }
    assert len(response_format(TICKET, "x" * 80)["json_schema"]["name"]) == 64


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"type": "array", "items": {"type": "string"}}, "describe a JSON object"),
        ({"properties": {}}, "describe a JSON object"),
        (
            {"type": "object", "properties": {"a": {"type": "strin"}}},
            "not a valid JSON Schema at properties/a/type",
        ),
        ({"type": "object", "required": "a"}, "not a valid JSON Schema at required"),
        ({"type": "object", "$ref": "#/$defs/missing"}, "does not resolve"),
        ({"type": "object", "description": "x" * MAX_SCHEMA_BYTES}, "larger than"),
    ],
)
def test_a_schema_that_cannot_check_an_object_is_refused(schema: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_schema(schema)


def test_the_catalog_refuses_an_invalid_output_schema() -> None:
    with pytest.raises(ValueError, match="output_schema must describe a JSON object"):
        spec(output_schema={"type": "string"})


def test_the_catalog_keeps_a_valid_output_schema() -> None:
    assert spec(output_schema=TICKET).output_schema == TICKET
    assert spec().output_schema is None

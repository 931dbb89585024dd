import pytest
from pydantic import ValidationError

from taskyard_api.models import MAX_INPUT_DEPTH, TaskSubmission


@pytest.mark.parametrize(
    "body",
    [
        {"input": "Summarize this"},
        {"input": {"question": "why?", "context": [1, 2.5, None, True]}},
        {"input": "x", "specialist": "summarizer", "metadata": {"team": "ops", "empty": ""}},
    ],
)
def test_valid_submissions(body: dict):
    assert TaskSubmission.model_validate(body).input == body["input"]


def _nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"input": ""},
        {"input": " \n\t"},
        {"input": {}},
        {"input": 3},
        {"input": ["a"]},
        {"input": "x", "extra": 1},
        {"input": "x", "specialist": ""},
        {"input": "x", "metadata": {"k": 1}},
        {"input": "x", "metadata": {"": "v"}},
        {"input": "x", "metadata": {f"k{i}": "v" for i in range(65)}},
        {"input": "a\x00b"},
        {"input": {"a\x00": "b"}},
        {"input": {"a": [float("nan")]}},
        {"input": {"a": float("inf")}},
        {"input": "lone \ud800"},
        {"input": "x", "metadata": {"k": "v\x00"}},
        {"input": _nested(MAX_INPUT_DEPTH + 1)},
    ],
)
def test_invalid_submissions(body: dict):
    with pytest.raises(ValidationError):
        TaskSubmission.model_validate(body)


def test_nesting_up_to_the_limit_is_fine():
    TaskSubmission.model_validate({"input": _nested(MAX_INPUT_DEPTH - 1)})

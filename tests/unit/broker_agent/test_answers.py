"""Parsing the LLM's answer: real ``openai`` response models, built as the SDK builds them from JSON."""

import json

import pytest
from openai.types.chat import ChatCompletion

from taskyard_broker_agent.routing.answers import InvalidAnswer, parse_answer
from taskyard_common.messages import RoutingMethod

NAMES = ("summarizer", "support-analyst", "researcher", "general")


def completion(*, arguments=None, name="route_task", content=None) -> ChatCompletion:
    calls = []
    if arguments is not None:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        calls = [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}]
    return ChatCompletion.model_validate(
        {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls" if calls else "stop",
                    "message": {"role": "assistant", "content": content, "tool_calls": calls or None},
                }
            ],
        }
    )


def test_a_valid_answer_becomes_an_llm_decision():
    answer = completion(
        arguments={"specialist": "researcher", "reason": " needs  sources ", "confidence": 0.8}
    )
    decision = parse_answer(answer, NAMES, 0.0)
    assert decision.method is RoutingMethod.LLM
    assert (decision.specialist, decision.reason, decision.confidence) == ("researcher", "needs sources", 0.8)


@pytest.mark.parametrize(
    ("response", "complaint"),
    [
        (completion(content="I think the researcher"), "no route_task tool call"),
        (completion(arguments={"specialist": "general"}, name="other_tool"), "no route_task tool call"),
        (completion(arguments="{not json"), "json_invalid"),
        (completion(arguments={"specialist": "general", "reason": "x"}), "confidence: missing"),
        (completion(arguments={"specialist": "general", "reason": "x", "confidence": 7}), "less_than_equal"),
        (
            completion(arguments={"specialist": "hacker", "reason": "x", "confidence": 1}),
            "not in the catalog",
        ),
    ],
)
def test_unusable_answers_are_refused(response, complaint):
    with pytest.raises(InvalidAnswer, match=complaint):
        parse_answer(response, NAMES, 0.0)


def test_answers_below_the_minimum_confidence_are_refused():
    answer = completion(arguments={"specialist": "general", "reason": "unsure", "confidence": 0.3})
    with pytest.raises(InvalidAnswer, match="below the minimum"):
        parse_answer(answer, NAMES, 0.5)
    assert parse_answer(answer, NAMES, 0.3).specialist == "general"


def test_an_empty_reason_is_replaced_and_a_long_one_cut():
    empty = completion(arguments={"specialist": "general", "reason": "  ", "confidence": 0.5})
    assert parse_answer(empty, NAMES, 0.0).reason
    long = completion(arguments={"specialist": "general", "reason": "why " * 1000, "confidence": 0.5})
    assert len(parse_answer(long, NAMES, 0.0).reason) == 2000

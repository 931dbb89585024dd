import uuid

import pytest

from taskyard_common.errors import InvalidMessage
from taskyard_common.messages import (
    IntakeMessage,
    RoutingDecision,
    RoutingMethod,
    Usage,
    WorkMessage,
    decode,
    encode,
)


def test_intake_round_trip_keeps_structured_input():
    message = IntakeMessage(task_id=uuid.uuid4(), input={"ticket": "refund", "n": 2}, metadata={"k": "v"})
    assert decode(IntakeMessage, encode(message)) == message


def test_work_message_round_trip():
    decision = RoutingDecision(method=RoutingMethod.LLM, specialist="general", reason="r", confidence=0.5)
    message = WorkMessage(task_id=uuid.uuid4(), specialist="general", input="hi", routing=decision)
    decoded = decode(WorkMessage, encode(message))
    assert decoded.routing.method is RoutingMethod.LLM
    assert decoded.schema_version == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"{}",
        b'{"task_id": "nope", "input": "x"}',
        # A newer producer's schema version is refused, not misread.
        b'{"schema_version": 2, "task_id": "6d1f0f8e-6c55-4d0c-9a57-1f1f1f1f1f1f", "input": "x"}',
        # Unknown fields are refused (extra="forbid").
        b'{"task_id": "6d1f0f8e-6c55-4d0c-9a57-1f1f1f1f1f1f", "input": "x", "surprise": 1}',
    ],
)
def test_decode_refuses_anything_else_as_permanent(body):
    with pytest.raises(InvalidMessage):
        decode(IntakeMessage, body)


def test_decode_error_does_not_echo_the_body():
    with pytest.raises(InvalidMessage) as caught:
        decode(IntakeMessage, b'{"task_id": "secret-user-text", "input": "x"}')
    assert "secret-user-text" not in str(caught.value)


def test_routing_decision_bounds():
    with pytest.raises(ValueError):
        RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="", confidence=1.5)
    with pytest.raises(ValueError):
        RoutingDecision(method=RoutingMethod.RULES, specialist="Not A Name", reason="", confidence=0.5)


def test_usage_adds():
    total = Usage(prompt_tokens=1, completion_tokens=2, total_tokens=3) + Usage(
        prompt_tokens=10, completion_tokens=20, total_tokens=30
    )
    assert total == Usage(prompt_tokens=11, completion_tokens=22, total_tokens=33)

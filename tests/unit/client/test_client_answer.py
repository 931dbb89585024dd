"""Rebuilding the streamed answer from token events: deltas, restart markers, a new attempt."""

from __future__ import annotations

from typing import Any

from taskyard_client.answer import AnswerText
from taskyard_client.models import TaskEvent

_seq = iter(range(1, 10_000))


def event(kind: str, **data: Any) -> TaskEvent:
    return TaskEvent(seq=next(_seq), type=kind, data=data, at="2025-05-01T09:30:00Z")  # type: ignore[arg-type]


def test_deltas_build_the_step_and_a_restart_voids_it():
    answer = AnswerText()
    assert answer.text == "" and answer.step is None
    assert answer.apply(event("token", step=1, text="Hel"))
    assert answer.apply(event("token", step=1, text="lo"))
    assert answer.text == "Hello"
    answer.apply(event("token", step=1, restart=True))
    assert answer.text == ""
    answer.apply(event("token", step=1, text="Bonjour"))
    assert (answer.step, answer.text) == (1, "Bonjour")


def test_the_answer_is_the_last_step_and_a_new_attempt_voids_unrecorded_steps():
    answer = AnswerText()
    answer.apply(event("attempt_started", attempt=1))
    answer.apply(event("token", step=1, text="thinking"))
    answer.apply(event("llm_call", step=1, tokens=10))
    answer.apply(event("token", step=2, text="half an ans"))
    assert answer.text == "half an ans"
    # The attempt failed mid-step 2; the next one resumes after the recorded step 1 and writes step 2 again.
    assert answer.apply(event("attempt_started", attempt=2))
    assert answer.text == "thinking"
    answer.apply(event("token", step=2, text="the answer"))
    assert answer.text == "the answer"
    assert not answer.apply(event("completed"))


def test_tokens_without_a_step_and_odd_data_do_not_break_it():
    answer = AnswerText()
    answer.apply(event("token", text="a"))
    answer.apply(event("token", step=0, text=None))
    answer.apply(event("token", step="x", text="b"))
    assert answer.text == "ab"

"""The turn after a tool result (fixtures/after_tool_result.json): fast, without the model, in the default run.

Issue 20's "What is 17 * 23 + 4? Use the calculator." ended with "I'm sorry, but I can't assist with that."
after the calculator had answered 395: Qwen's template shows a tool result as a ``user`` turn, and the 1.5B
model took it for the user's reply (recorded: "Thank you! Is there anything else I can help you with?").
The server's handler now closes such a conversation with a system turn saying what the results are for; with
it, every recorded reply states 395."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.local_model.conftest import load_script
from tests.local_model.test_tool_call_tasks import numbers_in

server = load_script("local_model_server")

RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "after_tool_result.json").read_text(encoding="utf-8")
)
CALCULATOR = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]


class TemplateError(Exception):
    """What a chat template that refuses a conversation raises (jinja2's)."""

    __module__ = "jinja2.exceptions"


class Template:
    """The model's chat handler as the server's handler uses it: records what it renders, answers text."""

    def __init__(self, refuse_system_turns_after_the_first: bool = False) -> None:
        self.refuse = refuse_system_turns_after_the_first
        self.rendered: list[list[dict[str, Any]]] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        messages = kwargs["messages"]
        if self.refuse and any(m["role"] == "system" for m in messages[1:]):
            raise TemplateError("Conversation roles must alternate")
        self.rendered.append(messages)
        return {"choices": [{"message": {"role": "assistant", "content": "395"}, "finish_reason": "stop"}]}


class Llama:
    def __init__(self, template: Template) -> None:
        self._chat_handlers = {"chat_template.default": template}


@pytest.mark.parametrize("exchange", sorted(RECORDED["exchanges"]))
def test_the_recorded_exchange_reaches_the_model_closed_by_a_system_turn(exchange: str) -> None:
    messages = RECORDED["exchanges"][exchange]
    sent = copy.deepcopy(messages)
    template = Template()
    response = server.taskyard_tools(llama=Llama(template), messages=messages, tools=CALCULATOR)
    [rendered] = template.rendered
    assert rendered[-1] == {"role": "system", "content": server.AFTER_TOOL_RESULTS}
    assert rendered[-2] == {"role": "tool", "tool_call_id": "call_1", "content": "395"}
    assert len(rendered) == len(messages) + 1 and messages == sent  # the client's list is left alone
    assert response["choices"][0]["message"]["content"] == "395"


def test_a_conversation_that_does_not_end_with_a_tool_result_is_rendered_as_sent() -> None:
    opening = RECORDED["exchanges"]["guess"][:2]
    template = Template()
    server.taskyard_tools(llama=Llama(template), messages=opening, tools=CALCULATOR)
    assert template.rendered == [opening]


def test_a_template_that_refuses_the_system_turn_gets_the_conversation_as_sent() -> None:
    messages = RECORDED["exchanges"]["call only"]
    template = Template(refuse_system_turns_after_the_first=True)
    server.taskyard_tools(llama=Llama(template), messages=messages, tools=CALCULATOR)
    assert [m["role"] for m in template.rendered[-1]] == ["system", "user", "assistant", "tool"]


def test_other_errors_of_the_template_are_not_swallowed() -> None:
    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("the model failed")

    llama = Llama(Template())
    llama._chat_handlers["chat_template.default"] = broken  # type: ignore[assignment]
    with pytest.raises(RuntimeError):
        server.taskyard_tools(llama=llama, messages=RECORDED["exchanges"]["guess"], tools=CALCULATOR)


def test_the_recorded_replies_close_the_exchange_without_the_turn_and_answer_with_it() -> None:
    """What the fix rests on, as recorded: same exchanges, same seeds."""
    without = [r for r in RECORDED["replies"] if not r["closing_turn"]]
    with_turn = [r for r in RECORDED["replies"] if r["closing_turn"]]
    assert len(without) == len(with_turn) == 6
    # Without it: thanks, a refusal, a question back ("What is 395?", the only one to hold the number), a
    # second call; the number stated as the answer by none.
    assert [r["reply"] for r in without if 395 in numbers_in(r["reply"] or "")] == ["What is 395?"]
    assert all(395 in numbers_in(r["reply"]) for r in with_turn)

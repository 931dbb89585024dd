"""The conversation of an agent run, rebuilt from its step checkpoints for a new attempt.

Steps come back as recorded: each LLM call's reply (``call_id`` ``""``), then the results of the tool calls
it asked for. The conversation is the system and user messages, then each reply followed by its tool
results in the order the reply asked for them. Where a reply's tool results are not all recorded (the
attempt stopped while its tools ran), only the missing calls run again: a recorded result is reused, never
run twice. A last reply without tool calls is the final answer: nothing is left to run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from taskyard_common.messages import TaskInput
from taskyard_common.store import Step


def user_content(task_input: TaskInput) -> str:
    """A string input goes as is; a structured one as its JSON text."""
    if isinstance(task_input, str):
        return task_input
    return json.dumps(task_input, ensure_ascii=False, sort_keys=True)


def opening(instructions: str, task_input: TaskInput) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": instructions},
        {"role": "user", "content": user_content(task_input)},
    ]


def tool_calls_of(reply: dict[str, Any]) -> list[dict[str, Any]]:
    calls = reply.get("tool_calls")
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def tool_name(call: dict[str, Any]) -> str:
    function = call.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    # The name is the model's choice, possibly not a tool's: bound what gets stored.
    return str(name or "")[:64]


@dataclass
class Resumed:
    """Where a run continues: the conversation so far and what is left of the last step."""

    messages: list[dict[str, Any]]
    # The last step recorded (0: nothing to resume from).
    last_step: int = 0
    # Tool calls of the last reply whose results were not recorded: run these before the next LLM call.
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    # The final answer, when the last recorded reply has no tool calls.
    final_answer: str | None = None
    # Every tool call made so far, for the task's result ({name, ok}).
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


def _by_step(steps: Iterable[Step]) -> dict[int, tuple[Step | None, dict[str, Step]]]:
    grouped: dict[int, tuple[Step | None, dict[str, Step]]] = {}
    for step in steps:
        reply, results = grouped.get(step.step, (None, {}))
        if step.call_id:
            results[step.call_id] = step
        else:
            reply = step
        grouped[step.step] = (reply, results)
    return grouped


def resume(instructions: str, task_input: TaskInput, steps: Sequence[Step]) -> Resumed:
    """The run as far as ``steps`` take it. Steps past a gap (a step without its reply, or a step after
    one whose tool results are missing) are ignored: the run continues from the last whole prefix."""
    state = Resumed(messages=opening(instructions, task_input))
    grouped = _by_step(steps)
    number = 1
    while number in grouped:
        reply, results = grouped[number]
        if reply is None:
            break
        calls = tool_calls_of(reply.message)
        state.messages.append(reply.message)
        state.last_step = number
        if not calls:
            content = reply.message.get("content")
            state.final_answer = content if isinstance(content, str) else ""
            break
        for call in calls:
            recorded = results.get(str(call.get("id", "")))
            if recorded is None:
                state.pending_calls.append(call)
                continue
            state.messages.append(recorded.message)
            state.tool_calls.append({"name": tool_name(call), "ok": bool(recorded.ok)})
        if state.pending_calls:
            break
        number += 1
    return state

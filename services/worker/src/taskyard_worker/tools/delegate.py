"""Delegation: an agent hands part of its work to another specialist and waits for it, holding nothing.

A specialist that lists the ``delegate`` tool may call it with a task (and optionally a specialist and extra
instructions). The agent loop does not run it like the other tools: once the reply's other calls are done
and recorded, the run ends with ``Delegating``; the worker creates the child tasks and parks the parent
(``waiting``: lease released, message acked, no slot held) in one transaction. When the last child ends,
its outcome is recorded as the result of the parent's call and the parent is queued again; the next
attempt resumes from the checkpoints and reads the result like any tool result.

Bounded: a task at depth ``max_depth`` (its delegations' depth) cannot delegate, nor one that has already
created ``max_children``: the model then gets an error result and carries on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from taskyard_common.errors import TaskyardError
from taskyard_worker.conversation import tool_name
from taskyard_worker.tools.base import Tool, ToolError

DELEGATE = "delegate"
_MAX_TASK_CHARS = 20_000
_MAX_INSTRUCTIONS_CHARS = 4_000


@dataclass(frozen=True)
class DelegationRequest:
    call_id: str
    task: str
    specialist: str | None
    instructions: str | None


@dataclass(frozen=True)
class DelegationLimits:
    """What this task may still delegate."""

    depth: int  # this task's depth (0: not delegated itself)
    max_depth: int
    children: int  # children it created so far
    max_children: int

    def refusal(self, wanted: int) -> str | None:
        """Why ``wanted`` more children are refused, or None."""
        if self.depth >= self.max_depth:
            return f"delegation refused: tasks may delegate at most {self.max_depth} levels deep"
        if self.children + wanted > self.max_children:
            return f"delegation refused: a task may delegate at most {self.max_children} tasks"
        return None


class Delegating(TaskyardError):
    """The run stopped at step ``step`` to delegate ``requests`` (its other tool calls done and recorded)."""

    def __init__(self, step: int, requests: Sequence[DelegationRequest]) -> None:
        super().__init__(f"delegating {len(requests)} task(s) after step {step}")
        self.step = step
        self.requests = list(requests)


class DelegateTool(Tool):
    """The ``delegate`` tool's schema for the model; the agent loop carries it out, never ``run``."""

    name = DELEGATE
    description = (
        "Hand a self-contained piece of work to another specialist and wait for its answer, which comes "
        "back as this call's result. Give everything the other specialist needs in `task`."
    )
    parameters: ClassVar[dict[str, Any]] = {}

    def __init__(self, specialists: Sequence[str] = ()) -> None:
        specialist: dict[str, Any] = {
            "type": "string",
            "description": "Who should do it (leave it out to let the router choose)",
        }
        if specialists:
            specialist["enum"] = list(specialists)
        self._parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The work to do, self-contained"},
                "specialist": specialist,
                "instructions": {"type": "string", "description": "Extra instructions for that specialist"},
            },
            "required": ["task"],
            "additionalProperties": False,
        }

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self._parameters},
        }

    async def run(self, arguments: dict[str, Any]) -> str:
        raise ToolError("delegate is carried out by the agent loop")

    def request(self, call: dict[str, Any]) -> DelegationRequest:
        """The call as a request; ``ToolError`` (the model hears it) when its arguments are not usable."""
        function = call.get("function")
        raw = function.get("arguments") if isinstance(function, dict) else None
        try:
            arguments = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            raise ToolError("the arguments are not valid JSON") from None
        if not isinstance(arguments, dict):
            raise ToolError("the arguments must be a JSON object")
        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            raise ToolError("argument 'task' must be a non-empty string")
        if len(task) > _MAX_TASK_CHARS:
            raise ToolError(f"argument 'task' is longer than {_MAX_TASK_CHARS} characters")
        specialist = arguments.get("specialist")
        enum = self._parameters["properties"]["specialist"].get("enum")
        if specialist is not None and (not isinstance(specialist, str) or (enum and specialist not in enum)):
            raise ToolError(f"argument 'specialist' must be one of {enum}" if enum else "bad 'specialist'")
        instructions = arguments.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise ToolError("argument 'instructions' must be a string")
        return DelegationRequest(
            call_id=str(call.get("id", "")),
            task=task.strip(),
            specialist=specialist,
            instructions=(instructions or "")[:_MAX_INSTRUCTIONS_CHARS] or None,
        )


def split_delegations(calls: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(delegate calls, the others)."""
    delegating = [c for c in calls if tool_name(c) == DELEGATE]
    return delegating, [c for c in calls if tool_name(c) != DELEGATE]


def plan_delegations(
    tool: DelegateTool | None, calls: Sequence[dict[str, Any]], limits: DelegationLimits | None
) -> tuple[list[DelegationRequest], dict[str, str]]:
    """The delegate calls of a reply as (the requests to carry out, the error result of each call that
    cannot be, by call id): its arguments are wrong, or the limits (or their absence) refuse it."""
    requests: list[DelegationRequest] = []
    refused: dict[str, str] = {}
    for call in calls:
        call_id = str(call.get("id", ""))
        if tool is None or limits is None:
            refused[call_id] = "error: delegation is not available to this task"
            continue
        try:
            requests.append(tool.request(call))
        except ToolError as exc:
            refused[call_id] = f"error: {exc}"
    if requests and limits is not None and (why := limits.refusal(len(requests))) is not None:
        refused.update({r.call_id: f"error: {why}" for r in requests})
        requests = []
    return requests, refused

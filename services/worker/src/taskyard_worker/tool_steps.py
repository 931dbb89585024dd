"""The tool part of an agent step: the calls of one reply run concurrently, each result recorded.

A reply's calls are bounded (past ``max_calls`` they are answered with an error instead of run, so one
reply's memory is bounded), its delegations planned (``tools.delegate``), and a tool's error is a result the
model can react to, never a crash of the run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from taskyard_worker.conversation import tool_name
from taskyard_worker.run_state import Checkpoint, RunTrace, record
from taskyard_worker.tools import ToolError, ToolRegistry
from taskyard_worker.tools.delegate import (
    DELEGATE,
    DelegateTool,
    Delegating,
    DelegationLimits,
    plan_delegations,
    split_delegations,
)

log = logging.getLogger(__name__)


class ToolSteps:
    """Runs the tool calls of the replies of one specialist's agent (one per process, like ``Agent``)."""

    def __init__(self, tools: ToolRegistry, *, max_tool_output_chars: int, max_calls: int) -> None:
        self._tools = tools
        self._max_tool_output_chars = max_tool_output_chars
        self._max_calls = max_calls
        delegate = tools.get(DELEGATE)
        self._delegate = delegate if isinstance(delegate, DelegateTool) else None

    async def run(
        self,
        calls: list[dict[str, Any]],
        trace: RunTrace,
        messages: list[dict[str, Any]],
        checkpoint: Checkpoint | None,
        delegation: DelegationLimits | None,
    ) -> None:
        # The calls of one reply run at once, each holding its result (an http_fetch up to its byte cap):
        # past the bound they are answered with an error instead of run, so one reply's memory is bounded.
        calls, skipped = calls[: self._max_calls], calls[self._max_calls :]
        delegating, others = split_delegations(calls)
        requests, refused = plan_delegations(self._delegate, delegating, delegation)
        too_many = (
            f"error: at most {self._max_calls} tool calls run per reply; this one was not run, call it again"
        )
        refused.update((str(c.get("id", "")), too_many) for c in skipped)
        calls = [*others, *(c for c in delegating if str(c.get("id", "")) in refused), *skipped]

        # The calls of one reply are independent by contract: run them (and record them) concurrently.
        async def one(call: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
            call_id = str(call.get("id", ""))
            ok, text = (False, refused[call_id]) if call_id in refused else await self.call(call)
            result = {"role": "tool", "tool_call_id": call_id, "content": self.clip(text)}
            await record(checkpoint, trace.steps, result, call_id=call_id, ok=ok, name=tool_name(call))
            return ok, result

        done = await asyncio.gather(*(one(call) for call in calls))
        for call, (ok, result) in zip(calls, done, strict=True):
            trace.tool_calls.append({"name": tool_name(call), "ok": ok})
            messages.append(result)
        if requests:
            # Recorded: the reply and its other results. The children's outcomes will be the rest.
            raise Delegating(trace.steps, requests)

    async def call(self, call: dict[str, Any]) -> tuple[bool, str]:
        """(ok, the text the model reads). Errors become results the model can react to, never crashes."""
        name = tool_name(call)
        function = call.get("function")
        raw = function.get("arguments") if isinstance(function, dict) else None
        tool = self._tools.get(name)
        if tool is None:
            return False, f"error: there is no tool named {name!r}; available: {', '.join(self._tools.names)}"
        try:
            arguments = json.loads(raw or "{}") if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            return False, "error: the arguments are not valid JSON"
        if not isinstance(arguments, dict):
            return False, "error: the arguments must be a JSON object"
        try:
            text = await tool.run(arguments)
        except ToolError as exc:
            return False, f"error: {exc}"
        except Exception:
            # A bug in a tool must not take the task down with it: the model hears a generic error, the
            # traceback goes to the log (the arguments do not: they may hold user data).
            log.exception("tool %s crashed", name)
            return False, "error: the tool failed unexpectedly"
        return True, text

    def clip(self, text: str) -> str:
        limit = self._max_tool_output_chars
        if len(text) <= limit:
            return text
        return text[:limit] + f"\n[tool output truncated to {limit} characters]"

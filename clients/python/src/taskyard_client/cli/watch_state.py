"""What the live view of a task shows, folded from its events: a pure state with no I/O, so every event
type's effect is unit-tested (tests/unit/client/test_watch_state.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from taskyard_client.answer import AnswerText
from taskyard_client.models import TaskEvent

# The status an event leaves the task in (a replay says which in its data). ``accepted`` leaves the status
# the state started with: pending, or scheduled for a task whose not_before is ahead.
STATUS_AFTER = {
    "routed": "queued",
    "attempt_started": "running",
    "resumed": "running",
    "retry_scheduled": "retrying",
    "handed_back": "queued",
    "lease_expired": "queued",
    "delegated": "waiting",
    "completed": "completed",
    "failed": "failed",
    "cancelled": "cancelled",
    "dead_lettered": "dead_lettered",
}


@dataclass(frozen=True)
class ToolCall:
    step: int
    name: str
    ok: bool


@dataclass
class WatchState:
    task_id: str
    status: str = "pending"
    specialist: str | None = None
    routing: str | None = None  # "rules, confidence 0.50"
    attempt: int = 0
    steps: int = 0  # steps recorded (llm_call events) in the current attempt
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens: int = 0
    events: int = 0
    cancel_requested: bool = False
    error: str | None = None
    output: str | None = None
    first_at: datetime | None = None
    last_at: datetime | None = None
    answer: AnswerText = field(default_factory=AnswerText)

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "failed", "cancelled", "dead_lettered")

    def elapsed(self, now: datetime | None = None) -> float:
        """Seconds since the task was accepted, until its end once finished."""
        if self.first_at is None:
            return 0.0
        end = self.last_at if self.finished and self.last_at else (now or datetime.now(UTC))
        return max(0.0, (end - self.first_at).total_seconds())

    def apply(self, event: TaskEvent) -> str | None:
        """Fold one event in; returns a line saying what happened (None for streamed text)."""
        data = event.data
        self.events += 1
        self.first_at = self.first_at or event.at
        self.last_at = event.at
        self.answer.apply(event)
        status = STATUS_AFTER.get(event.type)
        if event.type == "replayed":
            status = str(data.get("status") or "queued")
        if status is not None:
            self.status = status
        handler = _LINES.get(event.type)
        return handler(self, data) if handler else event.type.replace("_", " ")


def _routed(state: WatchState, data: dict[str, Any]) -> str:
    state.specialist = str(data.get("specialist") or state.specialist or "?")
    confidence = data.get("confidence")
    method = str(data.get("method") or "?")
    state.routing = method if confidence is None else f"{method}, confidence {float(confidence):.2f}"
    return f"routed to {state.specialist} ({state.routing})"


def _attempt(state: WatchState, data: dict[str, Any]) -> str:
    state.attempt = int(data.get("attempt") or state.attempt + 1)
    state.steps, state.tool_calls = 0, []
    return f"attempt {state.attempt} started"


def _llm_call(state: WatchState, data: dict[str, Any]) -> str:
    state.steps = max(state.steps, int(data.get("step") or 0))
    tokens = int(data.get("tokens") or 0)
    state.tokens += tokens
    return f"step {data.get('step')}: {tokens} tokens in {float(data.get('latency_ms') or 0):.0f} ms"


def _tool_call(state: WatchState, data: dict[str, Any]) -> str:
    call = ToolCall(
        step=int(data.get("step") or 0), name=str(data.get("name") or "?"), ok=bool(data.get("ok"))
    )
    state.tool_calls.append(call)
    return f"step {call.step}: tool {call.name} {'ok' if call.ok else 'failed'}"


def _retry(state: WatchState, data: dict[str, Any]) -> str:
    return f"attempt {data.get('attempt')} failed ({data.get('error')}); retrying in {data.get('delay_seconds')} s"


def _usage(state: WatchState, data: dict[str, Any]) -> None:
    usage = data.get("usage")
    if isinstance(usage, dict):
        state.tokens = max(state.tokens, int(usage.get("total_tokens") or 0))


def _completed(state: WatchState, data: dict[str, Any]) -> str:
    _usage(state, data)
    result = data.get("result")
    output = result.get("output") if isinstance(result, dict) else None
    state.output = output if isinstance(output, str) else None
    return f"completed in {state.elapsed():.1f} s, {state.tokens} tokens"


def _failed(state: WatchState, data: dict[str, Any]) -> str:
    _usage(state, data)
    error = data.get("error")
    if isinstance(error, dict):
        state.error = f"{error.get('type')}: {error.get('message')}"
    return f"failed: {state.error or 'no error recorded'}"


def _cancelled(state: WatchState, data: dict[str, Any]) -> str:
    _usage(state, data)
    return "cancelled"


def _cancel_requested(state: WatchState, data: dict[str, Any]) -> str:
    state.cancel_requested = True
    return "cancel requested: its worker stops it"


def _dead_lettered(state: WatchState, data: dict[str, Any]) -> str:
    state.error = f"dead-lettered: {data.get('reason')} in {data.get('queue')}"
    return f"{state.error} (an operator may replay it: taskyard dead-letters replay {state.task_id})"


def _token(state: WatchState, data: dict[str, Any]) -> None:
    return None  # the answer's text: shown as it grows, not line by line


def _accepted(state: WatchState, data: dict[str, Any]) -> str:
    return "accepted"


_LINES: dict[str, Callable[[WatchState, dict[str, Any]], str | None]] = {
    "accepted": _accepted,
    "routed": _routed,
    "attempt_started": _attempt,
    "llm_call": _llm_call,
    "tool_call": _tool_call,
    "token": _token,
    "retry_scheduled": _retry,
    "completed": _completed,
    "failed": _failed,
    "cancelled": _cancelled,
    "cancel_requested": _cancel_requested,
    "dead_lettered": _dead_lettered,
}

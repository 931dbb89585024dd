"""Scripted behaviour per model name, set by tests over HTTP: replies, latency, errors, 429s.

Each test uses its own model name, so tests sharing one server never consume each other's steps.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_RECORDED = 1000
# A conversation is named by the start of its first user message (a task's input).
CONVERSATION_KEY_CHARS = 200


class ToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class Step(BaseModel):
    """One scripted answer. ``status`` other than 200 answers an OpenAI-style error body (a streamed request
    too: before its stream starts)."""

    model_config = ConfigDict(extra="forbid")

    status: int = Field(default=200, ge=200, le=599)
    # Before the answer (a streamed one: before its first chunk).
    delay_seconds: float = Field(default=0.0, ge=0, le=600)
    headers: dict[str, str] = Field(default_factory=dict)
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    error_message: str = "scripted error"
    # Streamed requests only: the wait between two chunks, and a stream broken off after this many chunks,
    # with an error event (as OpenAI reports a failure mid-stream) or a dropped connection.
    chunk_delay_seconds: float = Field(default=0.0, ge=0, le=60)
    fail_after_chunks: int | None = Field(default=None, ge=0)
    fail_with: Literal["error", "disconnect"] = "error"


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")

    steps: list[Step]
    # When true, the last step repeats forever instead of falling back to the default replies.
    repeat_last: bool = False
    # When true, the step answered is the one for the conversation's turn (how many assistant messages it
    # already holds), not the next in line: every task of the model follows the same steps, and an agent
    # that resumes a run mid-way gets the same answer for the same turn again. Past the last step: the
    # default replies.
    by_turn: bool = False
    # A by-turn script for the conversations whose first user message contains this text only (several
    # such scripts may share a model: the first that matches answers; one without ``when`` matches all).
    when: str | None = None


class Scripts:
    def __init__(self) -> None:
        self._steps: dict[str, deque[Step]] = defaultdict(deque)
        self._repeat: dict[str, Step] = {}
        self._turns: dict[str, list[tuple[str | None, list[Step]]]] = defaultdict(list)
        self.requests: dict[str, deque[dict[str, Any]]] = defaultdict(lambda: deque(maxlen=MAX_RECORDED))
        # Per model and conversation, unbounded unlike ``requests``: the calls, and the final answers (a
        # successful reply without tool calls). A task whose conversation got two final answers asked the
        # model twice for its end: the chaos suite counts runs per task with these.
        self.calls: dict[str, Counter[str]] = defaultdict(Counter)
        self.answers: dict[str, Counter[str]] = defaultdict(Counter)
        # The client address ("host:port") of each conversation's latest call: which process asked.
        self.callers: dict[str, dict[str, str]] = defaultdict(dict)

    def add(self, model: str, script: Script) -> None:
        if script.by_turn:
            # A script for the same ``when`` replaces the earlier one.
            kept = [(w, s) for w, s in self._turns[model] if w != script.when]
            self._turns[model] = [*kept, (script.when, list(script.steps))]
            return
        self._steps[model].extend(script.steps)
        if script.repeat_last and script.steps:
            self._repeat[model] = script.steps[-1]

    def clear(self, model: str) -> None:
        self._steps.pop(model, None)
        self._repeat.pop(model, None)
        self._turns.pop(model, None)
        self.requests.pop(model, None)
        self.calls.pop(model, None)
        self.answers.pop(model, None)
        self.callers.pop(model, None)

    def next_step(self, model: str, messages: list[Any] | None = None) -> Step | None:
        scripts = self._turns.get(model)
        if scripts:
            first_user = first_user_message(messages)
            matching = [s for w, s in scripts if w is not None and w in first_user]
            candidates = matching or [s for w, s in scripts if w is None]
            if candidates:
                turns = candidates[0]
                turn = sum(1 for m in messages or [] if isinstance(m, dict) and m.get("role") == "assistant")
                return turns[turn] if turn < len(turns) else None
        queue = self._steps.get(model)
        if queue:
            step = queue.popleft()
            if not queue and model not in self._repeat:
                del self._steps[model]
            return step
        return self._repeat.get(model)


def first_user_message(messages: list[Any] | None) -> str:
    return next(
        (
            str(m.get("content") or "")
            for m in messages or []
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        "",
    )


def conversation_key(messages: list[Any] | None) -> str:
    return first_user_message(messages)[:CONVERSATION_KEY_CHARS]

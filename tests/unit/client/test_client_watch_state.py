"""The CLI's live view as a pure fold over events, its exit codes, and terminal safety of task text."""

from __future__ import annotations

from typing import Any

import pytest
from rich.console import Console

from taskyard_client.cli.live import render
from taskyard_client.cli.output import (
    CANCELLED,
    DEAD_LETTERED,
    FAILED,
    NOT_FINISHED,
    OK,
    exit_code,
    terminal_safe,
)
from taskyard_client.cli.watch_state import WatchState
from taskyard_client.models import TaskEvent


def events(*specs: tuple[str, dict[str, Any]]) -> list[TaskEvent]:
    return [
        TaskEvent.model_validate({"seq": n, "type": kind, "data": data, "at": f"2025-05-01T09:30:{n:02d}Z"})
        for n, (kind, data) in enumerate(specs, start=1)
    ]


def fold(*specs: tuple[str, dict[str, Any]]) -> tuple[WatchState, list[str | None]]:
    state = WatchState(task_id="t1")
    return state, [state.apply(event) for event in events(*specs)]


def test_a_task_that_streams_its_answer_and_completes():
    state, lines = fold(
        ("accepted", {"specialist": None}),
        ("routed", {"method": "llm", "specialist": "general", "confidence": 0.9}),
        ("attempt_started", {"attempt": 1, "worker": "w"}),
        ("tool_call", {"step": 1, "name": "calculator", "ok": True, "call_id": "c1"}),
        ("llm_call", {"step": 1, "tokens": 40, "latency_ms": 120.0}),
        ("token", {"step": 2, "text": "The answer "}),
        ("token", {"step": 2, "text": "is 84."}),
        ("llm_call", {"step": 2, "tokens": 60, "latency_ms": 80.0}),
        ("completed", {"result": {"output": "The answer is 84."}, "usage": {"total_tokens": 100}}),
    )
    assert (state.status, state.specialist, state.routing) == ("completed", "general", "llm, confidence 0.90")
    assert (state.attempt, state.steps, state.tokens) == (1, 2, 100)
    assert [(c.name, c.ok) for c in state.tool_calls] == [("calculator", True)]
    assert state.answer.text == "The answer is 84." and state.output == "The answer is 84."
    assert state.finished and state.elapsed() == 8.0
    assert lines[1] == "routed to general (llm, confidence 0.90)"
    assert lines[5] is None, "streamed text is shown as it grows, not as lines"
    assert lines[-1] == "completed in 8.0 s, 100 tokens"


def test_retries_failures_cancels_and_dead_letters():
    state, lines = fold(
        ("accepted", {}),
        ("routed", {"method": "rules", "specialist": "general", "confidence": 0.5}),
        ("attempt_started", {"attempt": 1}),
        ("retry_scheduled", {"attempt": 1, "error": "LLM answered HTTP 503", "delay_seconds": 2}),
    )
    assert state.status == "retrying" and "retrying in 2 s" in str(lines[-1])
    state.apply(events(("failed", {"error": {"type": "llm_error", "message": "refused"}}))[0])
    assert state.status == "failed" and state.error == "llm_error: refused"
    cancelled, _ = fold(("attempt_started", {"attempt": 1}), ("cancel_requested", {}), ("cancelled", {}))
    assert cancelled.status == "cancelled" and cancelled.cancel_requested
    dead, lines = fold(
        ("dead_lettered", {"reason": "rejected", "queue": "q"}), ("replayed", {"status": "queued"})
    )
    assert dead.status == "queued" and "dead-letters replay t1" in str(lines[0])
    unknown, lines = fold(("something_new", {"x": 1}))
    assert lines == ["something new"] and unknown.status == "pending"
    scheduled = WatchState(task_id="t2", status="scheduled")
    scheduled.apply(events(("accepted", {}))[0])
    assert scheduled.status == "scheduled", "accepted keeps the status it started with"


@pytest.mark.parametrize(
    ("status", "code"),
    [
        ("completed", OK),
        ("failed", FAILED),
        ("cancelled", CANCELLED),
        ("dead_lettered", DEAD_LETTERED),
        ("running", NOT_FINISHED),
    ],
)
def test_exit_codes_by_final_status(status: str, code: int):
    assert exit_code(status) == code
    assert len({OK, FAILED, CANCELLED, DEAD_LETTERED, NOT_FINISHED, 1, 2}) == 7, "all distinct"


def test_task_text_cannot_drive_the_terminal_or_rich_markup():
    hostile = "title\x1b]0;owned\x07 [bold red]not markup[/] \x1b[2J\r\nline\tend\x9b"
    assert terminal_safe(hostile) == "title]0;owned [bold red]not markup[/] [2J\nline\tend"
    state, _ = fold(("token", {"step": 1, "text": hostile}))
    console = Console(record=True, width=120, color_system=None)
    console.print(render(state))
    shown = console.export_text()
    assert "[bold red]not markup[/]" in shown and "\x1b" not in shown

"""The error a failed task carries: a stable ``type`` clients may branch on, and a message for people.

The types are part of the API contract (the task document's ``error.type``): add members, never rename.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer


class TaskErrorType(StrEnum):
    # Routing (broker agent)
    ROUTING_FAILED = "routing_failed"  # routing kept failing transiently until its attempts ran out
    UNKNOWN_SPECIALIST = "unknown_specialist"  # the requested specialist is not in the broker's catalog
    # Before or at the start
    EXPIRED = "expired"  # its deadline passed before it was routed or started
    MISROUTED = "misrouted"  # a work message reached another specialist's worker
    # The run (worker)
    RETRIES_EXHAUSTED = "retries_exhausted"  # every allowed attempt failed transiently
    AGENT_ERROR = "agent_error"  # the agent loop failed for good
    MAX_STEPS_EXCEEDED = "max_steps_exceeded"  # no final answer within the specialist's max_steps
    LLM_ERROR = "llm_error"  # the LLM refused the request (a 4xx other than 429)
    BUDGET_EXCEEDED = "budget_exceeded"  # the task's cost reached its tenant's max_cost_per_task
    INVALID_TOOL_CALL = (
        "invalid_tool_call"  # the model's text tool call was unreadable, even after a correction
    )
    INVALID_OUTPUT = "invalid_output"  # the answer did not satisfy the specialist's output_schema, twice
    PERMANENT_ERROR = "permanent_error"  # any other permanent error


class TaskError(BaseModel):
    """The stored ``error`` of a failed task."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: TaskErrorType
    # Cut to MESSAGE_MAX by ``task_error`` when written; read back as stored.
    message: str
    # routing_failed: how many routing attempts were made.
    attempts: int | None = Field(default=None, ge=0)

    @model_serializer(mode="wrap")
    def _without_unset(self, handler: Any) -> dict[str, Any]:
        # ``attempts`` only where it applies: the stored JSON (and the API's document) stay as they were.
        data: dict[str, Any] = handler(self)
        if data.get("attempts") is None:
            data.pop("attempts", None)
        return data


MESSAGE_MAX = 2000


def task_error(kind: TaskErrorType, message: str, *, attempts: int | None = None) -> TaskError:
    """A ``TaskError`` with its message cut to ``MESSAGE_MAX`` characters (it may quote a provider's text)."""
    return TaskError(type=kind, message=message[:MESSAGE_MAX], attempts=attempts)

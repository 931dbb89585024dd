"""What an agent run reports: its result, its trace (readable after a failure), the checkpoint it records
steps into, and the hand-back between steps (``runtime.py``, ``tool_steps.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from taskyard_common.errors import TransientError
from taskyard_common.messages import Usage


class HandBackAfterStep(TransientError):
    """The worker is stopping: the run ended between two steps, its progress recorded. Hand the task back,
    uncharged; the next attempt resumes after ``step``."""

    def __init__(self, step: int) -> None:
        super().__init__(f"stopped after step {step} for a hand-back")
        self.step = step


class Checkpoint(Protocol):
    async def record(
        self,
        step: int,
        message: dict[str, Any],
        *,
        call_id: str = "",
        usage: Usage | None = None,
        ok: bool | None = None,
        name: str | None = None,
        latency_ms: float | None = None,
    ) -> bool:
        """True when the entry is in the store (its usage with it)."""
        ...


@dataclass(frozen=True)
class AgentResult:
    output: str
    steps: int
    tool_calls: list[dict[str, Any]]
    usage: Usage
    # The answer's object, for a specialist with an ``output_schema`` (``output`` is its JSON text).
    data: dict[str, Any] | None = None


@dataclass
class RunTrace:
    """What a run has done so far: filled in as it goes, readable after a failure."""

    steps: int = 0
    # Every LLM call of this attempt (the metrics); ``unrecorded`` is the part no checkpoint holds, which the
    # attempt's outcome adds to the task's usage.
    usage: Usage = field(default_factory=Usage)
    unrecorded: Usage = field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    # The last step a checkpoint gave this attempt (None: it started from the beginning).
    resumed_from_step: int | None = None


async def record(checkpoint: Checkpoint | None, step: int, message: dict[str, Any], **entry: Any) -> bool:
    """``checkpoint.record`` when the run has a checkpoint (``entry``: its keyword arguments); True when the
    entry is in the store."""
    return False if checkpoint is None else await checkpoint.record(step, message, **entry)

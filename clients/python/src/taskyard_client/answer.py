"""The answer as it is being written, rebuilt from a task's ``token`` events (specialists with
``stream: true``; docs/worker.md, token streaming).

``{step, text}`` adds text to a step; ``{step, restart: true}`` voids the step's text so far (the call is
tried again, or the reply became a tool call); a new attempt (``attempt_started``) voids the text of every
step that has no ``llm_call`` event yet, since it runs those steps again. The answer is the last step's.
"""

from __future__ import annotations

from taskyard_client.models import TaskEvent


class AnswerText:
    def __init__(self) -> None:
        self._steps: dict[int, str] = {}
        self._recorded: set[int] = set()

    def apply(self, event: TaskEvent) -> bool:
        """Take one event of the task's log (any type); True when the answer's text changed."""
        if event.type == "token":
            step = _step(event)
            if event.data.get("restart"):
                self._steps[step] = ""
            else:
                text = event.data.get("text")
                self._steps[step] = self._steps.get(step, "") + (text if isinstance(text, str) else "")
            return True
        if event.type == "llm_call":
            self._recorded.add(_step(event))
        elif event.type == "attempt_started":
            void = [step for step in self._steps if step not in self._recorded]
            for step in void:
                del self._steps[step]
            return bool(void)
        return False

    @property
    def step(self) -> int | None:
        """The step being written (the last one with text), if any."""
        return max(self._steps) if self._steps else None

    @property
    def text(self) -> str:
        step = self.step
        return self._steps[step] if step is not None else ""


def _step(event: TaskEvent) -> int:
    step = event.data.get("step")
    return step if isinstance(step, int) else 0

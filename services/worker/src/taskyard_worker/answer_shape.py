"""The final answer of a specialist with an ``output_schema``: asked for in that shape, checked, corrected
once, stored as JSON (``taskyard_common.output_schemas``).

Every LLM call of such a specialist carries the schema as ``response_format`` (the local model server holds
the answer to it with a grammar; OpenAI models follow it as well), and every final answer is checked before
it is recorded: one that does not satisfy the schema is answered once with a correction that says what is
wrong; a second one fails the task (``invalid_output``). An answer is never stored unchecked, so a resumed
run's recorded answer is a valid one.
"""

from __future__ import annotations

import json
from typing import Any

from taskyard_common import metrics
from taskyard_common.catalog import SpecialistSpec
from taskyard_common.output_schemas import OutputError, read_answer, response_format
from taskyard_worker.llm_calls import InvalidOutput

# The schema goes into the correction when it is this short (it is in every request's ``response_format``
# anyway; a model that ignores that field reads it here).
_SCHEMA_IN_CORRECTION_CHARS = 2000


def canonical(data: dict[str, Any]) -> str:
    """The answer's text as stored in ``result.output``: the object as compact JSON, keys as the model
    wrote them."""
    return json.dumps(data, ensure_ascii=False)


class AnswerShape:
    """One attempt's view of its specialist's ``output_schema`` (one correction per attempt)."""

    def __init__(self, spec: SpecialistSpec) -> None:
        self._spec = spec
        self._corrected = False

    def ask(self, body: dict[str, Any]) -> None:
        """Add the ``response_format`` to a chat completions request body."""
        if self._spec.output_schema is not None:
            body["response_format"] = response_format(self._spec.output_schema, self._spec.name)

    def read(self, reply: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """A reply read once: (its answer's object, None) when its text satisfies the schema (an answer even
        if it looks like a tool call written as text: an extraction may have ``name`` and ``arguments``
        keys); (None, what is wrong) when it does not; (None, None) without a schema or with tool calls."""
        schema = self._spec.output_schema
        if schema is None or reply.get("tool_calls"):
            return None, None
        try:
            data = read_answer(reply.get("content") or "", schema)
        except OutputError as exc:
            return None, str(exc)
        metrics.OUTPUT_ANSWERS.labels(self._spec.name, "corrected" if self._corrected else "valid").inc()
        return data, None

    def refuse(self, problem: str) -> dict[str, Any]:
        """The correction for an answer outside the schema, once per attempt; ``InvalidOutput`` the second
        time."""
        if self._corrected:
            metrics.OUTPUT_ANSWERS.labels(self._spec.name, "failed").inc()
            raise InvalidOutput(f"the answer did not satisfy the output_schema after a correction: {problem}")
        self._corrected = True
        return self._correction(problem)

    def _correction(self, problem: str) -> dict[str, Any]:
        """The message that answers an invalid final answer once."""
        schema = json.dumps(self._spec.output_schema, ensure_ascii=False)
        shown = f" The schema: {schema}" if len(schema) <= _SCHEMA_IN_CORRECTION_CHARS else ""
        return {
            "role": "user",
            "content": (
                f"Your answer could not be accepted: {problem}. Answer again with one JSON object that"
                f" satisfies the required JSON Schema, and nothing before or after it.{shown}"
            ),
        }

    def recorded(self, content: str) -> dict[str, Any] | None:
        """A recorded final answer's object (a resumed run): None without a schema; ``InvalidOutput`` when it
        does not satisfy the schema (recorded before the specialist had this schema)."""
        schema = self._spec.output_schema
        if schema is None:
            return None
        try:
            return read_answer(content, schema)
        except OutputError as exc:
            raise InvalidOutput(f"the recorded answer does not satisfy the output_schema: {exc}") from None

"""What a tool is, as the agent loop sees it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar


class ToolError(Exception):
    """The call cannot be done as asked (bad arguments, refused URL, ...).

    Its message goes back to the model as the tool's result, so the model can correct itself; it never fails
    the task. Keep messages short and free of secrets.
    """


class Tool(ABC):
    name: ClassVar[str]
    # What the model reads to decide when to call the tool.
    description: ClassVar[str]
    # JSON schema of the arguments object.
    parameters: ClassVar[dict[str, Any]]

    @abstractmethod
    async def run(self, arguments: dict[str, Any]) -> str:
        """Do the call; raise ``ToolError`` for anything the model should hear about."""

    async def close(self) -> None:  # noqa: B027 (an optional hook: most tools hold nothing)
        """Release what the tool holds (clients, pools). Called once, at shutdown."""

    def openai_schema(self) -> dict[str, Any]:
        """The tool as a chat-completions function tool."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def string_argument(arguments: dict[str, Any], key: str, *, max_length: int) -> str:
    """A required, non-empty string argument, or a ``ToolError`` the model can act on."""
    value = arguments.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"argument {key!r} must be a non-empty string")
    if len(value) > max_length:
        raise ToolError(f"argument {key!r} is longer than {max_length} characters")
    return value.strip()

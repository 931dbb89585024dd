"""Tool names (as the catalog writes them) → tool instances, checked once at start-up.

A catalog that names a tool this worker does not have is a deployment error: it must stop the worker at
start with a clear message, not fail every task later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from taskyard_worker.settings import WorkerSettings
from taskyard_worker.tools.base import Tool
from taskyard_worker.tools.calculator import Calculator
from taskyard_worker.tools.delegate import DelegateTool
from taskyard_worker.tools.http_fetch import HttpFetch

# Factories, not instances: a worker builds only the tools its specialist uses (http_fetch holds a client).
# Each gets the worker's settings and the catalog's specialist names (``delegate`` offers them).
AVAILABLE: dict[str, Callable[[WorkerSettings, Sequence[str]], Tool]] = {
    Calculator.name: lambda _settings, _names: Calculator(),
    HttpFetch.name: lambda settings, _names: HttpFetch(settings),
    DelegateTool.name: lambda _settings, names: DelegateTool(names),
}


class UnknownToolError(ValueError):
    """The catalog names a tool that does not exist."""


def check_tool_names(names: Iterable[str]) -> None:
    unknown = sorted({n for n in names if n not in AVAILABLE})
    if unknown:
        raise UnknownToolError(f"unknown tools {unknown}; available tools: {sorted(AVAILABLE)}")


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool]) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self._tools:
                raise ValueError(f"tool {tool.name!r} registered twice")
            self._tools[tool.name] = tool

    @classmethod
    def build(
        cls, names: Iterable[str], settings: WorkerSettings, specialists: Sequence[str] = ()
    ) -> ToolRegistry:
        """The tools ``names`` asks for; ``UnknownToolError`` before anything is built if one is unknown."""
        wanted = list(dict.fromkeys(names))
        check_tool_names(wanted)
        return cls(AVAILABLE[name](settings, specialists) for name in wanted)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def openai_tools(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self._tools.values()]

    async def close(self) -> None:
        for tool in self._tools.values():
            await tool.close()

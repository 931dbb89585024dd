"""The tools a specialist may offer its model; ``registry`` maps catalog names onto them."""

from taskyard_worker.tools.base import Tool, ToolError
from taskyard_worker.tools.registry import ToolRegistry, UnknownToolError

__all__ = ["Tool", "ToolError", "ToolRegistry", "UnknownToolError"]

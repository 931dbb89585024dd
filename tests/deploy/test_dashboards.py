"""Grafana dashboards: valid JSON, unique panel ids, PromQL that parses, only metrics taskyard defines."""

from __future__ import annotations

import json

import pytest
import yaml
from prometheus_client import REGISTRY

import taskyard_common.metrics  # noqa: F401  # registers every taskyard metric
from tests.deploy.conftest import run, tool
from tests.support.chart_metrics import DASHBOARDS, exprs, panels, used_metric_names

pytestmark = pytest.mark.deploy

# Grafana's variables, replaced by values PromQL accepts, so promtool can parse the expression.
VARIABLES = {"$namespace": "taskyard", "$specialist": "general", "${datasource}": "prometheus"}


def _defined_metrics() -> set[str]:
    names = set()
    for metric in REGISTRY.collect():
        if metric.name.startswith("taskyard_"):
            names |= {s.name for s in metric.samples} | {metric.name}
    # Histograms' and counters' series names, present even before the first observation.
    for collector in list(REGISTRY._collector_to_names):
        names |= {n for n in REGISTRY._collector_to_names[collector] if n.startswith("taskyard_")}
    return names


def test_there_is_a_dashboard_per_subject():
    assert {p.stem for p in DASHBOARDS} == {
        "taskyard-overview",
        "taskyard-specialist",
        "taskyard-llm",
        "taskyard-broker",
    }


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_dashboard_is_valid_json_with_unique_panel_ids(path):
    dashboard = json.loads(path.read_text())
    assert dashboard["uid"] and dashboard["title"]
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), f"duplicate panel ids in {path.name}"
    assert all(p.get("description") for p in panels(dashboard)), "every panel says what it shows"
    refs = [t["refId"] for p in panels(dashboard) for t in p.get("targets", [])]
    assert refs


def test_every_promql_expression_parses(tmp_path):
    rules = []
    for path in DASHBOARDS:
        for i, (title, expr) in enumerate(exprs(json.loads(path.read_text()))):
            for var, value in VARIABLES.items():
                expr = expr.replace(var, value)
            rules.append({"record": f"dashboard:{path.stem.replace('-', '_')}:{i}", "expr": expr,
                          "labels": {"panel": title}})  # fmt: skip
    file = tmp_path / "dashboards.rules.yaml"
    file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    run([tool("promtool"), "check", "rules", str(file)])


def test_every_taskyard_metric_used_is_defined():
    defined = _defined_metrics()
    used = used_metric_names()
    assert used, "no taskyard metric found"
    assert used <= defined, f"not defined in taskyard_common.metrics: {sorted(used - defined)}"


@pytest.mark.parametrize("stem", ["taskyard-overview", "taskyard-llm"])
def test_a_cost_row_shows_the_llm_spend(stem):
    dashboard = json.loads(next(p for p in DASHBOARDS if p.stem == stem).read_text())
    titles = [p["title"] for p in dashboard["panels"]]
    row = titles.index("Cost")
    assert dashboard["panels"][row]["type"] == "row"
    below = [p for p in dashboard["panels"][row + 1 :] if p["type"] != "row"]
    assert below and all("taskyard_llm_cost_total" in t["expr"] for p in below for t in p["targets"])
    assert all(p["fieldConfig"]["defaults"]["unit"] == "currencyUSD" for p in below)

"""The PrometheusRule's alerts: promtool check rules on the rendered rules, and a promtool unit test per alert."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import of_kind, render, run, tool

pytestmark = pytest.mark.deploy

HERE = Path(__file__).parent


def _groups():
    (rule,) = of_kind(render(sets=("monitoring.prometheusRule.enabled=true",)), "PrometheusRule")
    return rule["spec"]["groups"]


def test_promtool_check_rules(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": _groups()}))
    run([tool("promtool"), "check", "rules", str(path)])


def test_promtool_unit_tests_cover_every_alert(tmp_path):
    groups = _groups()
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    tests = HERE / "alerts_test.yaml"
    (tmp_path / "alerts_test.yaml").write_text(tests.read_text())
    run([tool("promtool"), "test", "rules", str(tmp_path / "alerts_test.yaml")])
    alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    tested = {
        case["alertname"]
        for t in yaml.safe_load(tests.read_text())["tests"]
        for case in t.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert alerts == tested, f"alerts without a firing unit test: {alerts - tested}"

"""The operator's worker is the chart's: for every specialist of every ci values file, reconcile.py's objects
(from the worker template the chart hands the operator, and a Specialist built from the same catalog entry
and worker.specialists overrides) equal what `helm template` renders for the values-driven worker.

Normalised: the operator's owner reference (the chart has none), the managed-by label (Helm vs
taskyard-operator) and the pod template's ``checksum/specialist`` (both hash the same entry, Go's JSON and
Python's; what each one changes with is tested on its own). Nothing else."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskyard_operator.model import parse_specialist
from taskyard_operator.reconcile import env_string, owner_reference, plan
from taskyard_operator.settings import WorkerTemplate
from tests.deploy.conftest import CHART, CI_VALUES, render, values_id

pytestmark = pytest.mark.deploy

VALUES = [None, *(v for v in CI_VALUES if "specialist-operator" not in v.name)]
SCALING_KEYS = {
    "mode", "replicaCount", "minReplicaCount", "maxReplicaCount", "tasksPerReplica", "activationTasks",
    "pollingInterval", "cooldownPeriod", "scaleDown", "fallback",
}  # fmt: skip


def _values(path: Path | None) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) if path else {}


def _catalog(values: dict[str, Any]) -> dict[str, Any]:
    text = values.get("catalog", {}).get("content") or (CHART / "files" / "specialists.yaml").read_text()
    return yaml.safe_load(text)


def _specialist_spec(entry: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """A Specialist's spec from a catalog entry and its worker.specialists.<name> override."""
    spec = {k: v for k, v in entry.items() if k != "name"}
    scaling = {k: v for k, v in override.items() if k in SCALING_KEYS}
    pod: dict[str, Any] = {}
    if "resources" in override:
        pod["resources"] = override["resources"]
    if override.get("shutdownGraceSeconds") is not None:
        pod["shutdownGraceSeconds"] = override["shutdownGraceSeconds"]
    if override.get("env"):
        pod["env"] = [
            {"name": k, "valueFrom": v["valueFrom"]}
            if isinstance(v, dict)
            else {"name": k, "value": env_string(v)}
            for k, v in override["env"].items()
        ]
    if scaling:
        spec["scaling"] = scaling
    if pod:
        spec["pod"] = pod
    return spec


def _normalise(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("ownerReferences", None)

    def labels(meta: dict[str, Any]) -> None:
        meta.get("labels", {}).pop("app.kubernetes.io/managed-by", None)

    labels(obj["metadata"])
    template = obj["spec"].get("template") or obj["spec"].get("jobTargetRef", {}).get("template")
    if template:
        labels(template["metadata"])
        annotations = template["metadata"].get("annotations", {})
        assert len(annotations.pop("checksum/specialist", "")) == 64 or obj["kind"] != "Deployment"
        if not annotations:
            template["metadata"].pop("annotations", None)
    return obj


@pytest.mark.parametrize("values", VALUES, ids=["defaults", *(values_id(v) for v in VALUES[1:])])
def test_operator_renders_the_charts_worker_objects(values):
    objects = render(*([values] if values else []), sets=("operator.enabled=true",))
    (config,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-operator")
    ]
    template = WorkerTemplate.model_validate(json.loads(config["data"]["TASKYARD_OPERATOR_WORKER"]))
    chart = {
        (o["kind"], o["metadata"]["labels"]["taskyard.dev/specialist"]): o
        for o in objects
        if o["kind"] in ("Deployment", "ScaledObject", "ScaledJob")
        and "taskyard.dev/specialist" in o["metadata"].get("labels", {})
    }
    v = _values(values)
    overrides = v.get("worker", {}).get("specialists", {})
    compared = 0
    for entry in _catalog(v)["specialists"]:
        name = entry["name"]
        override = overrides.get(name, {})
        if override.get("enabled") is False:
            continue
        specialist = parse_specialist(name, _specialist_spec(entry, override))
        owner = owner_reference(name, "00000000-0000-4000-8000-000000000000")
        for obj in plan(template, specialist, owner).objects:
            assert obj["metadata"]["ownerReferences"] == [owner]
            expected = chart.pop((obj["kind"], name))
            assert _normalise(obj) == _normalise(expected), f"{obj['kind']} {name} differs from the chart's"
            compared += 1
    assert not chart, f"chart objects the operator would not render: {sorted(chart)}"
    assert compared

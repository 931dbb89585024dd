"""Every rendered object against its schema: Kubernetes built-ins with kubernetes-validate (strict, two minor
versions), KEDA and Prometheus-operator objects with the cloudcoil pydantic models of their CRDs."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from cloudcoil.models.keda.v1alpha1 import ScaledJob, ScaledObject, TriggerAuthentication
from cloudcoil.models.prometheus_operator.v1 import PrometheusRule, ServiceMonitor

from tests.deploy.conftest import CI_VALUES, render, values_id
from tests.support.crd_validation import validate as validate_specialist

pytestmark = pytest.mark.deploy

KUBERNETES_VERSIONS = ("1.29.0", "1.33.0")
CRD_MODELS = {
    ("keda.sh/v1alpha1", "ScaledObject"): ScaledObject,
    ("keda.sh/v1alpha1", "ScaledJob"): ScaledJob,
    ("keda.sh/v1alpha1", "TriggerAuthentication"): TriggerAuthentication,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): ServiceMonitor,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PrometheusRule,
}
# Operator resources with no schema package here; their fields are checked in test_chart.py.
UNCHECKED = {
    ("rabbitmq.com/v1beta1", "RabbitmqCluster"),
    ("postgresql.cnpg.io/v1", "Cluster"),
    ("postgresql.cnpg.io/v1", "ScheduledBackup"),
    ("postgresql.cnpg.io/v1", "Pooler"),  # checked in test_pooler.py
}
ALL_VALUES = [None, *CI_VALUES]
IDS = ["defaults", *map(values_id, CI_VALUES)]


def _objects(values):
    return render(*([values] if values else []))


def _builtin(obj: dict[str, Any]) -> bool:
    group = obj["apiVersion"].rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", ALL_VALUES, ids=IDS)
def test_builtin_objects_validate_strictly(values, version):
    checked = 0
    for obj in _objects(values):
        if not _builtin(obj):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(
                f"{obj['kind']}/{obj['metadata']['name']} on Kubernetes {version}: {exc.message} at {list(exc.path)}"
            )
        checked += 1
    assert checked


def _unknown_fields(given: Any, kept: Any, path: str = "") -> list[str]:
    """Keys of the rendered object that the model dropped (the models ignore unknown fields)."""
    if isinstance(given, dict):
        if not isinstance(kept, dict):
            return [path or "/"]
        out = []
        for key, value in given.items():
            if key not in kept:
                out.append(f"{path}/{key}")
            else:
                out += _unknown_fields(value, kept[key], f"{path}/{key}")
        return out
    if isinstance(given, list) and isinstance(kept, list):
        return [
            p
            for i, (g, k) in enumerate(zip(given, kept, strict=False))
            for p in _unknown_fields(g, k, f"{path}/{i}")
        ]
    return []


@pytest.mark.parametrize("values", ALL_VALUES, ids=IDS)
def test_custom_resources_validate_against_their_crd_models(values):
    for obj in _objects(values):
        key = (obj["apiVersion"], obj["kind"])
        if _builtin(obj) or key in UNCHECKED:
            continue
        if key == ("taskyard.dev/v1alpha1", "Specialist"):
            # taskyard's own CRD (deploy/helm/taskyard/crds/): schema, defaults and CEL rules.
            assert validate_specialist(obj) == [], obj["metadata"]["name"]
            continue
        assert key in CRD_MODELS, f"no schema for {key}"
        model = CRD_MODELS[key].model_validate(obj)
        kept = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
        assert not _unknown_fields(obj, kept), f"{key} {obj['metadata']['name']}: unknown fields"


def test_crd_model_check_catches_a_misspelt_field():
    obj = next(o for o in render() if o["kind"] == "ScaledObject")
    bad = {**obj, "spec": {**obj["spec"], "minReplicas": 0}}
    kept = ScaledObject.model_validate(bad).model_dump(by_alias=True, exclude_unset=True, mode="json")
    assert _unknown_fields(bad, kept) == ["/spec/minReplicas"]

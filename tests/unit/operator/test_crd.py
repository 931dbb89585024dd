"""The CRD: generated from the models (the chart's copy is current), structural, and validating what the
models validate: the examples pass, each invalid Specialist is refused by the CRD (schema or CEL) and by the
operator's models alike."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskyard_operator import crd as crd_module
from taskyard_operator.model import SpecError, parse_specialist
from tests.support import crd_validation
from tests.support.crd_validation import CRD_PATH, ROOT, validate

EXAMPLES = sorted((ROOT / "deploy" / "examples").glob("specialist-*.yaml"))


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def test_chart_crd_is_generated_from_the_models():
    assert CRD_PATH.read_text() == crd_module.render(), (
        "the chart's CRD is stale: uv run python -m taskyard_operator.crd deploy/helm/taskyard/crds/specialists.taskyard.dev.yaml"
    )


def _nodes(node: dict[str, Any], path: str = ""):
    yield path, node
    for key, prop in node.get("properties", {}).items():
        yield from _nodes(prop, f"{path}.{key}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        yield from _nodes(node["items"], f"{path}[]")


def test_schema_is_structural():
    """The rules of a structural schema this generator could break: a type on every node (or int-or-string,
    or preserve-unknown-fields), no $ref, no properties beside additionalProperties, anyOf only in the
    int-or-string form, list-map keys required and not nullable."""
    for path, node in _nodes(crd_validation.schema()):
        assert "$ref" not in node and "allOf" not in node and "oneOf" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node.get("anyOf") == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
            assert "anyOf" not in node, path
        assert not ("properties" in node and "additionalProperties" in node), path
        if node.get("x-kubernetes-list-type") == "map":
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in node["items"]["required"], path
                assert not node["items"]["properties"][key].get("nullable"), path
        if "default" in node:
            assert not crd_validation.OAS30Validator(node).is_valid(None) or node.get("nullable"), path


def test_crd_names_version_status_and_printer_columns():
    spec = crd_validation.crd()["spec"]
    assert crd_validation.crd()["metadata"]["name"] == "specialists.taskyard.dev"
    assert spec["names"]["kind"] == "Specialist" and spec["scope"] == "Namespaced"
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    for name, path in [("Replicas", ".status.replicas"), ("Queued", ".status.queued"),
                       ("Running", ".status.running"), ("Dead letters", ".status.deadLetters"),
                       ("Age", ".metadata.creationTimestamp")]:  # fmt: skip
        assert columns[name] == path


def test_catalog_fields_are_the_catalog_models():
    from taskyard_common.catalog import SpecialistSpec

    props = crd_validation.schema()["properties"]["spec"]["properties"]
    assert set(props) == (set(SpecialistSpec.model_fields) - {"name"}) | {"scaling", "pod"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_valid(path):
    obj = _load(path)
    assert validate(obj) == []
    parse_specialist(obj["metadata"]["name"], obj["spec"])


def test_shipped_catalog_entries_are_valid_specialists():
    """Every entry of specialists.yaml, as a Specialist's spec, is accepted: the catalog moves over as is."""
    catalog = yaml.safe_load((ROOT / "specialists.yaml").read_text())
    for entry in catalog["specialists"]:
        spec = {k: v for k, v in entry.items() if k != "name"}
        obj = {
            "apiVersion": "taskyard.dev/v1alpha1",
            "kind": "Specialist",
            "metadata": {"name": entry["name"]},
            "spec": spec,
        }
        assert validate(obj) == [], entry["name"]


def _minimal() -> dict[str, Any]:
    return _load(ROOT / "deploy" / "examples" / "specialist-minimal.yaml")


def _with(change) -> dict[str, Any]:
    obj = copy.deepcopy(_minimal())
    change(obj)
    return obj


INVALID = {
    "no description": lambda o: o["spec"].pop("description"),
    "unknown field": lambda o: o["spec"].update(top_p=0.9),
    "temperature over 2": lambda o: o["spec"].update(temperature=2.5),
    "zero concurrency": lambda o: o["spec"].update(concurrency=0),
    "steps over 100": lambda o: o["spec"].update(max_steps=101),
    "timeout over its max (CEL)": lambda o: o["spec"].update(timeout_seconds=5000),
    "backoff base over max (CEL)": lambda o: o["spec"].update(backoff_base_seconds=10, backoff_max_seconds=5),
    "min over max replicas (CEL)": lambda o: o["spec"].update(
        scaling={"minReplicaCount": 5, "maxReplicaCount": 2}
    ),
    "fallback in job mode (CEL)": lambda o: o["spec"].update(
        scaling={"mode": "job", "fallback": {"replicas": 1}}
    ),
    "unknown mode": lambda o: o["spec"].update(scaling={"mode": "cronjob"}),
    "env with value and valueFrom (CEL)": lambda o: o["spec"].update(
        pod={"env": [{"name": "A", "value": "1", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}
    ),
    "env with neither (CEL)": lambda o: o["spec"].update(pod={"env": [{"name": "A"}]}),
    "env name twice": lambda o: o["spec"].update(
        pod={"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}
    ),
    "bad env name": lambda o: o["spec"].update(pod={"env": [{"name": "1A", "value": "1"}]}),
    "name not a specialist name (CEL)": lambda o: o["metadata"].update(name="Translator.v2"),
    "a tool required first, none given (CEL)": lambda o: o["spec"].update(require_tool_first=True, tools=[]),
}


@pytest.mark.parametrize("change", INVALID.values(), ids=INVALID.keys())
def test_invalid_specialists_are_refused_by_the_crd_and_the_models(change):
    obj = _with(change)
    assert validate(obj), "the CRD accepted it"
    with pytest.raises(SpecError):
        parse_specialist(obj["metadata"]["name"], obj["spec"])


def test_cel_rules_are_what_refuses_the_cross_field_cases():
    """The cross-field cases pass the OpenAPI schema and are refused by a CEL rule, with its message."""
    obj = _with(INVALID["timeout over its max (CEL)"])
    assert validate(obj) == [".spec: timeout_seconds must not exceed max_timeout_seconds"]
    obj = _with(INVALID["name not a specialist name (CEL)"])
    assert validate(obj)[0].startswith("<root>: a Specialist's name must match")


def test_crd_defaults_are_the_catalog_defaults():
    obj = crd_validation.apply_defaults(crd_validation.schema(), _minimal())
    spec = obj["spec"]
    parsed = parse_specialist("translator", _minimal()["spec"]).catalog
    for field in (
        "max_steps",
        "timeout_seconds",
        "max_timeout_seconds",
        "llm_retries",
        "resume",
        "max_attempts",
    ):
        assert spec[field] == getattr(parsed, field), field

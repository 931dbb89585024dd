"""A Specialist checked the way the API server checks it against the CRD, offline: structural defaulting,
then the OpenAPI v3 schema (openapi-schema-validator's OAS 3.0 validator), then every CEL rule
(``x-kubernetes-validations``, evaluated with cel-python) on the node it is attached to.

Not the API server itself: CEL cost limits, the implicit metadata schema and formats are not modelled.
Unknown fields are refused, as kubectl's default (Strict) field validation does. Values are typed the way Kubernetes types them for CEL (``number`` is a double).
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import yaml
from openapi_schema_validator import OAS30Validator

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "deploy" / "helm" / "taskyard" / "crds" / "specialists.taskyard.dev.yaml"


@cache
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


def schema() -> dict[str, Any]:
    (version,) = crd()["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def apply_defaults(node: dict[str, Any], value: Any) -> Any:
    """Structural defaulting: a missing property with a default gets it, recursively in what is present."""
    if isinstance(value, dict) and node.get("type") == "object":
        for key, prop in node.get("properties", {}).items():
            if key not in value and "default" in prop:
                value[key] = copy.deepcopy(prop["default"])
            if key in value:
                value[key] = apply_defaults(prop, value[key])
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for key in value:
                value[key] = apply_defaults(extra, value[key])
    elif isinstance(value, list) and node.get("type") == "array":
        return [apply_defaults(node["items"], v) for v in value]
    return value


def _typed(node: dict[str, Any], value: Any) -> Any:
    if isinstance(value, dict):
        props = node.get("properties", {})
        return {k: _typed(props.get(k, node.get("additionalProperties") or {}), v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(node.get("items", {}), v) for v in value]
    if node.get("type") == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


_env = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _env.program(_env.compile(rule))


def cel_errors(node: dict[str, Any], value: Any, path: str = "") -> list[str]:
    errors = []
    for rule in node.get("x-kubernetes-validations", ()):
        result = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(_typed(node, value))})
        if result is not True and result != celpy.celtypes.BoolType(True):
            errors.append(f"{path or '<root>'}: {rule['message']}")
    if isinstance(value, dict):
        for key, prop in node.get("properties", {}).items():
            if key in value and value[key] is not None:
                errors += cel_errors(prop, value[key], f"{path}.{key}")
    elif isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            errors += cel_errors(node["items"], item, f"{path}[{i}]")
    return errors


def _list_map_errors(node: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """x-kubernetes-list-type: map: the keys are unique."""
    errors = []
    if isinstance(value, list):
        if node.get("x-kubernetes-list-type") == "map":
            keys = [tuple(item.get(k) for k in node["x-kubernetes-list-map-keys"]) for item in value]
            if len(keys) != len(set(keys)):
                errors.append(f"{path}: duplicate entries in a list-map")
        for i, item in enumerate(value):
            errors += _list_map_errors(node.get("items", {}), item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, prop in node.get("properties", {}).items():
            if key in value:
                errors += _list_map_errors(prop, value[key], f"{path}.{key}")
    return errors


def unknown_fields(node: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Fields the schema does not know (kubectl's default field validation, Strict, refuses them; without
    it the API server would silently prune them)."""
    errors = []
    if (
        isinstance(value, dict)
        and "properties" in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        for key, item in value.items():
            if key not in node["properties"]:
                errors.append(f"{path}.{key}: unknown field")
            else:
                errors += unknown_fields(node["properties"][key], item, f"{path}.{key}")
    elif isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            errors += unknown_fields(node["items"], item, f"{path}[{i}]")
    return errors


def validate(obj: dict[str, Any]) -> list[str]:
    """Every reason the API server would refuse this Specialist; [] when it would accept it."""
    root = schema()
    defaulted = apply_defaults(root, copy.deepcopy(obj))
    errors = unknown_fields(root, obj) + [
        f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in OAS30Validator(root).iter_errors(defaulted)
    ]
    if errors:
        return errors
    return _list_map_errors(root, defaulted) + cel_errors(root, defaulted)

"""The ``specialists.taskyard.dev`` CustomResourceDefinition, generated from the models.

The spec's structural schema comes from ``SpecialistSpec`` (the catalog entry) and model.py's ``Scaling`` and
``PodSettings`` JSON schemas, turned into the OpenAPI v3 subset Kubernetes accepts (no $ref, nullable instead
of null types, int-or-string quantities, boolean exclusive bounds). Cross-field rules are CEL
(``x-kubernetes-validations``), the same rules the models' validators enforce. The chart's copy
(deploy/helm/taskyard/crds/) is written by ``python -m taskyard_operator.crd`` and a test keeps it equal.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from taskyard_common.catalog import SpecialistSpec
from taskyard_operator.model import API_GROUP, API_VERSION, KIND, PLURAL, ResourceExtras

NAME_PATTERN = r"^[a-z][a-z0-9-]{0,62}$"

DESCRIPTIONS = {
    "description": "What the router reads: what this specialist is for, in the words users would use.",
    "keywords": "Extra words the rules router matches (the LLM router sees them too).",
    "examples": "Typical requests, in the words (and languages) users send them.",
    "instructions": "The specialist's system prompt.",
    "model": "The LLM model; empty: TASKYARD_LLM_MODEL.",
    "temperature": "Sampling temperature of the specialist's LLM calls; empty: the endpoint's default.",
    "tools": "Tools the agent may call (calculator, http_fetch).",
    "require_tool_first": "The first step must call one of the tools (tool_choice: required on the first call).",
    "require_tool_first_when": "The same, only for a task whose input matches one of these regular expressions (case-insensitive).",
    "output_schema": "The JSON Schema (draft 2020-12, of an object) the final answer must satisfy; stored as result.data.",
    "max_steps": "Agent steps (LLM call and tool calls) per attempt.",
    "timeout_seconds": "Run time of one attempt; a task may ask for up to max_timeout_seconds.",
    "max_timeout_seconds": "The longest run time a task may ask for.",
    "llm_retries": "In-step retries of a failed LLM call (5xx, timeout, connection error); a term of the shutdown grace.",
    "resume": "A new attempt continues from the step checkpoints.",
    "stream": "Stream each LLM reply into the task's event log as token events.",
    "max_attempts": "Attempts of a task before it fails (transient failures).",
    "backoff_base_seconds": "First delay between attempts (exponential, with jitter).",
    "backoff_max_seconds": "Longest delay between attempts.",
    "concurrency": "Tasks one worker process runs at once (its prefetch); the default tasksPerReplica.",
    "scaling": "How the worker runs and scales; a field left out takes the chart's worker.autoscaling value.",
    "pod": "The worker pod's settings; a field left out takes the chart's worker value.",
    "mode": "deployment: a Deployment scaled by a KEDA ScaledObject; job: a KEDA ScaledJob (long tasks).",
    "replicaCount": "Replicas when KEDA scaling is off.",
    "minReplicaCount": "Fewest replicas (0: an idle specialist scales to zero).",
    "maxReplicaCount": "Most replicas, or parallel Jobs in job mode.",
    "tasksPerReplica": "Unfinished tasks per replica KEDA aims for; empty: concurrency.",
    "activationTasks": "Unfinished tasks above which a specialist wakes from zero.",
    "pollingInterval": "Seconds between KEDA's checks.",
    "cooldownPeriod": "Seconds after the last active check before scaling to zero.",
    "scaleDown": "The HPA's scale-down rules (HPAScalingRules).",
    "fallback": "Replicas while the unfinished-tasks scaler keeps failing (0: none).",
    "image": "A whole image reference for this worker; empty: the chart's worker image.",
    "resources": "Container resources; empty: the chart's worker.resources.",
    "env": "Variables after the chart's, config.env and worker.env (a name set again replaces the earlier one).",
    "envFrom": "Every key of these Secrets as a variable.",
    "shutdownGraceSeconds": "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS; empty: the step bound.",
}

# Cross-field rules (CEL), each the twin of a model validator.
SPEC_RULES = [
    {
        "rule": "!has(self.timeout_seconds) || !has(self.max_timeout_seconds) || self.timeout_seconds <= self.max_timeout_seconds",
        "message": "timeout_seconds must not exceed max_timeout_seconds",
    },
    {
        "rule": "!has(self.backoff_base_seconds) || !has(self.backoff_max_seconds) || self.backoff_base_seconds <= self.backoff_max_seconds",
        "message": "backoff_base_seconds must not exceed backoff_max_seconds",
    },
    {
        "rule": "!has(self.require_tool_first) || !self.require_tool_first || (has(self.tools) && size(self.tools) > 0)",
        "message": "require_tool_first needs at least one tool",
    },
    {
        "rule": "!has(self.require_tool_first_when) || size(self.require_tool_first_when) == 0 || (has(self.tools) && size(self.tools) > 0)",
        "message": "require_tool_first_when needs at least one tool",
    },
    {
        "rule": "!has(self.require_tool_first) || !self.require_tool_first || !has(self.require_tool_first_when) || size(self.require_tool_first_when) == 0",
        "message": "require_tool_first (always) and require_tool_first_when exclude each other",
    },
]
SCALING_RULES = [
    {
        "rule": "!has(self.minReplicaCount) || !has(self.maxReplicaCount) || self.minReplicaCount <= self.maxReplicaCount",
        "message": "minReplicaCount must not exceed maxReplicaCount",
    },
    {
        "rule": "!(has(self.mode) && self.mode == 'job' && has(self.fallback))",
        "message": "fallback applies to mode deployment only (a ScaledJob has none)",
    },
]
ENV_RULES = [
    {
        "rule": "has(self.value) != has(self.valueFrom)",
        "message": "an env entry needs exactly one of value and valueFrom",
    }
]
ROOT_RULES = [
    {
        "rule": f"self.metadata.name.matches('{NAME_PATTERN}')",
        "message": "a Specialist's name must match ^[a-z][a-z0-9-]{0,62}$ (it names queues and goes into a KEDA query)",
    }
]


def _structural(schema: dict[str, Any], defs: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One JSON-schema node (pydantic's) as a structural OpenAPI v3 node."""
    if "$ref" in schema:
        return _structural(
            {**defs[schema["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in schema.items() if k != "$ref"}},
            defs,
            name,
        )
    if "anyOf" in schema:
        options = [o for o in schema["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(schema["anyOf"])
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        types = sorted(o.get("type", "") for o in options)
        if types == ["integer", "string"]:
            result: dict[str, Any] = {
                "x-kubernetes-int-or-string": True,
                "anyOf": [{"type": "integer"}, {"type": "string"}],
            }
        elif len(options) == 1:
            result = _structural({**options[0], **rest}, defs, name)
        else:
            raise ValueError(f"{name}: cannot express {schema['anyOf']} structurally")
        if nullable:
            result["nullable"] = True
        if "default" in rest and rest["default"] is not None:
            result["default"] = rest["default"]
        return result
    out: dict[str, Any] = {}
    kind = schema.get("type")
    if "enum" in schema:
        out["type"] = "string"
        out["enum"] = list(schema["enum"])
    elif "const" in schema:
        out["type"] = "string"
        out["enum"] = [schema["const"]]
    elif kind:
        out["type"] = kind
    if name in DESCRIPTIONS:
        out["description"] = DESCRIPTIONS[name]
    for key in ("minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern"):
        if key in schema:
            out[key] = schema[key]
    if "exclusiveMinimum" in schema:
        out["minimum"], out["exclusiveMinimum"] = schema["exclusiveMinimum"], True
    if "exclusiveMaximum" in schema:
        out["maximum"], out["exclusiveMaximum"] = schema["exclusiveMaximum"], True
    if "default" in schema and schema["default"] is not None and kind != "object":
        default = schema["default"]
        out["default"] = list(default) if isinstance(default, tuple) else default
    if kind == "array":
        out["items"] = _structural(schema["items"], defs)
    if kind == "object":
        if "properties" in schema:
            out["properties"] = {k: _structural(v, defs, k) for k, v in schema["properties"].items()}
            if schema.get("required"):
                out["required"] = list(schema["required"])
        elif isinstance(schema.get("additionalProperties"), dict):
            out["additionalProperties"] = _structural(schema["additionalProperties"], defs)
        elif schema.get("additionalProperties") is True:
            # Any JSON object (an output_schema): kept whole, never pruned by the API server.
            out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def spec_schema() -> dict[str, Any]:
    """The spec: the catalog entry's fields (without name: metadata.name) and scaling and pod."""
    catalog = SpecialistSpec.model_json_schema()
    extras = ResourceExtras.model_json_schema()
    properties = {
        k: _structural(v, catalog.get("$defs", {}), k)
        for k, v in catalog["properties"].items()
        if k != "name"
    }
    for key, value in extras["properties"].items():
        properties[key] = _structural(value, extras.get("$defs", {}), key)
    properties["scaling"]["x-kubernetes-validations"] = SCALING_RULES
    env = properties["pod"]["properties"]["env"]
    env["items"]["x-kubernetes-validations"] = ENV_RULES
    env["x-kubernetes-list-type"] = "map"
    env["x-kubernetes-list-map-keys"] = ["name"]
    return {
        "type": "object",
        "required": [r for r in catalog.get("required", []) if r != "name"],
        "properties": properties,
        "x-kubernetes-validations": SPEC_RULES,
    }


def status_schema() -> dict[str, Any]:
    condition = {
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer", "format": "int64"},
        },
    }
    return {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,  # kopf's own bookkeeping may land here
        "properties": {
            "observedGeneration": {"type": "integer", "format": "int64"},
            "conditions": {
                "type": "array",
                "items": condition,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "replicas": {
                "type": "integer",
                "description": "The worker Deployment's replicas (none in job mode).",
            },
            "queued": {"type": "integer", "description": "Ready messages in the work queue."},
            "running": {"type": "integer", "description": "Tasks running now (task store)."},
            "deadLetters": {"type": "integer", "description": "Dead letters not yet replayed or discarded."},
        },
    }


def crd() -> dict[str, Any]:
    columns = [
        ("Ready", "string", '.status.conditions[?(@.type=="Ready")].status'),
        ("Mode", "string", ".spec.scaling.mode"),
        ("Replicas", "integer", ".status.replicas"),
        ("Queued", "integer", ".status.queued"),
        ("Running", "integer", ".status.running"),
        ("Dead letters", "integer", ".status.deadLetters"),
        ("Age", "date", ".metadata.creationTimestamp"),
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "categories": ["taskyard"],
            },
            "versions": [
                {
                    "name": API_VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": n, "type": t, "jsonPath": p} for n, t, p in columns
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": "A taskyard specialist: its catalog entry, its worker's scaling and pod settings.",
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec_schema(),
                                "status": status_schema(),
                            },
                            "x-kubernetes-validations": ROOT_RULES,
                        }
                    },
                }
            ],
        },
    }


HEADER = (
    "# Written by `uv run python -m taskyard_operator.crd` from the operator's models: do not edit.\n"
    "# Helm installs it before the chart's objects and never upgrades or deletes it: see docs/deploy.md.\n"
)


def render() -> str:
    return HEADER + yaml.safe_dump(crd(), sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    text = render()
    if args:
        Path(args[0]).write_text(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()

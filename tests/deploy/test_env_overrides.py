"""Each container's env is one map: a values override of a variable the chart sets replaces it (never a second
entry, which server-side apply rejects), and the settings the chart derives from the env follow the value the
container ends up with: a worker's shutdown grace (the step bound unless overridden) and every pod's
terminationGracePeriodSeconds."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskyard_common.catalog import SpecialistSpec, parse_catalog
from tests.deploy.conftest import CHART, of_kind, pod_specs, render

pytestmark = pytest.mark.deploy

CATALOG = parse_catalog((CHART / "files" / "specialists.yaml").read_text())
WORKER_MARGIN = 15  # worker.terminationGraceMarginSeconds
BROKER_MARGIN = 10  # brokerAgent.terminationGraceMarginSeconds
# The longest backoff between two in-step LLM retries, in the chart's step bound.
RETRY_BACKOFF_MAX = 8


def _values(tmp_path: Path, values: dict[str, Any], name: str = "values.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values))
    return path


def _env(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    (container,) = spec["containers"]
    names = [e["name"] for e in container.get("env", [])]
    assert len(names) == len(set(names)), f"a variable set twice: {sorted(names)}"
    assert names == sorted(names), "env is rendered sorted by name"
    return {e["name"]: e for e in container["env"]}


def _workloads(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return dict(pod_specs(objects))


def _specialist(name: str) -> str:
    return name.removeprefix("taskyard-worker-")


def step_bound(env: dict[str, dict[str, Any]], spec: SpecialistSpec) -> float:
    llm = float(env["TASKYARD_LLM_TIMEOUT_SECONDS"]["value"])
    tool = float(env["TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS"]["value"])
    return llm * (spec.llm_retries + 1) + RETRY_BACKOFF_MAX * spec.llm_retries + tool


def _grace(env: dict[str, dict[str, Any]]) -> float:
    return float(env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"]["value"])


def test_default_worker_grace_is_the_step_bound_and_the_pod_waits_for_it():
    workloads = _workloads(render())
    workers = {n: s for n, s in workloads.items() if "-worker-" in n}
    assert {_specialist(n) for n in workers} == set(CATALOG.names)
    for name, spec in workers.items():
        env = _env(spec)
        bound = step_bound(env, CATALOG.get(_specialist(name)))
        assert _grace(env) == bound == 60 * 3 + 8 * 2 + 10, name
        assert spec["terminationGracePeriodSeconds"] == math.ceil(bound) + WORKER_MARGIN, name


@pytest.mark.parametrize("job_mode", [False, True], ids=["deployment", "job"])
def test_overrides_of_chart_set_variables_replace_them_in_every_workload(tmp_path, job_mode):
    values = {
        "config": {"env": {"TASKYARD_LOG_LEVEL": "DEBUG", "TASKYARD_DB_SCHEMA": "other"}},
        "api": {"env": {"TASKYARD_API_PORT": 8080, "TASKYARD_API_MAX_BODY_BYTES": 2097152}},
        "brokerAgent": {"env": {"TASKYARD_BROKER_SHUTDOWN_GRACE_SECONDS": "45"}},
        "worker": {
            "env": {"TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "120", "TASKYARD_LOG_LEVEL": "WARNING"},
            "specialists": {
                "researcher": {
                    **({"mode": "job"} if job_mode else {}),
                    "env": {"TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": 900.5},
                }
            },
        },
    }
    objects = render(_values(tmp_path, values))
    workloads = _workloads(objects)
    assert {n for n in workloads if "-worker-" in n} == {f"taskyard-worker-{s}" for s in CATALOG.names}
    assert len(of_kind(objects, "ScaledJob")) == int(job_mode)
    for name, spec in workloads.items():
        env = _env(spec)
        assert env["TASKYARD_DB_SCHEMA"]["value"] == "other", name
        worker = "-worker-" in name
        assert env["TASKYARD_LOG_LEVEL"]["value"] == ("WARNING" if worker else "DEBUG"), name
        assert "valueFrom" in env["TASKYARD_DB_URL"], f"{name}: the database URL still comes from its Secret"
        if worker:
            grace = 900.5 if name.endswith("researcher") else 120
            assert _grace(env) == grace, name
            assert spec["terminationGracePeriodSeconds"] == math.ceil(grace) + WORKER_MARGIN, name
        elif name.endswith("broker-agent"):
            assert env["TASKYARD_BROKER_SHUTDOWN_GRACE_SECONDS"]["value"] == "45"
            assert spec["terminationGracePeriodSeconds"] == 45 + BROKER_MARGIN
        elif name.endswith("-api"):
            assert env["TASKYARD_API_PORT"]["value"] == "8080"
            assert env["TASKYARD_API_MAX_BODY_BYTES"]["value"] == "2097152", "whole numbers, no exponent"
            assert spec["containers"][0]["ports"] == [
                {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
            ]


def test_grace_precedence_from_the_general_to_the_specific(tmp_path):
    values = {
        "worker": {
            "shutdownGraceSeconds": 50,
            "env": {"TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "60"},
            "specialists": {
                "researcher": {"shutdownGraceSeconds": 70},
                "general": {
                    "shutdownGraceSeconds": 70,
                    "env": {"TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "80"},
                },
            },
        }
    }
    workloads = _workloads(render(_values(tmp_path, values)))
    expected = {"summarizer": 60, "support-analyst": 60, "researcher": 70, "general": 80}
    for specialist, grace in expected.items():
        spec = workloads[f"taskyard-worker-{specialist}"]
        assert _grace(_env(spec)) == grace, specialist
        assert spec["terminationGracePeriodSeconds"] == grace + WORKER_MARGIN, specialist
    only_global = _workloads(
        render(_values(tmp_path, {"worker": {"shutdownGraceSeconds": 50}}, "global.yaml"))
    )
    assert {_grace(_env(s)) for n, s in only_global.items() if "-worker-" in n} == {50}


def test_step_bound_follows_the_timeouts_and_each_specialists_llm_retries(tmp_path):
    catalog = yaml.safe_load((CHART / "files" / "specialists.yaml").read_text())
    catalog["specialists"][0]["llm_retries"] = 0
    catalog["specialists"][1]["llm_retries"] = 5
    values = {
        "catalog": {"content": yaml.safe_dump(catalog)},
        "llm": {"timeoutSeconds": 30},
        "worker": {"specialists": {"general": {"env": {"TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS": "20.5"}}}},
    }
    parsed = parse_catalog(values["catalog"]["content"])
    seen = set()
    for name, spec in _workloads(render(_values(tmp_path, values))).items():
        if "-worker-" not in name:
            continue
        env = _env(spec)
        specialist = parsed.get(_specialist(name))
        bound = step_bound(env, specialist)
        assert _grace(env) == bound, name
        assert spec["terminationGracePeriodSeconds"] == math.ceil(bound) + WORKER_MARGIN
        seen.add(bound)
    assert {30 * 1 + 0 + 10, 30 * 6 + 8 * 5 + 10, 30 * 3 + 16 + 20.5} <= seen


def test_chart_defaults_for_catalog_fields_match_the_catalog_model(tmp_path):
    """A catalog entry without llm_retries gets SpecialistSpec's default in the chart's step bound too."""
    text = "fallback: only\nspecialists:\n  - {name: only, description: d, instructions: i}\n"
    spec = parse_catalog(text).get("only")
    (worker,) = [s for n, s in _workloads(render(_values(tmp_path, {"catalog": {"content": text}}))).items()
                 if "-worker-" in n]  # fmt: skip
    assert _grace(_env(worker)) == step_bound(_env(worker), spec)


def test_a_secret_override_replaces_the_chart_value(tmp_path):
    ref = {"secretKeyRef": {"name": "other-llm", "key": "token"}}
    values = {
        "llm": {"existingSecret": "taskyard-openai"},
        "config": {"env": {"TASKYARD_LLM_API_KEY": {"valueFrom": ref}}},
    }
    for name, spec in _workloads(render(_values(tmp_path, values))).items():
        env = _env(spec)
        if "TASKYARD_LLM_API_KEY" in env:
            assert env["TASKYARD_LLM_API_KEY"] == {"name": "TASKYARD_LLM_API_KEY", "valueFrom": ref}, name


def test_dependent_variables_come_after_what_they_refer_to():
    """Kubernetes expands $(NAME) only from variables earlier in the list: sorting keeps RABBITMQ_* first."""
    objects = render(CHART / "ci" / "operators-values.yaml")
    checked = 0
    for name, spec in pod_specs(objects):
        env = spec["containers"][0].get("env", [])
        for i, entry in enumerate(env):
            for ref in re.findall(r"\$\(([A-Z0-9_]+)\)", entry.get("value", "")):
                assert ref in {e["name"] for e in env[:i]}, (
                    f"{name}: {entry['name']} refers to {ref} before it"
                )
                checked += 1
    assert checked

"""reconcile.py alone: the env layers and the step bound, the objects per mode, owner references, what a
mode change removes, refusals; every object it renders validates against the Kubernetes and KEDA schemas.
(tests/deploy/test_operator_workers.py compares its objects with `helm template`'s.)"""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
from cloudcoil.models.keda.v1alpha1 import ScaledJob, ScaledObject

from taskyard_operator.model import SpecError, parse_specialist
from taskyard_operator.reconcile import (
    DEPLOYMENT,
    SCALED_JOB,
    SCALED_OBJECT,
    env_string,
    owner_reference,
    plan,
    worker_env,
    worker_name,
)
from taskyard_operator.settings import WorkerTemplate

BASE_ENV = {
    "TASKYARD_AMQP_PREFIX": {"value": "taskyard"},
    "TASKYARD_DB_SCHEMA": {"value": "taskyard"},
    "TASKYARD_LLM_TIMEOUT_SECONDS": {"value": "60"},
    "TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS": {"value": "10"},
    "TASKYARD_HEALTH_PORT": {"value": "9000"},
    "TASKYARD_DB_URL": {"valueFrom": {"secretKeyRef": {"name": "taskyard-postgresql", "key": "url"}}},
}
TEMPLATE = WorkerTemplate(
    selector_labels={"app.kubernetes.io/name": "taskyard", "app.kubernetes.io/component": "worker"},
    labels={"app.kubernetes.io/managed-by": "taskyard-operator"},
    env=BASE_ENV,
    resources={"requests": {"cpu": "100m"}},
)
SPEC = {"description": "Translates.", "instructions": "Translate.", "concurrency": 8}
OWNER = owner_reference("translator", "0b6f6b1e-0000-4000-8000-000000000001")


def _specialist(**spec: Any):
    return parse_specialist("translator", {**SPEC, **spec})


def test_step_bound_is_the_default_grace():
    env = worker_env(TEMPLATE, _specialist())
    assert env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"] == {"value": "206"}  # 60*3 + 8*2 + 10
    env = worker_env(TEMPLATE, _specialist(llm_retries=0))
    assert env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"] == {"value": "70"}


def test_env_layers_replace_by_name_in_order():
    template = TEMPLATE.model_copy(
        update={"env_overrides": {"TASKYARD_LLM_TIMEOUT_SECONDS": {"value": "30"}}}
    )
    specialist = _specialist(pod={"env": [{"name": "TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS", "value": "20"}]})
    env = worker_env(template, specialist)
    assert env["TASKYARD_LLM_TIMEOUT_SECONDS"] == {"value": "30"}
    assert env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"] == {"value": "126"}  # the bound moves with both
    env = worker_env(template, _specialist(pod={"shutdownGraceSeconds": 42.5}))
    assert env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"] == {"value": "42.5"}


def test_env_string_writes_numbers_as_the_chart_does():
    assert [env_string(v) for v in (300.0, 2.5, 7, True, "x")] == ["300", "2.5", "7", "true", "x"]


def test_deployment_mode_renders_deployment_and_scaled_object_with_owner():
    p = plan(TEMPLATE, _specialist(), OWNER)
    deployment, scaled_object = p.objects
    assert (deployment["kind"], scaled_object["kind"]) == ("Deployment", "ScaledObject")
    assert p.obsolete == (SCALED_JOB,)
    for obj in p.objects:
        assert obj["metadata"]["name"] == "taskyard-worker-translator"
        assert obj["metadata"]["ownerReferences"] == [OWNER]
        assert obj["metadata"]["labels"]["taskyard.dev/specialist"] == "translator"
    pod = deployment["spec"]["template"]["spec"]
    assert "replicas" not in deployment["spec"], "KEDA owns the replicas"
    assert pod["terminationGracePeriodSeconds"] == 206 + 15
    assert [t["name"] for t in scaled_object["spec"]["triggers"]] == [
        "unfinished-tasks",
        "work-queue",
        "quarantine-queue",
    ]
    assert scaled_object["spec"]["triggers"][0]["metadata"]["targetQueryValue"] == "8"  # concurrency
    assert "fallback" not in scaled_object["spec"]
    names = [e["name"] for e in pod["containers"][0]["env"]]
    assert names == sorted(names)


def test_job_mode_renders_a_scaled_job_and_removes_the_deployment():
    p = plan(TEMPLATE, _specialist(scaling={"mode": "job", "tasksPerReplica": 2}), OWNER)
    (job,) = p.objects
    assert job["kind"] == "ScaledJob" and set(p.obsolete) == {DEPLOYMENT, SCALED_OBJECT}
    pod = job["spec"]["jobTargetRef"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS"] == "60"
    assert job["spec"]["triggers"][0]["metadata"]["value"] == "2"


def test_without_keda_a_fixed_replica_count_and_no_job_mode():
    template = TEMPLATE.model_copy(update={"keda": False})
    p = plan(template, _specialist(scaling={"replicaCount": 3}), OWNER)
    (deployment,) = p.objects
    assert deployment["spec"]["replicas"] == 3 and set(p.obsolete) == {SCALED_OBJECT, SCALED_JOB}
    with pytest.raises(SpecError, match="needs KEDA"):
        plan(template, _specialist(scaling={"mode": "job"}), OWNER)


def test_pod_settings_and_fallback():
    specialist = _specialist(
        scaling={"fallback": {"replicas": 2}},
        pod={"image": "registry.example/w:1", "resources": {"limits": {"memory": "1Gi"}},
             "envFrom": [{"secretRef": {"name": "extra"}}]},
    )  # fmt: skip
    deployment, scaled_object = plan(TEMPLATE, specialist, OWNER).objects
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/w:1"
    assert container["resources"] == {"limits": {"memory": "1Gi"}}
    assert container["envFrom"] == [{"secretRef": {"name": "extra"}}]
    assert scaled_object["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 2}


@pytest.mark.parametrize(
    ("env", "error"),
    [
        ({"TASKYARD_AMQP_PREFIX": {"value": "bad prefix!"}}, "not a queue name prefix"),
        ({"TASKYARD_DB_SCHEMA": {"value": "x; DROP TABLE tasks"}}, "not a schema name"),
        (
            {"TASKYARD_LLM_TIMEOUT_SECONDS": {"valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}},
            "plain value",
        ),
    ],
)
def test_settings_objects_are_built_from_are_checked(env, error):
    template = TEMPLATE.model_copy(update={"env_overrides": env})
    with pytest.raises(SpecError, match=error):
        plan(template, _specialist(), OWNER)


def test_long_names_are_cut_like_the_chart_cuts_them():
    template = TEMPLATE.model_copy(update={"fullname": "a" * 50})
    assert len(worker_name(template, "b" * 20)) == 63


@pytest.mark.parametrize(
    "spec", [{}, {"scaling": {"mode": "job"}}, {"scaling": {"fallback": {"replicas": 1}}}]
)
@pytest.mark.parametrize("version", ["1.29.0", "1.33.0"])
def test_rendered_objects_validate_against_kubernetes_and_keda_schemas(spec, version):
    specialist = _specialist(pod={"envFrom": [{"secretRef": {"name": "extra"}}]}, **spec)
    for obj in plan(TEMPLATE, specialist, OWNER).objects:
        if obj["kind"] == "Deployment":
            kubernetes_validate.validate(obj, version, strict=True)
        else:
            model = {"ScaledObject": ScaledObject, "ScaledJob": ScaledJob}[obj["kind"]]
            kept = model.model_validate(obj).model_dump(by_alias=True, exclude_unset=True, mode="json")
            assert kept == obj, f"{obj['kind']}: fields the KEDA model does not know"


def test_a_workers_pods_are_hashed_on_its_own_catalog_entry_only():
    def checksum(specialist) -> str:
        (deployment_,) = [o for o in plan(TEMPLATE, specialist, None).objects if o["kind"] == "Deployment"]
        return deployment_["spec"]["template"]["metadata"]["annotations"]["checksum/specialist"]

    base = checksum(_specialist())
    assert checksum(_specialist()) == base
    assert checksum(_specialist(instructions="Translate into German.")) != base
    # Scaling is the Deployment's own business (replicas, the ScaledObject), not a reason to roll the pods.
    assert checksum(_specialist(scaling={"maxReplicaCount": 7})) == base

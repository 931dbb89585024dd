"""The chart's operator parts: off by default, its RBAC, the `specialists` list as Specialist resources (in
the catalog too, never also a values-driven worker), the CRD and the examples."""

from __future__ import annotations

import pytest
import yaml

from tests.deploy.conftest import CHART, ROOT, of_kind, render, run, tool
from tests.support.crd_validation import validate as validate_specialist

pytestmark = pytest.mark.deploy

OPERATOR_VALUES = CHART / "ci" / "specialist-operator-values.yaml"


def _named(objects, kind, suffix):
    return [o for o in of_kind(objects, kind) if o["metadata"]["name"].endswith(suffix)]


def test_operator_is_off_by_default_and_todays_install_is_unchanged():
    objects = render()
    assert not _named(objects, "Deployment", "-operator")
    assert not of_kind(objects, "Specialist") and not of_kind(objects, "Role")


def test_operator_rbac_is_limited_to_what_it_touches():
    objects = render(OPERATOR_VALUES)
    (role,) = of_kind(objects, "Role")
    rules = {
        (g, r): set(rule["verbs"])
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert rules == {
        ("taskyard.dev", "specialists"): {"get", "list", "watch", "patch"},
        ("taskyard.dev", "specialists/status"): {"get", "patch"},
        ("taskyard.dev", "specialists/finalizers"): {"update"},
        ("apps", "deployments"): {"create", "get", "patch", "delete"},
        ("keda.sh", "scaledobjects"): {"create", "get", "patch", "delete"},
        ("keda.sh", "scaledjobs"): {"create", "get", "patch", "delete"},
        ("", "events"): {"create"},
    }
    assert not of_kind(objects, "ClusterRole") and not of_kind(objects, "ClusterRoleBinding")
    (binding,) = of_kind(objects, "RoleBinding")
    (subject,) = binding["subjects"]
    (deployment,) = _named(objects, "Deployment", "-operator")
    pod = deployment["spec"]["template"]["spec"]
    assert subject["name"] == pod["serviceAccountName"] and subject["namespace"] == "taskyard"
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"
    container = pod["containers"][0]
    assert container["command"] == ["taskyard-operator"]
    assert {e["name"] for e in container["env"]} >= {"TASKYARD_AMQP_URL", "TASKYARD_DB_URL"}
    (config,) = _named(objects, "ConfigMap", "-operator")
    assert container["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]
    assert config["data"]["TASKYARD_OPERATOR_NAMESPACE"] == "taskyard"


def test_specialists_list_renders_specialists_and_never_a_second_worker():
    objects = render(OPERATOR_VALUES)
    specialists = {o["metadata"]["name"]: o for o in of_kind(objects, "Specialist")}
    assert set(specialists) == {"researcher", "translator"}
    for obj in specialists.values():
        assert validate_specialist(obj) == []
    assert specialists["researcher"]["spec"]["scaling"]["mode"] == "job"
    workers = {o["metadata"]["labels"].get("taskyard.dev/specialist") for o in objects
               if o["kind"] in ("Deployment", "ScaledObject", "ScaledJob")}  # fmt: skip
    assert "researcher" not in workers and "translator" not in workers
    assert {"summarizer", "support-analyst", "general"} <= workers
    # The mounted catalog lists them too (the services read it), without scaling or pod.
    (catalog,) = _named(objects, "ConfigMap", "-catalog")
    entries = {s["name"]: s for s in yaml.safe_load(catalog["data"]["specialists.yaml"])["specialists"]}
    assert {"researcher", "translator", "summarizer", "general"} <= set(entries)
    assert entries["researcher"]["description"].startswith("Researches questions with web sources")
    assert "scaling" not in entries["translator"] and "pod" not in entries["translator"]


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (["specialists[0].name=x", "specialists[0].description=d", "specialists[0].instructions=i"],
         "needs operator.enabled"),
        (["operator.enabled=true", "specialists[0].name=general", "specialists[0].description=d",
          "specialists[0].instructions=i", "worker.specialists.general.minReplicaCount=1"],
         "is a Specialist of the operator"),
        (["operator.enabled=true", "specialists[0].name=Bad", "specialists[0].description=d",
          "specialists[0].instructions=i"], "/specialists/0/name"),
    ],
)  # fmt: skip
def test_specialists_list_misuse_fails_the_render(sets, error):
    args = [tool("helm"), "template", "t", str(CHART)]
    for s in sets:
        args += ["--set", s]
    proc = run(args, check=False)
    assert proc.returncode != 0 and error in proc.stderr, proc.stderr


def test_crd_is_in_crds_and_installed_by_helm():
    text = run([tool("helm"), "template", "t", str(CHART), "--include-crds"]).stdout
    crds = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "CustomResourceDefinition"]
    assert [c["metadata"]["name"] for c in crds] == ["specialists.taskyard.dev"]
    assert (CHART / "crds" / "specialists.taskyard.dev.yaml").is_file()


def test_examples_exist_and_validate():
    examples = sorted((ROOT / "deploy" / "examples").glob("specialist-*.yaml"))
    assert {p.name for p in examples} >= {"specialist-minimal.yaml", "specialist-job.yaml"}
    for path in examples:
        assert validate_specialist(yaml.safe_load(path.read_text())) == [], path.name

"""helm lint/template for every values file, the values schema, and what the chart renders."""

from __future__ import annotations

import base64
import json
import re
from urllib.parse import urlsplit

import pytest
import yaml

from taskyard_common.topology import Topology, level_queues_pattern
from tests.deploy.conftest import (
    CHART,
    CI_VALUES,
    of_kind,
    pod_specs,
    render,
    render_text,
    run,
    tool,
    values_id,
)

pytestmark = pytest.mark.deploy

SPECIALISTS = [
    s["name"] for s in yaml.safe_load((CHART / "files" / "specialists.yaml").read_text())["specialists"]
]


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["defaults", *map(values_id, CI_VALUES)])
def test_helm_lint_strict(values):
    args = [tool("helm"), "lint", "--strict", str(CHART)]
    if values:
        args += ["-f", str(values)]
    run(args)


@pytest.mark.parametrize("values", CI_VALUES, ids=values_id)
def test_every_ci_values_file_renders(values):
    assert render(values)


def test_chart_catalog_is_the_repository_catalog():
    assert (CHART / "files" / "specialists.yaml").read_text() == (
        CHART.parents[2] / "specialists.yaml"
    ).read_text()


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (["api.replicaCount=two"], "/api/replicaCount"),
        (["api.unknownKey=1"], "additional properties 'unknownKey' not allowed"),
        (["worker.autoscaling.maxReplicaCount=0"], "/worker/autoscaling/maxReplicaCount"),
        (["worker.specialists.general.mode=cronjob"], "/worker/specialists/general/mode"),
        (["config.env.NOT_TASKYARD=1"], "NOT_TASKYARD"),
        (["config.logLevel=LOUD"], "/config/logLevel"),
        (["image.pullPolicy=Sometimes"], "/image/pullPolicy"),
        (["monitoring.prometheusRule.errorRatio=2"], "/monitoring/prometheusRule/errorRatio"),
    ],
)
def test_schema_rejects_bad_values(sets, error):
    args = [tool("helm"), "template", "t", str(CHART)]
    for s in sets:
        args += ["--set", s]
    proc = run(args, check=False)
    assert proc.returncode != 0
    assert error in proc.stderr


def test_override_of_a_specialist_not_in_the_catalog_fails():
    proc = run(
        [tool("helm"), "template", "t", str(CHART), "--set", "worker.specialists.nobody.minReplicaCount=1"],
        check=False,
    )
    assert proc.returncode != 0 and "not a specialist of the catalog" in proc.stderr


def test_job_mode_without_keda_fails():
    proc = run(
        [tool("helm"), "template", "t", str(CHART), "--set", "keda.enabled=false",
         "--set", "worker.specialists.researcher.mode=job"],
        check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "needs keda.enabled" in proc.stderr


def _workers(objects, kind):
    return {o["metadata"]["labels"]["taskyard.dev/specialist"] for o in of_kind(objects, kind)
            if "taskyard.dev/specialist" in o["metadata"]["labels"]}  # fmt: skip


def test_one_worker_deployment_and_scaled_object_per_specialist():
    objects = render()
    assert _workers(objects, "Deployment") == set(SPECIALISTS)
    assert _workers(objects, "ScaledObject") == set(SPECIALISTS)
    for so in of_kind(objects, "ScaledObject"):
        for trigger in _rabbitmq_triggers([so]):
            assert trigger["metadata"]["protocol"] == "http", "amqp would not count in-flight messages"
            assert trigger["authenticationRef"]["name"] == "taskyard-rabbitmq-auth"
    general = next(
        o for o in of_kind(objects, "ScaledObject") if o["metadata"]["name"].endswith("worker-general")
    )
    assert general["spec"]["minReplicaCount"] == 0
    assert [t["type"] for t in general["spec"]["triggers"]] == ["postgresql", "rabbitmq", "rabbitmq"]
    work, quarantine = (t["metadata"] for t in _rabbitmq_triggers([general]))
    topology = Topology("taskyard")
    # One trigger sums every priority level's queue (the HPA takes the highest trigger, not the sum).
    assert _level_queues(work) == set(topology.specialist_queues("general"))
    assert quarantine["queueName"] == "taskyard.quarantine.general"
    broker = next(
        o for o in of_kind(objects, "ScaledObject") if o["metadata"]["name"].endswith("broker-agent")
    )
    assert _level_queues(broker["spec"]["triggers"][0]["metadata"]) == set(topology.intake_queues())


def _level_queues(metadata: dict) -> set[str]:
    """The queues of the catalog's topology a regex trigger sums (checked against near misses)."""
    assert (metadata["useRegex"], metadata["operation"]) == ("true", "sum")
    pattern = re.compile(metadata["queueName"])
    topology = Topology("taskyard")
    names = [
        *topology.all_queue_names(SPECIALISTS),
        *(f"{q}x" for q in topology.work_queue_names(SPECIALISTS)),
        *(q.replace(".", "x") for q in topology.work_queue_names(SPECIALISTS)),
    ]
    return {name for name in names if pattern.search(name)}


def test_job_mode_renders_a_scaled_job_instead_of_a_deployment():
    objects = render(CHART / "ci" / "job-mode-values.yaml")
    assert "researcher" not in _workers(objects, "Deployment")
    assert "researcher" not in _workers(objects, "ScaledObject")
    (job,) = of_kind(objects, "ScaledJob")
    assert job["spec"]["rollout"]["strategy"] == "gradual"
    assert job["spec"]["maxReplicaCount"] == 20
    assert job["spec"]["jobTargetRef"]["template"]["spec"]["restartPolicy"] == "Never"
    (container,) = job["spec"]["jobTargetRef"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS"] == "60", "a Job's worker exits once idle"
    for deployment in of_kind(objects, "Deployment"):
        for c in deployment["spec"]["template"]["spec"]["containers"]:
            assert "TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS" not in {e["name"] for e in c.get("env", [])}
    summarizer = next(
        o for o in of_kind(objects, "ScaledObject") if o["metadata"]["name"].endswith("summarizer")
    )
    assert summarizer["spec"]["minReplicaCount"] == 1 and summarizer["spec"]["cooldownPeriod"] == 600
    assert summarizer["spec"]["triggers"][0]["metadata"]["activationTargetQueryValue"] == "5"
    assert summarizer["spec"]["triggers"][1]["metadata"]["activationValue"] == "5"
    scale_down = summarizer["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
    assert scale_down["stabilizationWindowSeconds"] == 900


def test_termination_grace_covers_the_worker_drain_period():
    objects = render()
    for name, spec in pod_specs(objects):
        if "worker" in name:
            env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
            grace = float(env["TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"])
            assert spec["terminationGracePeriodSeconds"] >= grace + 10, name
        if "broker-agent" in name:
            env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
            assert spec["terminationGracePeriodSeconds"] > float(
                env["TASKYARD_BROKER_SHUTDOWN_GRACE_SECONDS"]
            )


@pytest.mark.parametrize(
    ("sets", "kind", "gone"),
    [
        (["keda.enabled=false"], "ScaledObject", None),
        (["keda.enabled=false"], "TriggerAuthentication", None),
        (["api.enabled=false"], "Service", "taskyard-api"),
        (["api.podDisruptionBudget.enabled=false"], "PodDisruptionBudget", None),
        (["migrations.enabled=false"], "Job", None),
        (["brokerAgent.enabled=false"], "Deployment", "taskyard-broker-agent"),
        (["worker.specialists.general.enabled=false"], "Deployment", "taskyard-worker-general"),
        (["serviceAccount.create=false"], "ServiceAccount", None),
    ],
)
def test_toggles_remove_their_objects(sets, kind, gone):
    def names(objects):
        return {o["metadata"]["name"] for o in of_kind(objects, kind)}

    before, after = names(render()), names(render(sets=tuple(sets)))
    if gone is None:
        assert before and not after
    else:
        assert gone in before and gone not in after


@pytest.mark.parametrize(
    ("key", "kinds"),
    [
        ("api.ingress.enabled", {"Ingress"}),
        ("api.autoscaling.enabled", {"HorizontalPodAutoscaler"}),
        ("networkPolicy.enabled", {"NetworkPolicy"}),
        ("monitoring.serviceMonitor.enabled", {"ServiceMonitor"}),
        ("monitoring.prometheusRule.enabled", {"PrometheusRule"}),
        ("rabbitmq.cluster.enabled", {"RabbitmqCluster"}),
        ("postgresql.cluster.enabled", {"Cluster"}),
    ],
)
def test_optional_objects_are_off_by_default_and_on_when_enabled(key, kinds):
    assert not {o["kind"] for o in render()} & kinds
    assert kinds <= {o["kind"] for o in render(sets=(f"{key}=true",))}


def test_the_postgresql_clusters_parameters_are_rendered_as_strings():
    (cluster,) = [o for o in render(sets=("postgresql.cluster.enabled=true",)) if o["kind"] == "Cluster"]
    # The default sizes max_connections for every pool at full scale (finding 14 of the reliability review).
    assert cluster["spec"]["postgresql"]["parameters"] == {"max_connections": "600"}
    (cluster,) = [
        o
        for o in render(
            sets=(
                "postgresql.cluster.enabled=true",
                "postgresql.cluster.parameters.max_connections=300",
                "postgresql.cluster.parameters.wal_compression=on",
            )
        )
        if o["kind"] == "Cluster"
    ]
    assert cluster["spec"]["postgresql"]["parameters"] == {"max_connections": "300", "wal_compression": "on"}
    # A number or a boolean in the values is still rendered as the string CloudNativePG takes.
    (cluster,) = [
        o
        for o in render(
            sets=("postgresql.cluster.enabled=true", "postgresql.cluster.parameters.max_connections=700")
        )
        if o["kind"] == "Cluster"
    ]
    assert cluster["spec"]["postgresql"]["parameters"]["max_connections"] == "700"


def test_dashboards_configmaps_carry_the_sidecar_label():
    maps = [o for o in render(sets=("monitoring.dashboards.enabled=true",)) if o["kind"] == "ConfigMap"
            and o["metadata"]["labels"].get("grafana_dashboard") == "1"]  # fmt: skip
    assert {k for m in maps for k in m["data"]} == {p.name for p in (CHART / "dashboards").glob("*.json")}
    for m in maps:
        for text in m["data"].values():
            json.loads(text)


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["defaults", *map(values_id, CI_VALUES)])
def test_every_pod_is_locked_down(values):
    objects = render(*([values] if values else []))
    specs = pod_specs(objects)
    assert specs
    reads_specialists = (
        bool(values) and yaml.safe_load(values.read_text()).get("catalog", {}).get("source") == "kubernetes"
    )
    for name, spec in specs:
        # The operator is the one component that calls the Kubernetes API (its Role says what for), and with
        # catalog.source=kubernetes the services that read the Specialists (the catalog-reader Role).
        reader = reads_specialists and name.endswith(("-api", "-broker-agent"))
        assert spec["automountServiceAccountToken"] is (name.endswith("-operator") or reader), name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"], name
            assert sc["allowPrivilegeEscalation"] is False, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert sc["seccompProfile"]["type"] == "RuntimeDefault", name
    for sa in of_kind(objects, "ServiceAccount"):
        assert sa["automountServiceAccountToken"] is sa["metadata"]["name"].endswith("-operator")


def test_probes_hit_the_health_endpoints_on_the_right_port():
    for name, spec in pod_specs(render()):
        if name.endswith("migrate"):
            continue
        c = spec["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", name
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", name
        port = c["readinessProbe"]["httpGet"]["port"]
        assert port in ports, name
        env = {e["name"]: e.get("value") for e in c["env"]}
        if "TASKYARD_HEALTH_PORT" in env:
            assert env["TASKYARD_HEALTH_HOST"] == "0.0.0.0"
            assert int(env["TASKYARD_HEALTH_PORT"]) == ports[port]
        else:
            assert int(env["TASKYARD_API_PORT"]) == ports[port] and env["TASKYARD_API_HOST"] == "0.0.0.0"


SECRET_LIKE = re.compile(r"(sk-[A-Za-z0-9]{8,}|://[^/\s:@]+:[^@\s$]+@)")


@pytest.mark.parametrize("values", [None, *CI_VALUES], ids=["defaults", *map(values_id, CI_VALUES)])
def test_no_secret_value_is_rendered(values):
    text = render_text(*([values] if values else []))
    objects = render(*([values] if values else []))
    assert not of_kind(objects, "Secret"), (
        "the chart never creates Secrets: credentials come from existing ones"
    )
    assert not SECRET_LIKE.search(text), SECRET_LIKE.search(text)
    for _, spec in pod_specs(objects):
        for c in spec["containers"]:
            for e in c.get("env", []):
                if (
                    e["name"].endswith(("_URL", "_API_KEY", "PASSWORD"))
                    and e["name"] != "TASKYARD_LLM_BASE_URL"
                ):
                    assert (
                        "valueFrom" in e
                        or "$(RABBITMQ_PASSWORD)" in e.get("value", "")
                        or e.get("value") == "devllm-no-key"
                        # The Pooler's URL: a user and no password (PGPASSWORD comes from the Secret).
                        or re.fullmatch(r"postgresql://[^:@/]+@[^@]+", e.get("value", ""))
                    ), e


def test_operator_mode_reads_the_operators_secrets():
    objects = render(CHART / "ci" / "operators-values.yaml")
    auth = _trigger_auth(objects, "rabbitmq")
    assert {r["parameter"] for r in auth["spec"]["secretTargetRef"]} == {"username", "password"}
    assert {r["name"] for r in auth["spec"]["secretTargetRef"]} == {"taskyard-rabbitmq-default-user"}
    assert _trigger_auth(objects, "postgresql")["spec"]["secretTargetRef"] == [
        {"parameter": "connection", "name": "taskyard-postgresql-app", "key": "uri"}
    ], "KEDA reads the same database URL as the services"
    api = next(o for o in of_kind(objects, "Deployment") if o["metadata"]["name"] == "taskyard-api")
    env = {e["name"]: e for e in api["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TASKYARD_DB_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "taskyard-postgresql-app",
        "key": "uri",
    }
    assert env["TASKYARD_AMQP_URL"]["value"].startswith("amqp://$(RABBITMQ_USERNAME):$(RABBITMQ_PASSWORD)@")
    (job,) = of_kind(objects, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,pre-upgrade"


def test_migration_job_is_a_helm_hook_running_taskyard_migrate():
    (job,) = of_kind(render(), "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["taskyard-migrate"]


def test_catalog_configmap_is_mounted_by_broker_and_workers():
    objects = render()
    (cm,) = [o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"] == "taskyard-catalog"]
    assert yaml.safe_load(cm["data"]["specialists.yaml"])["fallback"] == "general"
    for name, spec in pod_specs(objects):
        if "worker" in name or "broker-agent" in name:
            assert {"name": "catalog", "configMap": {"name": "taskyard-catalog"}} in spec["volumes"], name
            env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
            assert env["TASKYARD_CATALOG_PATH"] == "/etc/taskyard/specialists.yaml"


def test_custom_catalog_drives_the_workers():
    objects = render(CHART / "ci" / "settings-values.yaml")
    assert _workers(objects, "Deployment") == {"general", "translator"}
    queues = {t["metadata"]["queueName"] for t in _rabbitmq_triggers(of_kind(objects, "ScaledObject"))}
    assert level_queues_pattern("prod.work.translator") in queues
    assert level_queues_pattern("prod.intake") in queues


def test_base64_free():
    # A values file must never smuggle credentials in: nothing base64-encoded is rendered either.
    text = render_text()
    for token in re.findall(r"[A-Za-z0-9+/]{40,}={0,2}", text):
        try:
            decoded = base64.b64decode(token, validate=True)
        except ValueError:
            continue
        assert b"://" not in decoded


def _rabbitmq_triggers(objects: list[dict]) -> list[dict]:
    scalers = of_kind(objects, "ScaledObject") + of_kind(objects, "ScaledJob")
    return [t for o in scalers for t in o["spec"]["triggers"] if t["type"] == "rabbitmq"]


def test_operator_mode_triggers_match_kedas_username_password_contract():
    """KEDA's rabbitmq scaler (pkg/scalers/rabbitmq_scaler.go) takes ``username``/``password`` only from
    authParams and only together, and then still needs ``host`` (without credentials) from the trigger
    metadata; it puts the credentials into that URL itself and asks ``<host>/api/queues/<vhost>/<queue>``."""
    objects = render(CHART / "ci" / "operators-values.yaml")
    triggers = _rabbitmq_triggers(objects)
    assert triggers
    for trigger in triggers:
        meta = trigger["metadata"]
        host = urlsplit(meta["host"])
        assert host.scheme == "http" and host.port == 15672, meta
        assert host.username is None and host.password is None, "credentials come from the Secret"
        assert host.hostname == "taskyard-rabbitmq.taskyard.svc", meta
        assert meta["protocol"] == "http" and meta["vhostName"] == "/"
        assert trigger["authenticationRef"]["name"] == "taskyard-rabbitmq-auth"


def _trigger_auth(objects: list[dict], scaler: str) -> dict:
    (auth,) = [o for o in of_kind(objects, "TriggerAuthentication")
               if o["metadata"]["name"] == f"taskyard-{scaler}-auth"]  # fmt: skip
    return auth


def test_external_mode_triggers_read_the_whole_host_from_the_secret():
    objects = render()
    auth = _trigger_auth(objects, "rabbitmq")
    assert [r["parameter"] for r in auth["spec"]["secretTargetRef"]] == ["host"]
    assert _trigger_auth(objects, "postgresql")["spec"]["secretTargetRef"] == [
        {"parameter": "connection", "name": "taskyard-postgresql", "key": "url"}
    ]
    for trigger in _rabbitmq_triggers(objects):
        assert "host" not in trigger["metadata"], "the Secret holds the whole management URL"
        assert trigger["metadata"]["protocol"] == "http"


def test_editing_one_specialist_rolls_only_its_own_workers_pods(tmp_path):
    """Every service follows the catalog file without a restart: only the edited specialist's worker pods
    are hashed on its entry, and the API and broker agent pods on none."""
    catalog = yaml.safe_load((CHART / "files" / "specialists.yaml").read_text())
    catalog["specialists"][0]["instructions"] = "Edited."
    edited = catalog["specialists"][0]["name"]
    values = tmp_path / "edited-values.yaml"
    values.write_text(yaml.safe_dump({"catalog": {"content": yaml.safe_dump(catalog)}}))

    def pod_annotations(objects) -> dict[str, dict]:
        return {
            o["metadata"]["name"]: o["spec"]["template"]["metadata"].get("annotations", {})
            for o in objects
            if o["kind"] == "Deployment"
        }

    before, after = pod_annotations(render()), pod_annotations(render(values))
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {f"taskyard-worker-{edited}"}
    for name, pod in before.items():
        assert "checksum/catalog" not in pod
        assert ("checksum/specialist" in pod) == ("-worker-" in name)


def test_the_kubernetes_catalog_source_reads_specialists_with_a_role_of_its_own():
    values = CHART / "ci" / "specialist-operator-catalog-values.yaml"
    objects = render(values)
    (role,) = [o for o in of_kind(objects, "Role") if o["metadata"]["name"].endswith("-catalog-reader")]
    assert role["rules"] == [
        {"apiGroups": ["taskyard.dev"], "resources": ["specialists"], "verbs": ["get", "list", "watch"]}
    ]
    (binding,) = [
        o for o in of_kind(objects, "RoleBinding") if o["metadata"]["name"].endswith("-catalog-reader")
    ]
    assert {s["name"] for s in binding["subjects"]} == {
        "taskyard-api",
        "taskyard-broker-agent",
        "taskyard-worker",
    }
    # The operator runs every worker (with the token), the chart none of its own.
    assert not [o for o in of_kind(objects, "Deployment") if "-worker-" in o["metadata"]["name"]]
    (config,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-operator")
    ]
    assert json.loads(config["data"]["TASKYARD_OPERATOR_WORKER"])["automount_service_account_token"] is True
    for name, spec in pod_specs(objects):
        env = {e["name"]: e.get("value") for c in spec["containers"] for e in c.get("env", [])}
        if name.endswith(("-api", "-broker-agent")):
            assert (env["TASKYARD_CATALOG_SOURCE"], env["TASKYARD_CATALOG_FALLBACK"]) == (
                "kubernetes",
                "general",
            )
    proc = run([tool("helm"), "template", "t", str(CHART), "--set", "catalog.source=kubernetes"], check=False)
    assert proc.returncode != 0 and "set operator.enabled" in proc.stderr
    # Without it, no Role and no token.
    assert not [o for o in of_kind(render(), "Role") if o["metadata"]["name"].endswith("-catalog-reader")]

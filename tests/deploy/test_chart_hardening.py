"""What a reliability review of the chart asked for: metrics out of the Ingress's reach and reachable by
Prometheus under a NetworkPolicy, LLM egress on its own ports and peers, a CloudNativePG cluster that an
uninstall keeps (with backups and connections for full scale), a schema a parent chart can use, and a broker
agent that cannot be scaled to zero."""

from __future__ import annotations

import json

import pytest

from tests.deploy.conftest import CHART, of_kind, render, run, tool

pytestmark = pytest.mark.deploy


def _named(objects, kind: str, suffix: str):
    return next(o for o in of_kind(objects, kind) if o["metadata"]["name"].endswith(suffix))


def test_metrics_are_served_on_a_port_the_ingress_never_routes_to():
    objects = render(sets=("api.ingress.enabled=true", "monitoring.serviceMonitor.enabled=true"))
    api = _named(objects, "Deployment", "-api")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in api["env"]}
    assert env["TASKYARD_API_METRICS_PORT"] == "9090"
    assert {p["name"]: p["containerPort"] for p in api["ports"]} == {"http": 8000, "metrics": 9090}
    service = _named(objects, "Service", "-api")
    assert {p["name"] for p in service["spec"]["ports"]} == {"http", "metrics"}
    backends = [
        path["backend"]["service"]["port"]["name"]
        for rule in _named(objects, "Ingress", "-api")["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends and set(backends) == {"http"}
    monitor = _named(objects, "ServiceMonitor", "-api")
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    # Without a metrics port, /metrics stays on the API's port (and the monitor scrapes it there).
    plain = render(sets=("monitoring.serviceMonitor.enabled=true", "api.metricsPort=null"))
    assert _named(plain, "ServiceMonitor", "-api")["spec"]["endpoints"][0]["port"] == "http"
    assert {p["name"] for p in _named(plain, "Service", "-api")["spec"]["ports"]} == {"http"}


def test_restricting_the_apis_clients_never_blocks_prometheus():
    gateway = {"namespaceSelector": {"matchLabels": {"name": "gateway"}}}
    prometheus = {"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}
    objects = render(
        sets=(
            "networkPolicy.enabled=true",
            "networkPolicy.apiIngressFrom[0].namespaceSelector.matchLabels.name=gateway",
            "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring",
        )
    )
    rules = _named(objects, "NetworkPolicy", "-api")["spec"]["ingress"]
    by_port = {rule["ports"][0]["port"]: rule.get("from") for rule in rules}
    assert by_port == {"http": [gateway], "metrics": [prometheus]}


def test_llm_egress_has_its_own_ports_and_public_peers():
    objects = render(sets=("networkPolicy.enabled=true", "llm.baseUrl=http://llm.example.com:8443/v1"))
    for component in ("-broker-agent", "-worker"):
        egress = _named(objects, "NetworkPolicy", component)["spec"]["egress"]
        in_cluster = next(rule for rule in egress if {"port": 5432, "protocol": "TCP"} in rule["ports"])
        # The broker and database rule no longer opens 443 (to the cluster's own services among others).
        assert {p["port"] for p in in_cluster["ports"]} == {5672, 5671, 5432}
        llm = next(rule for rule in egress if {"port": 8443, "protocol": "TCP"} in rule["ports"])
        assert {p["port"] for p in llm["ports"]} == {443, 8443}  # llm.baseUrl's port is always there
        blocks = [peer["ipBlock"] for peer in llm["to"]]
        assert {b["cidr"] for b in blocks} == {"0.0.0.0/0", "::/0"}
        assert "10.0.0.0/8" in blocks[0]["except"] and "fc00::/7" in blocks[1]["except"]
    api = _named(objects, "NetworkPolicy", "-api")["spec"]["egress"]
    assert not any({"port": 443, "protocol": "TCP"} in rule["ports"] for rule in api)
    # Other ports for the LLM and http_fetch hosts are a value, not a template edit.
    wider = render(sets=("networkPolicy.enabled=true", "networkPolicy.llmEgressPorts={443,8080}"))
    egress = _named(wider, "NetworkPolicy", "-worker")["spec"]["egress"]
    assert any({p["port"] for p in rule["ports"]} == {443, 8080} for rule in egress)


def test_the_database_cluster_survives_an_uninstall_and_can_be_backed_up():
    base = ("postgresql.cluster.enabled=true",)
    cluster = _named(render(sets=base), "Cluster", "-postgresql")
    assert cluster["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert cluster["spec"]["postgresql"]["parameters"]["max_connections"] == "600"
    assert "backup" not in cluster["spec"]
    assert not of_kind(render(sets=base), "ScheduledBackup")
    backed_up = render(
        sets=(
            *base,
            "postgresql.cluster.backup.barmanObjectStore.destinationPath=s3://backups/taskyard",
            "postgresql.cluster.backup.retentionPolicy=30d",
            "postgresql.cluster.scheduledBackup.schedule=0 0 3 * * *",
        )
    )
    cluster = _named(backed_up, "Cluster", "-postgresql")
    assert cluster["spec"]["backup"] == {
        "barmanObjectStore": {"destinationPath": "s3://backups/taskyard"},
        "retentionPolicy": "30d",
    }
    [scheduled] = of_kind(backed_up, "ScheduledBackup")
    assert scheduled["spec"]["cluster"]["name"] == cluster["metadata"]["name"]
    assert scheduled["spec"]["schedule"] == "0 0 3 * * *"
    dropped = _named(render(sets=(*base, "postgresql.cluster.keep=false")), "Cluster", "-postgresql")
    assert "annotations" not in dropped["metadata"]


def test_the_schema_lets_a_parent_chart_pass_global_values():
    args = [tool("helm"), "template", "t", str(CHART), "--set", "global.imageRegistry=registry.example.com"]
    assert run(args).returncode == 0


@pytest.mark.parametrize("key", ["brokerAgent.replicaCount", "brokerAgent.autoscaling.minReplicaCount"])
def test_the_broker_agent_cannot_be_scaled_to_zero(key):
    """The reaper, the dead-letter consumer and the scheduler run in the broker agent: zero replicas would
    stop them silently (``brokerAgent.enabled=false`` says so explicitly)."""
    proc = run([tool("helm"), "template", "t", str(CHART), "--set", f"{key}=0"], check=False)
    assert proc.returncode != 0
    assert "/" + key.replace(".", "/") in proc.stderr


def test_the_schema_documents_the_new_values():
    schema = json.loads((CHART / "values.schema.json").read_text())
    cluster = schema["properties"]["postgresql"]["properties"]["cluster"]["properties"]
    assert {"keep", "parameters", "backup", "scheduledBackup"} <= set(cluster)

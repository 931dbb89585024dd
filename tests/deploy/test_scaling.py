"""The workers' KEDA objects: a ScaledObject scales on the specialist's unfinished tasks in the task store (which
still sees a running task after its message was settled early), with HPA scale-down rules and an optional
fallback; a ScaledJob starts one Job per `concurrency` messages with KEDA's `default` strategy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from taskyard_common.catalog import SpecialistSpec, parse_catalog
from taskyard_common.topology import level_queues_pattern
from tests.deploy.conftest import CHART, of_kind, render, run, tool

pytestmark = pytest.mark.deploy

CATALOG = parse_catalog((CHART / "files" / "specialists.yaml").read_text())


def _values(tmp_path: Path, values: dict[str, Any]) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def _by_specialist(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["labels"]["taskyard.dev/specialist"]: o for o in of_kind(objects, kind)
            if "taskyard.dev/specialist" in o["metadata"]["labels"]}  # fmt: skip


def _triggers(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in obj["spec"]["triggers"]}


def test_each_scaled_object_counts_its_specialists_unfinished_tasks():
    scaled = _by_specialist(render(), "ScaledObject")
    assert set(scaled) == set(CATALOG.names)
    for name, so in scaled.items():
        spec = CATALOG.get(name)
        assert [t["name"] for t in so["spec"]["triggers"]] == [
            "unfinished-tasks",
            "work-queue",
            "quarantine-queue",
        ]
        tasks = _triggers(so)["unfinished-tasks"]
        assert tasks["type"] == "postgresql"
        assert tasks["metadata"] == {
            "query": f"SELECT count(*) FROM taskyard.tasks WHERE specialist = '{name}'"
            " AND status IN ('queued', 'running', 'retrying')",
            "targetQueryValue": str(spec.concurrency),
            "activationTargetQueryValue": "0",
        }, "one replica per `concurrency` unfinished tasks; one task wakes the specialist"
        assert tasks["authenticationRef"] == {"name": "taskyard-postgresql-auth"}
        work = _triggers(so)["work-queue"]["metadata"]
        assert work["queueName"] == level_queues_pattern(f"taskyard.work.{name}")
        assert (work["useRegex"], work["operation"]) == ("true", "sum")
        assert (work["value"], work["activationValue"]) == (str(spec.concurrency), "0")
        assert _triggers(so)["quarantine-queue"]["metadata"]["queueName"] == f"taskyard.quarantine.{name}"


def test_the_query_matches_the_index_migration_0005_creates():
    """The partial index's predicate is the query's, so PostgreSQL answers it from the index."""
    import taskyard_common.store

    migration = (
        Path(taskyard_common.store.__file__).parent / "migrations" / "0005_step_checkpoints.sql"
    ).read_text()
    assert "ON tasks (specialist, status)" in migration
    assert "WHERE status IN ('queued', 'running', 'retrying')" in migration
    so = _by_specialist(render(), "ScaledObject")["general"]
    assert _triggers(so)["unfinished-tasks"]["metadata"]["query"].endswith(
        "status IN ('queued', 'running', 'retrying')"
    )


def test_scale_down_is_slow_and_fallback_is_off_by_default():
    for name, so in _by_specialist(render(), "ScaledObject").items():
        behavior = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        assert set(behavior) == {"scaleDown"}, "scale-up keeps the HPA's defaults"
        scale_down = behavior["scaleDown"]
        assert scale_down["stabilizationWindowSeconds"] >= 300, name
        assert scale_down["policies"] == [{"type": "Pods", "value": 1, "periodSeconds": 60}], name
        assert "fallback" not in so["spec"], "no fallback: the HPA holds while the store's metric is missing"


def test_overrides_of_target_fallback_schema_and_scale_down(tmp_path):
    values = {
        "config": {"dbSchema": "tenant_a"},
        "worker": {
            "autoscaling": {"fallback": {"replicas": 2, "failureThreshold": 5}},
            "specialists": {
                "researcher": {
                    "tasksPerReplica": 4,
                    "activationTasks": 2,
                    "fallback": {"replicas": 6},
                    "scaleDown": {"stabilizationWindowSeconds": 1800, "selectPolicy": "Disabled",
                                  "policies": [{"type": "Percent", "value": 10, "periodSeconds": 600}]},
                }
            },
        },
    }  # fmt: skip
    scaled = _by_specialist(render(_values(tmp_path, values)), "ScaledObject")
    researcher = scaled["researcher"]
    tasks = _triggers(researcher)["unfinished-tasks"]["metadata"]
    assert tasks["query"].startswith("SELECT count(*) FROM tenant_a.tasks WHERE specialist = 'researcher'")
    assert (tasks["targetQueryValue"], tasks["activationTargetQueryValue"]) == ("4", "2")
    assert _triggers(researcher)["work-queue"]["metadata"]["value"] == "4"
    assert researcher["spec"]["fallback"] == {"failureThreshold": 3, "replicas": 6}
    behavior = researcher["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["selectPolicy"] == "Disabled"
    assert scaled["general"]["spec"]["fallback"] == {"failureThreshold": 5, "replicas": 2}


def test_job_mode_starts_one_job_per_concurrency_messages_with_the_default_strategy():
    (job,) = of_kind(render(CHART / "ci" / "job-mode-values.yaml"), "ScaledJob")
    assert job["spec"]["scalingStrategy"] == {"strategy": "default"}
    triggers = _triggers(job)
    assert set(triggers) == {"work-queue", "quarantine-queue"}
    work = triggers["work-queue"]["metadata"]
    assert work["queueName"] == level_queues_pattern("taskyard.work.researcher")
    assert work["value"] == str(CATALOG.get("researcher").concurrency), (
        "each Job takes `concurrency` messages"
    )
    assert work["protocol"] == "http", "ready + unacked: what `default` expects"
    quarantine = triggers["quarantine-queue"]["metadata"]
    assert (quarantine["queueName"], quarantine["value"]) == ("taskyard.quarantine.researcher", "1")


def test_catalog_defaults_are_the_catalog_models(tmp_path):
    text = "fallback: only\nspecialists:\n  - {name: only, description: d, instructions: i}\n"
    so = _by_specialist(render(_values(tmp_path, {"catalog": {"content": text}})), "ScaledObject")["only"]
    default = SpecialistSpec.model_fields["concurrency"].default
    assert _triggers(so)["unfinished-tasks"]["metadata"]["targetQueryValue"] == str(default)


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (["worker.autoscaling.fallback.replicas=-1"], "/worker/autoscaling/fallback/replicas"),
        (["worker.autoscaling.scaleDown.policies[0].type=Replicas"], "/worker/autoscaling/scaleDown/policies/0/type"),
        (["worker.autoscaling.scaleDown.stabilizationWindowSeconds=7200"], "stabilizationWindowSeconds"),
        (["worker.specialists.general.tasksPerReplica=0"], "/worker/specialists/general/tasksPerReplica"),
        (["worker.specialists.general.targetQueueLength=1"], "targetQueueLength"),
    ],
)  # fmt: skip
def test_schema_rejects_bad_scaling_values(sets, error):
    args = [tool("helm"), "template", "t", str(CHART)]
    for s in sets:
        args += ["--set", s]
    proc = run(args, check=False)
    assert proc.returncode != 0
    assert error in proc.stderr


def test_a_specialist_name_that_is_not_a_specialist_name_fails_the_render(tmp_path):
    text = "fallback: x\nspecialists:\n  - {name: \"x' OR '1'='1\", description: d, instructions: i}\n"
    proc = run(
        [
            tool("helm"),
            "template",
            "t",
            str(CHART),
            "-f",
            str(_values(tmp_path, {"catalog": {"content": text}})),
        ],
        check=False,
    )
    assert proc.returncode != 0 and "must match" in proc.stderr


def test_triggers_follow_env_overrides_of_the_queue_prefix_and_the_schema(tmp_path):
    """The workers read TASKYARD_AMQP_PREFIX and TASKYARD_DB_SCHEMA from their env: the triggers use the same."""
    values = {"config": {"env": {"TASKYARD_AMQP_PREFIX": "blue", "TASKYARD_DB_SCHEMA": "blue_store"}},
              "worker": {"specialists": {"researcher": {"mode": "job"}}}}  # fmt: skip
    objects = render(_values(tmp_path, values))
    scalers = of_kind(objects, "ScaledObject") + of_kind(objects, "ScaledJob")
    queues = {
        t["metadata"]["queueName"] for o in scalers for t in o["spec"]["triggers"] if t["type"] == "rabbitmq"
    }
    assert queues and all(q.removeprefix("^").startswith("blue") for q in queues), queues
    assert level_queues_pattern("blue.intake") in queues
    assert level_queues_pattern("blue.work.researcher") in queues
    queries = [
        t["metadata"]["query"] for o in scalers for t in o["spec"]["triggers"] if t["type"] == "postgresql"
    ]
    assert queries and all(q.startswith("SELECT count(*) FROM blue_store.tasks ") for q in queries)


def test_a_schema_override_that_is_not_a_schema_name_fails_the_render(tmp_path):
    values = {"config": {"env": {"TASKYARD_DB_SCHEMA": "x.tasks; DROP TABLE y; --"}}}
    proc = run([tool("helm"), "template", "t", str(CHART), "-f", str(_values(tmp_path, values))], check=False)
    assert proc.returncode != 0 and "not a schema name" in proc.stderr

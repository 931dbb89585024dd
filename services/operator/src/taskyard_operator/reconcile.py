"""Pure: a Specialist and the chart's worker template -> the worker's Kubernetes objects.

Every function here mirrors a template of the chart (deploy/helm/taskyard/templates/worker/*.yaml,
_helpers.tpl, _env.tpl, keda/_triggers.tpl), and a test compares the two outputs for the same specialist:
the operator's worker is the one `helm template` renders for a values-driven specialist, with the
operator's owner reference and its own `app.kubernetes.io/managed-by` label. No I/O.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from taskyard_common.topology import level_queues_pattern
from taskyard_operator.model import API_GROUP, API_VERSION, KIND, SPECIALIST_LABEL, SpecError, Specialist
from taskyard_operator.settings import EnvMap, WorkerTemplate

GRACE = "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS"
NUMBER = re.compile(r"^[0-9]+([.][0-9]+)?$")
PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# The longest backoff between two in-step LLM retries (the worker's), a term of the step bound.
LLM_RETRY_BACKOFF_MAX_SECONDS = 8


@dataclass(frozen=True)
class Kind:
    api_version: str
    kind: str
    plural: str


DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
SCALED_OBJECT = Kind("keda.sh/v1alpha1", "ScaledObject", "scaledobjects")
SCALED_JOB = Kind("keda.sh/v1alpha1", "ScaledJob", "scaledjobs")
CHILD_KINDS = (DEPLOYMENT, SCALED_OBJECT, SCALED_JOB)


@dataclass(frozen=True)
class Plan:
    """What one Specialist needs: the objects to apply, the kinds of its children to remove (a mode change
    leaves the other mode's objects behind), and the broker settings its queues are declared with."""

    name: str
    objects: tuple[dict[str, Any], ...]
    obsolete: tuple[Kind, ...]
    amqp_prefix: str
    delivery_limit: int | None
    max_length: int | None
    db_schema: str


def worker_name(template: WorkerTemplate, specialist: str) -> str:
    """``taskyard.workerName``: "<fullname>-worker-<name>", cut to 63 characters."""
    return f"{template.fullname}-worker-{specialist}"[:63].rstrip("-")


def env_string(value: Any) -> str:
    """``taskyard.env.string``: whole numbers without a fraction or exponent, booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _plain(env: EnvMap, name: str, pattern: re.Pattern[str], what: str) -> str:
    """``taskyard.env.plain``: a setting other objects are built from must be a plain, checked value."""
    entry = env.get(name, {})
    if "value" not in entry:
        raise SpecError(
            f"{name}: other settings are built from it, so it must be a plain value, not valueFrom"
        )
    value = str(entry["value"])
    if not pattern.match(value):
        raise SpecError(f"{name}={value!r}: not {what} ({pattern.pattern})")
    return value


def _number(env: EnvMap, name: str) -> float:
    return float(_plain(env, name, NUMBER, "a number"))


def worker_env(template: WorkerTemplate, specialist: Specialist) -> EnvMap:
    """``taskyard.workerEnv``: the chart's settings, config.env and worker.env, the specialist's grace and
    env; the shutdown grace, unless set, is the step bound
    ``llm_timeout * (llm_retries + 1) + 8 * llm_retries + tool_timeout`` of the environment it ends up with."""
    env: EnvMap = {k: dict(v) for k, v in template.env.items()}
    if specialist.scaling.mode == "job" and template.job.exitWhenIdleSeconds > 0:
        env["TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS"] = {
            "value": env_string(template.job.exitWhenIdleSeconds)
        }
    env.update({k: dict(v) for k, v in template.env_overrides.items()})
    if specialist.pod.shutdownGraceSeconds is not None:
        env[GRACE] = {"value": env_string(specialist.pod.shutdownGraceSeconds)}
    env.update({var.name: var.entry() for var in specialist.pod.env})
    if GRACE not in env:
        retries = specialist.catalog.llm_retries
        llm = _number(env, "TASKYARD_LLM_TIMEOUT_SECONDS")
        tool = _number(env, "TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS")
        bound = llm * (retries + 1) + float(LLM_RETRY_BACKOFF_MAX_SECONDS * retries) + tool
        env[GRACE] = {"value": env_string(bound)}
    return env


def env_list(env: EnvMap) -> list[dict[str, Any]]:
    """``taskyard.env.render``: the map as a container's env list, sorted by name."""
    out: list[dict[str, Any]] = []
    for name in sorted(env):
        entry = env[name]
        if "valueFrom" in entry:
            out.append({"name": name, "valueFrom": entry["valueFrom"]})
        else:
            out.append({"name": name, "value": str(entry["value"])})
    return out


def _probes() -> dict[str, Any]:
    """``taskyard.probes`` on the health port."""
    return {
        "startupProbe": {
            "httpGet": {"path": "/healthz", "port": "health"},
            "periodSeconds": 2,
            "failureThreshold": 60,
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "health"},
            "periodSeconds": 10,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "health"},
            "periodSeconds": 5,
            "timeoutSeconds": 3,
            "failureThreshold": 3,
        },
    }


def pod_spec(template: WorkerTemplate, specialist: Specialist, env: EnvMap) -> dict[str, Any]:
    """``taskyard.workerPodSpec``."""
    grace = _number(env, GRACE)
    container: dict[str, Any] = {
        "name": "worker",
        "image": specialist.pod.image or template.image,
        "imagePullPolicy": template.image_pull_policy,
        "command": ["taskyard-worker", "--specialist", specialist.name],
        "ports": [
            {"name": "health", "containerPort": int(_number(env, "TASKYARD_HEALTH_PORT")), "protocol": "TCP"}
        ],
        "env": env_list(env),
        **_probes(),
        "resources": (
            specialist.pod.resources.model_dump(mode="json", exclude_none=True)
            if specialist.pod.resources is not None
            else template.resources
        ),
        "securityContext": template.security_context,
        "volumeMounts": [
            {"name": "catalog", "mountPath": template.catalog_mount_path, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    if specialist.pod.envFrom:
        container["envFrom"] = [e.model_dump(mode="json", exclude_none=True) for e in specialist.pod.envFrom]
    spec: dict[str, Any] = {
        "serviceAccountName": template.service_account_name,
        "automountServiceAccountToken": template.automount_service_account_token,
    }
    if template.image_pull_secrets:
        spec["imagePullSecrets"] = template.image_pull_secrets
    spec["securityContext"] = template.pod_security_context
    spec["terminationGracePeriodSeconds"] = math.ceil(grace) + template.termination_grace_margin_seconds
    if specialist.scaling.mode == "job":
        spec["restartPolicy"] = "Never"
    spec["containers"] = [container]
    spec["volumes"] = [
        {"name": "catalog", "configMap": {"name": template.catalog_config_map}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    for key, value in (
        ("nodeSelector", template.node_selector),
        ("tolerations", template.tolerations),
        ("affinity", template.affinity),
    ):
        if value:
            spec[key] = value
    return spec


def _selector_labels(template: WorkerTemplate, specialist: str) -> dict[str, str]:
    return {**template.selector_labels, SPECIALIST_LABEL: specialist}


def _labels(template: WorkerTemplate, specialist: str) -> dict[str, str]:
    return {**template.labels, **_selector_labels(template, specialist)}


@dataclass(frozen=True)
class _Scale:
    """``taskyard.workerSpec``'s scaling: the chart's defaults, each replaced by the Specialist's own."""

    replica_count: int
    min_replicas: int
    max_replicas: int
    tasks_per_replica: int
    activation: int
    polling_interval: int
    cooldown: int
    scale_down: dict[str, Any]
    fallback: dict[str, Any]


def _scale(template: WorkerTemplate, specialist: Specialist) -> _Scale:
    d, s = template.defaults, specialist.scaling

    def pick(own: int | None, default: int) -> int:
        return default if own is None else own

    tasks = s.tasksPerReplica if s.tasksPerReplica is not None else d.tasksPerReplica
    return _Scale(
        replica_count=pick(s.replicaCount, d.replicaCount),
        min_replicas=pick(s.minReplicaCount, d.minReplicaCount),
        max_replicas=pick(s.maxReplicaCount, d.maxReplicaCount),
        tasks_per_replica=tasks if tasks is not None else specialist.catalog.concurrency,
        activation=pick(s.activationTasks, d.activationTasks),
        polling_interval=pick(s.pollingInterval, d.pollingInterval),
        cooldown=pick(s.cooldownPeriod, d.cooldownPeriod),
        scale_down=s.scaleDown.model_dump(mode="json", exclude_none=True)
        if s.scaleDown is not None
        else d.scaleDown,
        fallback=s.fallback.model_dump(mode="json", exclude_none=True)
        if s.fallback is not None
        else d.fallback,
    )


def _rabbitmq_trigger(
    template: WorkerTemplate, name: str, queue: str, value: int, activation: int, *, levels: bool = False
) -> dict[str, Any]:
    """``taskyard.rabbitmqTrigger``: ready + unacked messages of one queue (protocol http); with ``levels``
    the sum over every priority level's queue of the work queue ``queue`` (one trigger: the HPA takes the
    highest trigger, not their sum)."""
    metadata: dict[str, Any] = {"protocol": "http", "mode": "QueueLength"}
    if levels:
        metadata |= {"queueName": level_queues_pattern(queue), "useRegex": "true", "operation": "sum"}
    else:
        metadata["queueName"] = queue
    metadata |= {"value": env_string(value), "activationValue": env_string(activation)}
    if template.rabbitmq_host is not None:
        metadata["host"] = template.rabbitmq_host
        metadata["vhostName"] = "/"
    return {
        "type": "rabbitmq",
        "name": name,
        "metadata": metadata,
        "authenticationRef": {"name": template.rabbitmq_auth},
    }


def _postgresql_trigger(
    template: WorkerTemplate, schema: str, specialist: str, value: int, activation: int
) -> dict[str, Any]:
    """``taskyard.postgresqlTrigger``: the specialist's unfinished tasks in the task store."""
    query = (
        f"SELECT count(*) FROM {schema}.tasks WHERE specialist = '{specialist}' "
        "AND status IN ('queued', 'running', 'retrying')"
    )
    return {
        "type": "postgresql",
        "name": "unfinished-tasks",
        "metadata": {
            "query": query,
            "targetQueryValue": env_string(value),
            "activationTargetQueryValue": env_string(activation),
        },
        "authenticationRef": {"name": template.postgresql_auth},
    }


def owner_reference(name: str, uid: str) -> dict[str, Any]:
    """The Specialist as its children's controller: Kubernetes deletes them with it."""
    return {
        "apiVersion": f"{API_GROUP}/{API_VERSION}",
        "kind": KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(template: WorkerTemplate, specialist: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": worker_name(template, specialist),
        "labels": _labels(template, specialist),
    }
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return meta


def specialist_checksum(specialist: Specialist) -> str:
    """sha256 of this specialist's catalog entry alone: editing it rolls its own pods, and editing another
    specialist rolls nothing here (every service follows the catalog without a restart)."""
    entry = json.dumps(specialist.catalog.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(entry.encode()).hexdigest()


def deployment(
    template: WorkerTemplate, specialist: Specialist, env: EnvMap, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """templates/worker/deployment.yaml."""
    spec: dict[str, Any] = {}
    if not (template.keda and template.autoscaling):
        spec["replicas"] = _scale(template, specialist).replica_count
    spec["revisionHistoryLimit"] = 5
    spec["selector"] = {"matchLabels": _selector_labels(template, specialist.name)}
    spec["template"] = {
        "metadata": {
            "labels": _labels(template, specialist.name),
            "annotations": {
                "checksum/specialist": specialist_checksum(specialist),
                **template.pod_annotations,
            },
        },
        "spec": pod_spec(template, specialist, env),
    }
    return {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": _metadata(template, specialist.name, owner),
        "spec": spec,
    }


def scaled_object(
    template: WorkerTemplate, specialist: Specialist, env: EnvMap, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """templates/worker/scaledobject.yaml: the unfinished tasks, the work queue, the quarantine queue."""
    prefix, schema = _names(env)
    scale = _scale(template, specialist)
    spec: dict[str, Any] = {
        "scaleTargetRef": {"name": worker_name(template, specialist.name)},
        "minReplicaCount": scale.min_replicas,
        "maxReplicaCount": scale.max_replicas,
        "pollingInterval": scale.polling_interval,
        "cooldownPeriod": scale.cooldown,
    }
    if int(scale.fallback.get("replicas", 0)) > 0:
        spec["fallback"] = {
            "failureThreshold": scale.fallback.get("failureThreshold", 3),
            "replicas": scale.fallback["replicas"],
        }
    spec["advanced"] = {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": scale.scale_down}}}
    name = specialist.name
    spec["triggers"] = [
        _postgresql_trigger(template, schema, name, scale.tasks_per_replica, scale.activation),
        _rabbitmq_trigger(
            template,
            "work-queue",
            f"{prefix}.work.{name}",
            scale.tasks_per_replica,
            scale.activation,
            levels=True,
        ),
        _rabbitmq_trigger(template, "quarantine-queue", f"{prefix}.quarantine.{name}", 1, 0),
    ]
    return {
        "apiVersion": SCALED_OBJECT.api_version,
        "kind": SCALED_OBJECT.kind,
        "metadata": _metadata(template, name, owner),
        "spec": spec,
    }


def scaled_job(
    template: WorkerTemplate, specialist: Specialist, env: EnvMap, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    """templates/worker/scaledjob.yaml: long-task mode."""
    prefix, _ = _names(env)
    scale = _scale(template, specialist)
    job = template.job
    pod_metadata: dict[str, Any] = {"labels": _labels(template, specialist.name)}
    if template.pod_annotations:
        pod_metadata["annotations"] = dict(template.pod_annotations)
    name = specialist.name
    spec: dict[str, Any] = {
        "pollingInterval": scale.polling_interval,
        "minReplicaCount": scale.min_replicas,
        "maxReplicaCount": scale.max_replicas,
        "successfulJobsHistoryLimit": job.successfulJobsHistoryLimit,
        "failedJobsHistoryLimit": job.failedJobsHistoryLimit,
        "rollout": {"strategy": "gradual"},
        "scalingStrategy": {"strategy": job.scalingStrategy},
        "jobTargetRef": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": job.activeDeadlineSeconds,
            "template": {"metadata": pod_metadata, "spec": pod_spec(template, specialist, env)},
        },
        "triggers": [
            _rabbitmq_trigger(
                template,
                "work-queue",
                f"{prefix}.work.{name}",
                scale.tasks_per_replica,
                scale.activation,
                levels=True,
            ),
            _rabbitmq_trigger(template, "quarantine-queue", f"{prefix}.quarantine.{name}", 1, 0),
        ],
    }
    return {
        "apiVersion": SCALED_JOB.api_version,
        "kind": SCALED_JOB.kind,
        "metadata": _metadata(template, name, owner),
        "spec": spec,
    }


def _names(env: EnvMap) -> tuple[str, str]:
    """``taskyard.env.names``: the queue prefix and the schema the triggers are built from (checked: the
    schema goes into a SQL query)."""
    prefix = _plain(env, "TASKYARD_AMQP_PREFIX", PREFIX, "a queue name prefix")
    schema = _plain(env, "TASKYARD_DB_SCHEMA", SCHEMA, "a schema name")
    return prefix, schema


def _optional_int(env: EnvMap, name: str) -> int | None:
    entry = env.get(name, {})
    value = entry.get("value")
    return int(value) if isinstance(value, str) and value.isdigit() else None


def plan(template: WorkerTemplate, specialist: Specialist, owner: dict[str, Any] | None = None) -> Plan:
    """Everything one Specialist needs; ``SpecError`` when it cannot be rendered (as `helm template` fails)."""
    env = worker_env(template, specialist)
    prefix, schema = _names(env)
    if specialist.scaling.mode == "job":
        if not template.keda:
            raise SpecError(
                f"Specialist {specialist.name!r}: mode job renders a KEDA ScaledJob and needs KEDA"
            )
        objects: tuple[dict[str, Any], ...] = (scaled_job(template, specialist, env, owner),)
        obsolete: tuple[Kind, ...] = (DEPLOYMENT, SCALED_OBJECT)
    elif template.keda and template.autoscaling:
        objects = (
            deployment(template, specialist, env, owner),
            scaled_object(template, specialist, env, owner),
        )
        obsolete = (SCALED_JOB,)
    else:
        objects = (deployment(template, specialist, env, owner),)
        obsolete = (SCALED_OBJECT, SCALED_JOB)
    return Plan(
        name=specialist.name,
        objects=objects,
        obsolete=obsolete,
        amqp_prefix=prefix,
        delivery_limit=_optional_int(env, "TASKYARD_AMQP_DELIVERY_LIMIT"),
        max_length=_optional_int(env, "TASKYARD_AMQP_MAX_LENGTH"),
        db_schema=schema,
    )

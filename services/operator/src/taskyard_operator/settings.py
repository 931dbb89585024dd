"""The operator's settings (``TASKYARD_OPERATOR_*``), set by the chart.

``worker`` is what the chart knows about every worker and a Specialist does not say: the image, the
Secrets, the env the chart gives each worker, the default scaling, the KEDA TriggerAuthentication names. The
chart renders it from its values into the operator's ConfigMap (``TASKYARD_OPERATOR_WORKER``, JSON), so a
Specialist's worker is the one the chart would render for a values-driven specialist.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from taskyard_common.settings import AmqpSettings, DbSettings, LogSettings

# An env map entry, the chart's shape: {"value": "..."} or {"valueFrom": {...}}.
EnvMap = dict[str, dict[str, Any]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AutoscalingDefaults(_Model):
    """The chart's ``worker.autoscaling`` (without ``enabled``)."""

    replicaCount: int = 1
    minReplicaCount: int = 0
    maxReplicaCount: int = 10
    # None: the specialist's concurrency.
    tasksPerReplica: int | None = None
    activationTasks: int = 0
    pollingInterval: int = 15
    cooldownPeriod: int = 300
    scaleDown: dict[str, Any] = Field(
        default_factory=lambda: {
            "stabilizationWindowSeconds": 600,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
        }
    )
    fallback: dict[str, Any] = Field(default_factory=lambda: {"replicas": 0, "failureThreshold": 3})


class JobDefaults(_Model):
    """The chart's ``worker.job``."""

    activeDeadlineSeconds: int = 86400
    exitWhenIdleSeconds: int = 60
    scalingStrategy: str = "default"
    successfulJobsHistoryLimit: int = 3
    failedJobsHistoryLimit: int = 5


class WorkerTemplate(_Model):
    """Every worker's settings, as the chart renders them (``taskyard.operatorWorkerTemplate``)."""

    # The chart's full name: a worker is "<fullname>-worker-<specialist>".
    fullname: str = "taskyard"
    # Labels of every object (app.kubernetes.io/managed-by names the operator) and the worker selector labels.
    labels: dict[str, str] = Field(default_factory=dict)
    selector_labels: dict[str, str] = Field(default_factory=dict)
    keda: bool = True
    autoscaling: bool = True
    image: str = "ghcr.io/taskyard/taskyard-worker:latest"
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: list[dict[str, Any]] = Field(default_factory=list)
    service_account_name: str = "default"
    # Mount the service account token: with TASKYARD_CATALOG_SOURCE=kubernetes the worker reads Specialists.
    automount_service_account_token: bool = False
    pod_security_context: dict[str, Any] = Field(default_factory=dict)
    security_context: dict[str, Any] = Field(default_factory=dict)
    catalog_config_map: str = "taskyard-catalog"
    catalog_mount_path: str = "/etc/taskyard"
    pod_annotations: dict[str, str] = Field(default_factory=dict)
    resources: dict[str, Any] = Field(default_factory=dict)
    node_selector: dict[str, Any] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] = Field(default_factory=dict)
    # The chart's own worker settings (connection Secrets, LLM, shared, catalog, health, HTTP tool; the global
    # shutdown grace when set), then config.env and worker.env merged: a specialist's env comes after both.
    env: EnvMap = Field(default_factory=dict)
    env_overrides: EnvMap = Field(default_factory=dict)
    termination_grace_margin_seconds: int = 15
    defaults: AutoscalingDefaults = AutoscalingDefaults()
    job: JobDefaults = JobDefaults()
    rabbitmq_auth: str = "taskyard-rabbitmq-auth"
    postgresql_auth: str = "taskyard-postgresql-auth"
    # The management API of a chart-made RabbitmqCluster (the triggers' `host`); None: from the Secret.
    rabbitmq_host: str | None = None


class OperatorSettings(BaseSettings):
    """The operator's own settings (``TASKYARD_OPERATOR_*``)."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_OPERATOR_", extra="ignore", populate_by_name=True)

    # The namespace it watches and creates workers in (the release's).
    namespace: str = Field(default="default", min_length=1)
    # The Kubernetes API; empty: the in-cluster service account, else the kubeconfig (kopf's login).
    kube_api_url: str | None = None
    # How often each Specialist's status (counts, children, conditions) is refreshed.
    status_interval_seconds: float = Field(default=30.0, gt=0)
    # Longest wait for one Kubernetes API request.
    kube_timeout_seconds: float = Field(default=30.0, gt=0)
    worker: WorkerTemplate = WorkerTemplate()


class Settings(BaseModel):
    """Everything the operator reads from the environment, built once at start."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    operator: OperatorSettings
    amqp: AmqpSettings
    db: DbSettings
    log: LogSettings


def get_settings() -> Settings:
    return Settings(operator=OperatorSettings(), amqp=AmqpSettings(), db=DbSettings(), log=LogSettings())

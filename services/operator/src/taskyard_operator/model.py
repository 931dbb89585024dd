"""The ``Specialist`` resource's spec: the catalog entry, its scaling and its pod settings.

The catalog part is ``taskyard_common.catalog.SpecialistSpec`` itself (its field names, as in
specialists.yaml, so an entry moves between the catalog and a resource unchanged; the name is the resource's
``metadata.name``). ``scaling`` and ``pod`` use the chart's value names (``worker.autoscaling``,
``worker.specialists.<name>``); a field left out takes the chart's default for every worker, which the
operator reads from its settings. The CRD's schema is generated from these models (``crd.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from taskyard_common.catalog import SpecialistSpec

API_GROUP = "taskyard.dev"
API_VERSION = "v1alpha1"
KIND = "Specialist"
PLURAL = "specialists"
# Children of a Specialist carry its name in this label (the chart's worker objects do too).
SPECIALIST_LABEL = "taskyard.dev/specialist"
# "true": delete the specialist's queues with it even when they still hold messages.
DELETE_QUEUES_ANNOTATION = "taskyard.dev/delete-queues"

ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
Quantity = int | str


class SpecError(ValueError):
    """A Specialist's spec is invalid: retrying cannot help until the resource changes."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ScalingPolicy(_Model):
    type: Literal["Pods", "Percent"]
    value: int = Field(ge=1)
    periodSeconds: int = Field(ge=1, le=1800)


class ScaleDown(_Model):
    """The HPA's scale-down rules (HPAScalingRules)."""

    stabilizationWindowSeconds: int | None = Field(default=None, ge=0, le=3600)
    selectPolicy: Literal["Max", "Min", "Disabled"] | None = None
    policies: tuple[ScalingPolicy, ...] | None = Field(default=None, max_length=10)


class Fallback(_Model):
    replicas: int = Field(ge=0)
    failureThreshold: int | None = Field(default=None, ge=1)


class Scaling(_Model):
    """How the worker runs and scales; a field left out takes the chart's ``worker.autoscaling`` default."""

    mode: Literal["deployment", "job"] = "deployment"
    replicaCount: int | None = Field(default=None, ge=0)
    minReplicaCount: int | None = Field(default=None, ge=0)
    maxReplicaCount: int | None = Field(default=None, ge=1)
    tasksPerReplica: int | None = Field(default=None, ge=1)
    activationTasks: int | None = Field(default=None, ge=0)
    pollingInterval: int | None = Field(default=None, ge=1)
    cooldownPeriod: int | None = Field(default=None, ge=0)
    scaleDown: ScaleDown | None = None
    fallback: Fallback | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Scaling:
        if (
            self.minReplicaCount is not None
            and self.maxReplicaCount is not None
            and self.minReplicaCount > self.maxReplicaCount
        ):
            raise ValueError("minReplicaCount must not exceed maxReplicaCount")
        if self.mode == "job" and self.fallback is not None:
            raise ValueError("fallback applies to mode deployment only (a ScaledJob has none)")
        return self


class SecretKeyRef(_Model):
    name: str = Field(min_length=1)
    key: str = Field(min_length=1)
    optional: bool | None = None


class ValueFrom(_Model):
    secretKeyRef: SecretKeyRef


class EnvVar(_Model):
    """One variable: a plain value, or a key of a Secret."""

    name: str = Field(pattern=ENV_NAME)
    value: str | None = None
    valueFrom: ValueFrom | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if (self.value is None) == (self.valueFrom is None):
            raise ValueError("an env entry needs exactly one of value and valueFrom")
        return self

    def entry(self) -> dict[str, Any]:
        """The entry of an env map, the chart's shape: {"value": ...} or {"valueFrom": ...}."""
        if self.valueFrom is not None:
            return {"valueFrom": self.valueFrom.model_dump(mode="json", exclude_none=True)}
        return {"value": self.value}


class SecretRef(_Model):
    name: str = Field(min_length=1)
    optional: bool | None = None


class EnvFromSecret(_Model):
    secretRef: SecretRef


class Resources(_Model):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class PodSettings(_Model):
    """The worker pod's own settings; a field left out takes the chart's ``worker.*`` value."""

    # A whole image reference; empty: the chart's worker image.
    image: str | None = Field(default=None, min_length=1)
    resources: Resources | None = None
    # Applied after the chart's, config.env and worker.env (a name set again replaces the earlier value).
    env: tuple[EnvVar, ...] = Field(default=(), max_length=200)
    # Every key of these Secrets as a variable (container envFrom).
    envFrom: tuple[EnvFromSecret, ...] = Field(default=(), max_length=20)
    # TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS; empty: the step bound (see docs/deploy.md).
    shutdownGraceSeconds: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _unique_env(self) -> PodSettings:
        names = [e.name for e in self.env]
        if len(names) != len(set(names)):
            raise ValueError("env names must be unique")
        return self


class ResourceExtras(_Model):
    """The parts of a Specialist's spec that are not its catalog entry."""

    scaling: Scaling = Scaling()
    pod: PodSettings = PodSettings()


EXTRA_FIELDS = frozenset(ResourceExtras.model_fields)


@dataclass(frozen=True)
class Specialist:
    """A parsed Specialist resource."""

    name: str
    catalog: SpecialistSpec
    scaling: Scaling
    pod: PodSettings


def parse_specialist(name: str, spec: Mapping[str, Any]) -> Specialist:
    """The resource's spec as models; ``SpecError`` says what is wrong (an invalid spec is permanent)."""
    entry = {k: v for k, v in spec.items() if k not in EXTRA_FIELDS}
    extras = {k: v for k, v in spec.items() if k in EXTRA_FIELDS}
    try:
        catalog = SpecialistSpec.model_validate({**entry, "name": name})
        parsed = ResourceExtras.model_validate(extras)
    except ValidationError as exc:
        raise SpecError(f"invalid Specialist {name!r}: {exc}") from None
    return Specialist(name=name, catalog=catalog, scaling=parsed.scaling, pod=parsed.pod)

"""A small model of how KEDA and the Kubernetes HPA size a ScaledObject's target, and how KEDA starts a
ScaledJob's Jobs: enough to check the chart's scaling objects against scripted timelines without a cluster.

What it follows, read rather than guessed:

- KEDA, ScaledObject specification (keda.sh/docs/2.17/reference/scaledobject-spec): `cooldownPeriod` only
  applies when scaling to 0, scaling between 1 and N is the HPA's; `fallback`: after more than
  `failureThreshold` consecutive failures of a scaler, KEDA reports `target * fallback.replicas` for it
  (AverageValue metrics); `advanced.horizontalPodAutoscalerConfig.behavior` goes to the HPA unchanged.
- KEDA, concepts/scaling-deployments, "Activating and Scaling thresholds": activation decides 0 <-> 1 only; a
  trigger is active when its metric is greater than (not equal to) its activation value; with
  minReplicaCount >= 1 activation plays no part.
- KEDA's executor (pkg/scaling/executor/scale_scaledobjects.go, RequestScale): at 0 replicas, any active
  trigger scales to max(minReplicaCount, 1); with no active trigger and minReplicaCount 0 it scales to 0 once
  LastActiveTime + cooldownPeriod has passed, unless a trigger errored (then nothing changes, with or without a
  fallback); LastActiveTime is refreshed while a trigger is active and none errored. KEDA's HPA gets
  minReplicas = max(minReplicaCount, 1) and one External AverageValue metric per trigger.
- Kubernetes HPA (tasks/run-application/horizontal-pod-autoscale; pkg/controller/podautoscaler:
  replica_calculator.go GetExternalPerPodMetricReplicas, horizontal.go computeReplicasForMetrics,
  stabilizeRecommendationWithBehaviors, calculateScaleUpLimitWithScalingRules,
  calculateScaleDownLimitWithBehaviors): per metric, ceil(total / target), or the current count when
  |total / (target * current) - 1| <= 0.1; the highest metric wins; with a metric missing it only scales up;
  scale-down stabilization keeps the highest recommendation of the window; each policy bounds the change
  since the start of its period (selectPolicy Max: the policy allowing the largest change); defaults: up
  100 % or 4 pods per 15 s without a window, down 100 % per 15 s after a 300 s window.
- KEDA ScaledJob (reference/scaledjob-spec, scalingStrategy; pkg/scaling/scaledjob/metrics.go,
  pkg/scaling/executor/scale_jobs.go): per trigger maxScale = min(queueLength / target, maxReplicaCount);
  multipleScalersCalculation `max` takes the active trigger with the longest queue; Jobs created =
  min(ceil(queueLength), effective) with effective `default` = ceil(maxScale) - running, `accurate` =
  max - running if ceil(maxScale) + running - pending > max, else ceil(maxScale) - pending.

Left out: pod start-up and readiness delays, metric caching, idleReplicaCount, scalingModifiers, a scale-up
stabilization window, and the HPA's own sync period (it evaluates once per KEDA poll here).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

TOLERANCE = 0.1


@dataclass(frozen=True)
class Trigger:
    name: str
    target: float
    activation: float

    @classmethod
    def from_manifest(cls, trigger: dict[str, Any]) -> Trigger:
        meta = trigger["metadata"]
        if trigger["type"] == "postgresql":
            target, activation = meta["targetQueryValue"], meta.get("activationTargetQueryValue", "0")
        else:
            target, activation = meta["value"], meta.get("activationValue", "0")
        return cls(trigger.get("name", trigger["type"]), float(target), float(activation))


@dataclass(frozen=True)
class Policy:
    kind: str  # Pods or Percent
    value: int
    period: int


@dataclass(frozen=True)
class Rules:
    """One direction of the HPA's `behavior` (HPAScalingRules)."""

    window: int
    select: str
    policies: tuple[Policy, ...]

    @classmethod
    def from_manifest(cls, rules: dict[str, Any] | None, default: Rules) -> Rules:
        if rules is None:
            return default
        policies = rules.get("policies")
        return cls(
            rules.get("stabilizationWindowSeconds", default.window),
            rules.get("selectPolicy", "Max"),
            tuple(Policy(p["type"], p["value"], p["periodSeconds"]) for p in policies)
            if policies
            else default.policies,
        )


SCALE_UP_DEFAULT = Rules(0, "Max", (Policy("Percent", 100, 15), Policy("Pods", 4, 15)))
SCALE_DOWN_DEFAULT = Rules(300, "Max", (Policy("Percent", 100, 15),))


@dataclass(frozen=True)
class ScaledObjectSpec:
    min_replicas: int
    max_replicas: int
    polling: int
    cooldown: int
    triggers: tuple[Trigger, ...]
    scale_up: Rules
    scale_down: Rules
    fallback: tuple[int, int] | None  # (replicas, failureThreshold)

    @classmethod
    def from_manifest(cls, obj: dict[str, Any]) -> ScaledObjectSpec:
        spec = obj["spec"]
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {}).get("behavior", {})
        fallback = spec.get("fallback")
        return cls(
            min_replicas=spec.get("minReplicaCount", 0),
            max_replicas=spec.get("maxReplicaCount", 100),
            polling=spec.get("pollingInterval", 30),
            cooldown=spec.get("cooldownPeriod", 300),
            triggers=tuple(Trigger.from_manifest(t) for t in spec["triggers"]),
            scale_up=Rules.from_manifest(behavior.get("scaleUp"), SCALE_UP_DEFAULT),
            scale_down=Rules.from_manifest(behavior.get("scaleDown"), SCALE_DOWN_DEFAULT),
            fallback=(fallback["replicas"], fallback["failureThreshold"]) if fallback else None,
        )


@dataclass
class ScaledObjectModel:
    """KEDA's scale loop and the HPA it drives, for one ScaledObject; `poll` is one KEDA poll + HPA sync."""

    spec: ScaledObjectSpec
    replicas: int = 0
    last_active: float | None = None
    failures: dict[str, int] = field(default_factory=dict)
    recommendations: list[tuple[float, int]] = field(default_factory=list)
    events: list[tuple[float, int]] = field(default_factory=list)  # (time, replica change) made by the HPA

    def poll(self, now: float, metrics: Mapping[str, float | None]) -> int:
        """metrics: each trigger's value by name, None when its scaler fails. Returns the new replica count."""
        spec = self.spec
        error = any(metrics[t.name] is None for t in spec.triggers)
        active = any((v := metrics[t.name]) is not None and v > t.activation for t in spec.triggers)
        reported = {t.name: self._reported(t, metrics[t.name]) for t in spec.triggers}
        if self.replicas == 0:  # the HPA is inactive at 0: activation is KEDA's alone
            if active:
                self.replicas, self.last_active = max(spec.min_replicas, 1), now
            return self.replicas
        if active and not error:
            self.last_active = now
        if not active and not error and spec.min_replicas == 0:
            if self.last_active is None or now - self.last_active > spec.cooldown:
                self.replicas = 0
                return 0
        self.replicas = self._hpa(now, reported)
        return self.replicas

    def _reported(self, trigger: Trigger, value: float | None) -> float | None:
        """What KEDA's metrics server gives the HPA: the value, or the fallback's once past its threshold."""
        if value is not None:
            self.failures[trigger.name] = 0
            return value
        self.failures[trigger.name] = self.failures.get(trigger.name, 0) + 1
        if self.spec.fallback and self.failures[trigger.name] > self.spec.fallback[1]:
            return trigger.target * self.spec.fallback[0]
        return None

    def _hpa(self, now: float, reported: Mapping[str, float | None]) -> int:
        spec, current = self.spec, self.replicas
        proposals = []
        for trigger in spec.triggers:
            value = reported[trigger.name]
            if value is None:
                continue
            ratio = value / (trigger.target * current)
            proposals.append(current if abs(ratio - 1) <= TOLERANCE else math.ceil(value / trigger.target))
        missing = len(proposals) < len(spec.triggers)
        if not proposals or (missing and max(proposals) < current):
            return current  # never scale in on a missing metric
        desired = max(proposals)
        recommendation = self._stabilize(now, desired)
        hpa_min = max(spec.min_replicas, 1)
        if recommendation > current:
            limit = max(self._up_limit(now, current), current)
            recommendation = min(recommendation, spec.max_replicas, limit)
        elif recommendation < current:
            limit = min(self._down_limit(now, current), current)
            recommendation = max(recommendation, hpa_min, limit)
        if recommendation != current:
            self.events.append((now, recommendation - current))
        return recommendation

    def _stabilize(self, now: float, desired: int) -> int:
        up_cutoff, down_cutoff = now - self.spec.scale_up.window, now - self.spec.scale_down.window
        up = min([r for t, r in self.recommendations if t > up_cutoff] + [desired])
        down = max([r for t, r in self.recommendations if t > down_cutoff] + [desired])
        self.recommendations = [(t, r) for t, r in self.recommendations if t > min(up_cutoff, down_cutoff)]
        self.recommendations.append((now, desired))
        return min(max(self.replicas, up), down)

    def _period_start(self, now: float, period: int, current: int) -> int:
        return current - sum(d for t, d in self.events if t > now - period)

    def _up_limit(self, now: float, current: int) -> int:
        rules = self.spec.scale_up
        if rules.select == "Disabled":
            return current
        limits = []
        for p in rules.policies:
            start = self._period_start(now, p.period, current)
            limits.append(start + p.value if p.kind == "Pods" else math.ceil(start * (1 + p.value / 100)))
        return max(limits) if rules.select == "Max" else min(limits)

    def _down_limit(self, now: float, current: int) -> int:
        rules = self.spec.scale_down
        if rules.select == "Disabled":
            return current
        limits = []
        for p in rules.policies:
            start = self._period_start(now, p.period, current)
            limits.append(start - p.value if p.kind == "Pods" else int(start * (1 - p.value / 100)))
        return min(limits) if rules.select == "Max" else max(limits)


@dataclass(frozen=True)
class ScaledJobSpec:
    min_replicas: int
    max_replicas: int
    strategy: str
    triggers: tuple[Trigger, ...]

    @classmethod
    def from_manifest(cls, obj: dict[str, Any]) -> ScaledJobSpec:
        spec = obj["spec"]
        strategy = spec.get("scalingStrategy", {})
        assert strategy.get("multipleScalersCalculation", "max") == "max", "the model knows `max` only"
        return cls(
            min_replicas=spec.get("minReplicaCount", 0),
            max_replicas=spec.get("maxReplicaCount", 100),
            strategy=strategy.get("strategy", "default"),
            triggers=tuple(Trigger.from_manifest(t) for t in spec["triggers"]),
        )


def jobs_to_create(spec: ScaledJobSpec, metrics: Mapping[str, float], running: int, pending: int) -> int:
    """How many Jobs one KEDA poll starts: metrics are each trigger's queue length (rabbitmq http: ready +
    unacked), running the unfinished Jobs, pending those whose pod is not running yet."""
    queue_length, max_value, active = 0.0, 0.0, False
    for trigger in spec.triggers:
        length = metrics[trigger.name]
        if length > trigger.activation and length > queue_length:
            queue_length, max_value, active = length, min(length / trigger.target, spec.max_replicas), True
    if spec.min_replicas > 0:
        active = True
    scale_to, max_scale = math.ceil(queue_length), math.ceil(min(max_value, spec.max_replicas))
    if running < spec.min_replicas:
        effective = scale_to = spec.min_replicas - running
    elif spec.strategy == "default":
        effective = max_scale - (running - spec.min_replicas)
    elif spec.strategy == "accurate":
        others = running - spec.min_replicas
        if max_scale + others - pending > spec.max_replicas:
            effective = spec.max_replicas - others
        else:
            effective = max_scale - pending
    else:
        raise ValueError(f"strategy {spec.strategy} is not modelled")
    if not active or effective <= 0:
        return 0
    return min(scale_to, effective)

"""Pure: what the operator observed about one Specialist -> its ``status``.

Conditions follow the Kubernetes convention (type, status True/False/Unknown, reason, message,
lastTransitionTime that moves only when the status does, observedGeneration). ``Ready`` is the conjunction
of ``QueueReady`` (its queues are declared), ``WorkloadReady`` (its Deployment or ScaledJob exists) and
``ScalerReady`` (KEDA reports its ScaledObject or ScaledJob ready, or no scaler is wanted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


@dataclass(frozen=True)
class Check:
    """One condition's answer: None is Unknown."""

    ok: bool | None
    reason: str
    message: str = ""


@dataclass(frozen=True)
class Observation:
    generation: int | None
    queue: Check
    workload: Check
    scaler: Check
    # Ready messages in the work queue; running tasks and unhandled dead letters in the task store; the
    # Deployment's replicas (None in job mode or when not known).
    queued: int | None = None
    running: int | None = None
    dead_letters: int | None = None
    replicas: int | None = None


def _status(ok: bool | None) -> str:
    return UNKNOWN if ok is None else (TRUE if ok else FALSE)


def _ready(checks: Mapping[str, Check]) -> Check:
    failing = [(name, c) for name, c in checks.items() if c.ok is False]
    if failing:
        name, check = failing[0]
        return Check(False, f"{name}NotReady", check.message or check.reason)
    unknown = [name for name, c in checks.items() if c.ok is None]
    if unknown:
        return Check(None, f"{unknown[0]}Unknown", "")
    return Check(True, "Reconciled", "queues declared, worker and scaler in place")


def conditions(
    observation: Observation, previous: Iterable[Mapping[str, Any]], now: str
) -> list[dict[str, Any]]:
    """The four conditions; a condition whose status did not change keeps its lastTransitionTime."""
    before = {c.get("type"): c for c in previous}
    checks = {"Queue": observation.queue, "Workload": observation.workload, "Scaler": observation.scaler}
    out = []
    for kind, check in [("Ready", _ready(checks)), *((f"{k}Ready", v) for k, v in checks.items())]:
        status = _status(check.ok)
        old = before.get(kind)
        since = old.get("lastTransitionTime") if old and old.get("status") == status else None
        condition: dict[str, Any] = {
            "type": kind,
            "status": status,
            "reason": check.reason,
            "message": check.message,
            "lastTransitionTime": since or now,
        }
        if observation.generation is not None:
            condition["observedGeneration"] = observation.generation
        out.append(condition)
    return out


def status(observation: Observation, previous: Mapping[str, Any] | None, now: str) -> dict[str, Any]:
    """The whole ``status`` (a merge patch: a count not observed this time is removed, never stale)."""
    return {
        "observedGeneration": observation.generation,
        "conditions": conditions(observation, (previous or {}).get("conditions") or (), now),
        "replicas": observation.replicas,
        "queued": observation.queued,
        "running": observation.running,
        "deadLetters": observation.dead_letters,
    }

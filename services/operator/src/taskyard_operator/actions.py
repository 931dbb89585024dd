"""What the handlers carry out: apply a Specialist (queues, then children), observe it, delete its queues.

The decisions are reconcile.py's and status.py's (pure); this module does the I/O they ask for and raises
the operator's errors, which handlers.py maps onto kopf's TemporaryError / PermanentError.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import asyncpg

from taskyard_common.errors import BrokerUnavailable
from taskyard_operator import queues
from taskyard_operator.counts import store_counts, unfinished_tasks
from taskyard_operator.kube import KubeError
from taskyard_operator.model import DELETE_QUEUES_ANNOTATION, SpecError, parse_specialist
from taskyard_operator.reconcile import (
    CHILD_KINDS,
    DEPLOYMENT,
    SCALED_JOB,
    SCALED_OBJECT,
    Kind,
    Plan,
    owner_reference,
    plan,
    worker_name,
)
from taskyard_operator.resources import Resources
from taskyard_operator.status import Check, Observation

log = logging.getLogger(__name__)
STORE_ERRORS = (asyncpg.PostgresError, OSError, TimeoutError, asyncpg.InterfaceError)


def plan_for(resources: Resources, name: str, uid: str | None, spec: Mapping[str, Any]) -> Plan:
    """The Specialist's plan; ``SpecError`` when its spec cannot be rendered."""
    specialist = parse_specialist(name, spec)
    owner = owner_reference(name, uid) if uid else None
    return plan(resources.settings.operator.worker, specialist, owner)


def _kind(obj: Mapping[str, Any]) -> Kind:
    return next(k for k in CHILD_KINDS if k.kind == obj["kind"] and k.api_version == obj["apiVersion"])


def owned_by(obj: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj.get("metadata", {}).get("ownerReferences") or ())


async def apply(resources: Resources, name: str, namespace: str, uid: str, spec: Mapping[str, Any]) -> Plan:
    """Queues first (a worker without its queue would fail to start), then the children; then the other
    mode's children this Specialist owned. Every step is idempotent, so a retry repeats it safely."""
    the_plan = plan_for(resources, name, uid, spec)
    await queues.declare(resources.amqp, resources.settings.amqp, the_plan)
    for obj in the_plan.objects:
        await resources.kube.apply(_kind(obj), namespace, obj)
    child = worker_name(resources.settings.operator.worker, name)
    for kind in the_plan.obsolete:
        existing = await resources.kube.get(kind, namespace, child)
        if existing is not None and owned_by(existing, uid):
            await resources.kube.delete(kind, namespace, child)
            log.info("deleted %s %s: Specialist %s no longer needs it", kind.kind, child, name)
    return the_plan


def _scaler_check(obj: Mapping[str, Any] | None, kind: Kind) -> Check:
    if obj is None:
        return Check(False, "Missing", f"no {kind.kind}")
    for condition in obj.get("status", {}).get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") in ("True", "False"):
            ok = condition["status"] == "True"
            return Check(
                ok, condition.get("reason") or ("Ready" if ok else "NotReady"), condition.get("message", "")
            )
    return Check(None, "Pending", f"KEDA has not reported on the {kind.kind} yet")


async def observe(
    resources: Resources, name: str, namespace: str, spec: Mapping[str, Any], generation: int | None
) -> Observation:
    """What is true now, each part on its own: one that cannot be read is Unknown, never a failure of all."""
    try:
        the_plan = plan_for(resources, name, None, spec)
    except SpecError as exc:
        invalid = Check(False, "InvalidSpec", str(exc)[:1000])
        return Observation(generation, queue=invalid, workload=invalid, scaler=invalid)
    template = resources.settings.operator.worker
    queued: int | None = None
    try:
        # Ready messages of every level's work queue; one missing (not declared yet) makes it unknown.
        ready = [await queues.ready_messages(resources.amqp, q) for q in queues.work_queues(the_plan)]
        missing = [q for q, count in zip(queues.work_queues(the_plan), ready, strict=True) if count is None]
        queued = None if missing else sum(count or 0 for count in ready)
        queue = Check(True, "Declared") if not missing else Check(False, "Missing", f"no queue {missing[0]}")
    except BrokerUnavailable as exc:
        queue = Check(None, "BrokerUnavailable", str(exc))
    running = dead = None
    try:
        counts = await store_counts(resources.db, the_plan.db_schema, name)
        running, dead = counts.running, counts.dead_letters
    except STORE_ERRORS as exc:
        log.warning("cannot count the tasks of %s: %s", name, type(exc).__name__)
    child = worker_name(template, name)
    job = the_plan.objects[0]["kind"] == SCALED_JOB.kind
    replicas: int | None = None
    try:
        if job:
            scaled_job = await resources.kube.get(SCALED_JOB, namespace, child)
            workload = Check(scaled_job is not None, "Created" if scaled_job else "Missing")
            scaler = _scaler_check(scaled_job, SCALED_JOB)
        else:
            deployment = await resources.kube.get(DEPLOYMENT, namespace, child)
            workload = Check(deployment is not None, "Created" if deployment else "Missing")
            if deployment is not None:
                replicas = int(deployment.get("status", {}).get("replicas") or 0)
            if any(o["kind"] == SCALED_OBJECT.kind for o in the_plan.objects):
                scaler = _scaler_check(
                    await resources.kube.get(SCALED_OBJECT, namespace, child), SCALED_OBJECT
                )
            else:
                scaler = Check(True, "NotScaled", "KEDA scaling is off: a fixed replica count")
    except KubeError as exc:
        workload = scaler = Check(None, "ApiError", str(exc))
    return Observation(
        generation,
        queue=queue,
        workload=workload,
        scaler=scaler,
        queued=queued,
        running=running,
        dead_letters=dead,
        replicas=replicas,
    )


async def delete_queues(
    resources: Resources, name: str, spec: Mapping[str, Any], annotations: Mapping[str, str]
) -> queues.Deletion | None:
    """On deletion: the queues go when empty, or in any case when the annotation asks. The children go by
    their owner reference (Kubernetes' garbage collector), not here. None: the spec cannot say which
    queues (an invalid spec never got any)."""
    try:
        the_plan = plan_for(resources, name, None, spec)
    except SpecError:
        return None
    force = annotations.get(DELETE_QUEUES_ANNOTATION, "").lower() == "true"
    unfinished: int | None = None
    if not force:
        try:
            unfinished = await unfinished_tasks(resources.db, the_plan.db_schema, name)
        except STORE_ERRORS as exc:  # unknown: keep the queues rather than guess
            log.warning("cannot count the unfinished tasks of %s: %s", name, type(exc).__name__)
    return await queues.delete(resources.amqp, the_plan, force=force, unfinished_tasks=unfinished)

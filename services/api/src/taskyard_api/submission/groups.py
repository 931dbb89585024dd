"""A group of tasks, from its rate-limit tokens to its children's confirmed announcements: the pipeline
behind ``POST /v1/task-groups``, the single submission's (``submit.py``) for N tasks at once.

A group is checked whole (each task like a submission), charged whole (N tokens in one take, or a 429),
stored whole (the group and its children in one transaction), then announced child by child (confirmed
publishes, many in flight on the one confirm channel) and accepted only once every announcement is
confirmed. When one fails (the broker away or too slow, the intake queue full), the group is taken back
(``discard_group``) before the 503: refused whole, so a client told "not accepted" never finds part of it
running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from taskyard_api.cancelling import tell_workers
from taskyard_api.http.problems import (
    BROKER_UNAVAILABLE,
    IDEMPOTENCY_KEY_IN_USE,
    IDEMPOTENCY_KEY_REUSED,
    QUEUE_FULL,
    ProblemException,
)
from taskyard_api.resources import Resources
from taskyard_api.submission.checks import check_group
from taskyard_api.submission.idempotency import canonical_hash
from taskyard_api.submission.rate_limit import check_affordable, take_submission_token
from taskyard_api.submission.submit import reject_reason
from taskyard_api.workflows.documents import MAX_GROUP_TASKS, ChildLink, GroupSubmission
from taskyard_api.workflows.links import child_link
from taskyard_common.amqp import Publisher
from taskyard_common.announce import publish_then_mark
from taskyard_common.errors import BrokerUnavailable, PublishRejected, StoreUnavailable, Unroutable
from taskyard_common.ids import uuid7
from taskyard_common.messages import IntakeMessage
from taskyard_common.metrics import SUBMIT_REJECTED, TASKS_SUBMITTED
from taskyard_common.store import NewTask, TaskRecord
from taskyard_common.store.groups import GroupRecord
from taskyard_common.topology import Topology

log = logging.getLogger(__name__)

# Intake publishes of one group in flight at once: enough to fill the confirm pipeline, few enough that a
# thousand-task group does not crowd out the single submissions sharing the channel.
PUBLISH_CONCURRENCY = 64


@dataclass(frozen=True)
class GroupSubmitted:
    group: GroupRecord
    # Every child, in the order of the request (a replay: oldest first).
    children: list[ChildLink]
    # True: an earlier request with the same Idempotency-Key and body created the group.
    replayed: bool
    rate_limit_headers: dict[str, str]


async def submit_group(
    resources: Resources, submission: GroupSubmission, *, tenant: str, idempotency_key: str | None
) -> GroupSubmitted:
    """Store and announce the group, or raise what the answer must say: a problem (422, 429, 409, 503 with
    nothing stored), or ``StoreUnavailable`` (503)."""
    check_group(submission, resources.catalog, resources.settings)
    check_affordable(resources, len(submission.tasks))
    await resources.budget_gate.check(tenant)
    retry_after = {"Retry-After": str(resources.settings.retry_after_seconds)}
    try:
        # Known to be down: refuse before taking tokens or storing anything.
        publisher = resources.bus.publisher
    except BrokerUnavailable as exc:
        SUBMIT_REJECTED.labels("broker_unavailable").inc()
        raise ProblemException(
            BROKER_UNAVAILABLE("The message broker is unavailable; the group was not stored."), retry_after
        ) from exc
    store = resources.store
    retention = resources.settings.api.idempotency_retention_seconds
    wanted = canonical_hash(submission)
    if idempotency_key is not None:
        # A retry (after a timeout, say) is answered without charging the group's tokens again.
        known = await store.group_key(tenant, idempotency_key, retention)
        if known is not None:
            return await _replayed(resources, known[0], wanted, known[1], {})
    limit_headers = await take_submission_token(resources, tenant, len(submission.tasks))
    group_id = uuid7()
    children = [
        NewTask(
            id=uuid7(),
            tenant=tenant,
            input=task.input,
            metadata=task.metadata,
            requested_specialist=task.specialist,
            timeout_seconds=task.timeout_seconds,
            group_id=group_id,
            group_role="child",
            priority=submission.priority,
        )
        for task in submission.tasks
    ]
    reduce = submission.reduce.model_dump(exclude_none=True) if submission.reduce is not None else None
    try:
        if idempotency_key is None:
            records = await store.create_group(
                group_id, tenant=tenant, tasks=children, reduce=reduce, metadata=submission.metadata
            )
        else:
            created, stored_hash, existing, records = await store.create_group_idempotent(
                group_id,
                tenant=tenant,
                tasks=children,
                reduce=reduce,
                metadata=submission.metadata,
                key=idempotency_key,
                request_hash=wanted,
                retention_seconds=retention,
            )
            if not created:
                return await _replayed(resources, stored_hash, wanted, existing, limit_headers)
    except StoreUnavailable:
        SUBMIT_REJECTED.labels("database_unavailable").inc()
        raise
    try:
        # Read now, while nothing is announced: a database that fails here refuses the group (503).
        group = await store.get_group(group_id)
    except StoreUnavailable:
        await _take_back(resources, group_id)
        SUBMIT_REJECTED.labels("database_unavailable").inc()
        raise
    if group is None:  # committed a moment ago; only a concurrent discard of our own id could do this
        raise RuntimeError(f"group {group_id} vanished after its commit")
    try:
        await _announce_all(publisher, resources.topology, records)
    except (BrokerUnavailable, PublishRejected, Unroutable) as exc:
        await _take_back(resources, group_id)
        SUBMIT_REJECTED.labels(reject_reason(exc)).inc()
        kind = QUEUE_FULL if isinstance(exc, PublishRejected) else BROKER_UNAVAILABLE
        cause = "the task queue is full" if isinstance(exc, PublishRejected) else "the broker is unavailable"
        raise ProblemException(
            kind(f"The group was not stored ({cause}): none of its tasks runs. Retry later."), retry_after
        ) from exc
    except BaseException:
        await _take_back(resources, group_id)
        raise
    await _mark_published(resources, [r.id for r in records], inline=idempotency_key is not None)
    TASKS_SUBMITTED.inc(len(records))
    return GroupSubmitted(
        group, [_link(r) for r in records], replayed=False, rate_limit_headers=limit_headers
    )


async def _announce_all(publisher: Publisher, topology: Topology, records: Sequence[TaskRecord]) -> None:
    """Publish every child's intake message, ``PUBLISH_CONCURRENCY`` at a time; the first failure stops
    the lanes from starting more, and is raised once those in flight ended."""
    queue = iter(records)
    failures: list[BaseException] = []

    async def lane() -> None:
        for record in queue:
            if failures:
                return
            try:
                await publish_then_mark(publisher, topology, IntakeMessage.from_record(record), None)
            except Exception as exc:
                failures.append(exc)
                return

    await asyncio.gather(*(lane() for _ in range(min(PUBLISH_CONCURRENCY, len(records)))))
    if failures:
        raise failures[0]


async def _take_back(resources: Resources, group_id: UUID) -> None:
    try:
        running = await resources.store.discard_group(group_id)
    except StoreUnavailable:
        # The one case where "not stored" cannot be kept: the sweeper announces its children after its grace.
        log.error("could not take back refused group %s: database unavailable", group_id)
        return
    for task_id in running:
        await tell_workers(resources, task_id)


async def _mark_published(resources: Resources, task_ids: list[UUID], *, inline: bool) -> None:
    """Behind the answer, in batches; with an Idempotency-Key before it, so that a retry with the key finds
    the group announced (else it is told "in use")."""
    if not inline:
        for task_id in task_ids:
            resources.published.mark(task_id)
        return
    try:
        await resources.store.mark_published_many(task_ids)
    except StoreUnavailable:
        log.warning(
            "group children published but not marked (database unavailable): announced once more later"
        )


async def _replayed(
    resources: Resources,
    stored_hash: str,
    wanted_hash: str,
    group_id: UUID | None,
    limit_headers: dict[str, str],
) -> GroupSubmitted:
    """What a request whose key was already used answers: the group as it is now."""
    if stored_hash != wanted_hash:
        raise ProblemException(
            IDEMPOTENCY_KEY_REUSED(
                "This Idempotency-Key was used for a different request; use a new key for a new group."
            )
        )
    group = await resources.store.get_group(group_id) if group_id is not None else None
    if group is None or group.unannounced:
        raise ProblemException(
            IDEMPOTENCY_KEY_IN_USE(
                "A request with this Idempotency-Key is still being processed; retry after Retry-After."
            ),
            headers={"Retry-After": "1"},
        )
    rows = await resources.store.group_children(group.id, limit=MAX_GROUP_TASKS)
    return GroupSubmitted(
        group, [child_link(row) for row in rows], replayed=True, rate_limit_headers=limit_headers
    )


def _link(record: TaskRecord) -> ChildLink:
    return ChildLink(id=record.id, status=record.status, specialist=record.requested_specialist)

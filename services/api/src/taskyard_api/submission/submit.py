"""One submission, from its rate-limit token to its confirmed announcement: the pipeline behind
``POST /v1/tasks``.

A submission is stored first and announced second, and is accepted only once RabbitMQ confirmed the
announcement. When the announcement fails the row is discarded before the 503, so a client that was told
"not accepted" never finds the task running later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from uuid import UUID

from taskyard_api.models import TaskSubmission
from taskyard_api.resources import Resources
from taskyard_api.submission.checks import check_submission
from taskyard_api.submission.idempotency import replayed_task, request_hash
from taskyard_api.submission.rate_limit import take_submission_token
from taskyard_common.announce import publish_then_mark
from taskyard_common.errors import BrokerUnavailable, PublishRejected, StoreUnavailable, Unroutable
from taskyard_common.ids import uuid7
from taskyard_common.messages import IntakeMessage
from taskyard_common.metrics import SUBMIT_REJECTED, TASKS_SUBMITTED
from taskyard_common.store import NewTask, TaskRecord, TaskStore

log = logging.getLogger(__name__)

# Why a submission was refused: the bounded label set of ``taskyard_submit_rejected_total``.
REJECT_REASONS = ("broker_unavailable", "queue_full", "unroutable", "database_unavailable")


@dataclass(frozen=True)
class Submitted:
    record: TaskRecord
    # True: an earlier submission with the same Idempotency-Key and body created the task.
    replayed: bool
    # The RateLimit headers this submission answers with (none while the limit is off).
    rate_limit_headers: dict[str, str]


async def submit(
    resources: Resources, submission: TaskSubmission, *, tenant: str, idempotency_key: str | None
) -> Submitted:
    """Store and announce ``submission``, or raise what the answer must say: a problem (402, 429, 422, 409), or
    ``BrokerUnavailable``, ``PublishRejected``, ``Unroutable`` or ``StoreUnavailable`` (503, nothing
    stored)."""
    # Before the rate limit: a refusal no wait would cure must not use up a token.
    await resources.budget_gate.check(tenant)
    limit_headers = await take_submission_token(resources, tenant)
    check_submission(submission, resources.catalog, resources.settings)
    store = resources.store
    try:
        # Known to be down: refuse before storing anything rather than insert and delete.
        publisher = resources.bus.publisher
    except BrokerUnavailable:
        SUBMIT_REJECTED.labels("broker_unavailable").inc()
        raise
    new_task = NewTask(
        id=uuid7(),
        input=submission.input,
        metadata=submission.metadata,
        requested_specialist=submission.specialist,
        deadline=submission.deadline,
        timeout_seconds=submission.timeout_seconds,
        tenant=tenant,
        webhook=submission.webhook.model_dump() if submission.webhook is not None else None,
        priority=submission.priority,
        not_before=submission.not_before,
        # The chain's next steps: the store creates each when the one before it completes.
        chain_rest=[step.model_dump(exclude_none=True) for step in submission.then]
        if submission.then
        else None,
    )
    try:
        if idempotency_key is None:
            record = await resources.inserts.create(new_task)
        else:
            # The key and the task commit together: a concurrent duplicate finds this task, never makes one.
            wanted = request_hash(submission)
            found = await store.create_idempotent(
                new_task,
                key=idempotency_key,
                request_hash=wanted,
                retention_seconds=resources.settings.api.idempotency_retention_seconds,
            )
            if not found.created or found.record is None:
                return Submitted(
                    replayed_task(found, wanted), replayed=True, rate_limit_headers=limit_headers
                )
            record = found.record
    except StoreUnavailable:
        SUBMIT_REJECTED.labels("database_unavailable").inc()
        raise
    # Without a key the confirm is marked behind, in batches (lost, the sweeper announces the task once more
    # later, and routing applies only once); with one inline: a retry with the same key must find the task
    # marked, or it would be told "in use" (409).
    mark = resources.published.mark_soon if idempotency_key is None else store.mark_published
    try:
        await publish_then_mark(publisher, resources.topology, IntakeMessage.from_record(record), mark)
    except (BrokerUnavailable, PublishRejected, Unroutable) as exc:
        # Deleting the task releases its idempotency key with it (ON DELETE CASCADE): a retry may succeed.
        await _discard(store, record.id)
        SUBMIT_REJECTED.labels(reject_reason(exc)).inc()
        raise  # the exception handlers answer 503 with Retry-After
    TASKS_SUBMITTED.inc()
    return Submitted(record, replayed=False, rate_limit_headers=limit_headers)


async def _discard(store: TaskStore, task_id: UUID) -> None:
    try:
        await store.discard_unpublished(task_id)
    except StoreUnavailable:
        # The one case where "not stored" cannot be kept: the sweeper announces the row after its grace.
        log.error("could not discard unannounced task %s: database unavailable", task_id)


def reject_reason(exc: Exception) -> str:
    """The ``reason`` label of ``taskyard_submit_rejected_total`` for a failed announcement."""
    if isinstance(exc, PublishRejected):
        return "queue_full"
    if isinstance(exc, Unroutable):
        return "unroutable"
    return "broker_unavailable"

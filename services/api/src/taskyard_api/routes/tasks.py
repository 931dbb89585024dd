"""``/v1/tasks``: submit a task, read it, read its result, list tasks, cancel a task.

A submission is stored first and announced second, and answers 202 only once RabbitMQ confirmed the
announcement. When the announcement fails the row is discarded before answering 503, so a client that was
told "not accepted" never finds the task running later.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, Query, Response

from taskyard_api.deps import ResourcesDep, SettingsDep, StoreDep
from taskyard_api.http.cursor import encode_cursor
from taskyard_api.http.params import (
    CursorQuery,
    LimitQuery,
    NoNul,
    TaskIdPath,
    check_input_size,
    page_after,
    page_size,
    parse_task_id,
    require_json_body,
)
from taskyard_api.http.problems import (
    NOT_FOUND,
    RATE_LIMIT_HEADERS,
    TASK_ALREADY_FINISHED,
    TASK_NOT_COMPLETED,
    UNKNOWN_SPECIALIST,
    VALIDATION_ERROR,
    FieldError,
    ProblemException,
    problem_responses,
)
from taskyard_api.models import TaskDocument, TaskPage, TaskResult, TaskSubmission, task_path
from taskyard_api.resources import Resources
from taskyard_api.submission.idempotency import REPLAYED_HEADER, IdempotencyKeyHeader, replay, request_hash
from taskyard_api.submission.rate_limit import take_submission_token
from taskyard_api.tenancy.auth import Principal, Reader, Submitter
from taskyard_common.announce import publish_then_mark
from taskyard_common.catalog import Catalog
from taskyard_common.errors import BrokerUnavailable, PublishRejected, StoreUnavailable, Unroutable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import ControlMessage, IntakeMessage
from taskyard_common.metrics import SUBMIT_REJECTED, TASKS_SUBMITTED
from taskyard_common.store import NewTask, TaskRecord, TaskStore

log = logging.getLogger(__name__)

# Every route needs an API key; a key never sees another tenant's task (404, as for an unknown id).
router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=problem_responses(401))


async def _get_task(store: TaskStore, task_id: str, principal: Principal) -> TaskRecord:
    record = await store.get(parse_task_id(task_id))
    if record is None or not principal.owns(record.tenant):
        raise ProblemException(NOT_FOUND("No task with this id."))
    return record


async def _discard(store: TaskStore, task_id: UUID) -> None:
    try:
        await store.discard_unpublished(task_id)
    except StoreUnavailable:
        # The one case where "not stored" cannot be kept: the sweeper announces the row after its grace.
        log.error("could not discard unannounced task %s: database unavailable", task_id)


def _check_timeout(submission: TaskSubmission, catalog: Catalog) -> None:
    """``timeout_seconds`` may not exceed what the specialist (or, unrouted, any specialist) allows."""
    if submission.timeout_seconds is None:
        return
    spec = catalog.get(submission.specialist) if submission.specialist is not None else None
    if spec is not None:
        ceiling, whose = spec.max_timeout_seconds, f"max_timeout_seconds of {spec.name!r}"
    else:
        ceiling = max(s.max_timeout_seconds for s in catalog.specialists)
        whose = "the largest max_timeout_seconds in the catalog"
    if submission.timeout_seconds > ceiling:
        raise ProblemException(
            VALIDATION_ERROR(
                f"timeout_seconds may be at most {ceiling:g} ({whose}).",
                errors=[
                    FieldError(
                        loc=["body", "timeout_seconds"],
                        msg=f"Input should be less than or equal to {ceiling:g}",
                        type="less_than_equal",
                    )
                ],
            )
        )


def _reject_reason(exc: Exception) -> str:
    """The ``reason`` label of ``taskyard_submit_rejected_total`` (pre-initialised in the lifespan)."""
    if isinstance(exc, PublishRejected):
        return "queue_full"
    if isinstance(exc, Unroutable):
        return "unroutable"
    return "broker_unavailable"


@router.post(
    "",
    status_code=202,
    response_model=TaskDocument,
    summary="Submit a task",
    dependencies=[Depends(require_json_body)],
    responses={
        202: {
            "description": "Accepted: stored and queued. Location names the task. With an Idempotency-Key "
            "already used for the same body: the original task again, with Idempotent-Replayed: true.",
            "headers": {
                "Location": {"description": "The task's URL", "schema": {"type": "string"}},
                REPLAYED_HEADER: {
                    "description": "true when this answers an earlier request with the same Idempotency-Key",
                    "schema": {"type": "string", "enum": ["true"]},
                },
                **RATE_LIMIT_HEADERS,
            },
        },
        **problem_responses(
            400,
            403,
            409,
            413,
            415,
            422,
            429,
            503,
            descriptions={
                403: "The API key's role may not submit (a reader)",
                409: "A request with this Idempotency-Key is still being processed; retry after Retry-After "
                "(1) seconds",
                422: "The request is not valid (validation-error, unknown-specialist), or the Idempotency-Key "
                "was used for another body (idempotency-key-reused)",
                429: "Over this tenant's submission rate; nothing was stored. Retry after Retry-After seconds",
                503: "Not stored: the broker is unavailable or the queue is full (back pressure), or the "
                "database is unavailable. Retry after Retry-After seconds",
            },
        ),
    },
)
async def submit_task(
    submission: TaskSubmission,
    response: Response,
    resources: ResourcesDep,
    principal: Submitter,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Any:
    catalog, store, bus = resources.catalog, resources.store, resources.bus
    limit_headers = await take_submission_token(resources, principal.tenant)
    response.headers.update(limit_headers)
    if submission.specialist is not None and catalog.get(submission.specialist) is None:
        raise ProblemException(
            UNKNOWN_SPECIALIST(
                f"There is no specialist named {submission.specialist!r}.", known_specialists=catalog.names
            )
        )
    _check_timeout(submission, catalog)
    check_input_size(submission.input, resources.settings)
    try:
        # Known to be down: refuse before storing anything rather than insert and delete.
        publisher = bus.publisher
    except BrokerUnavailable:
        SUBMIT_REJECTED.labels("broker_unavailable").inc()
        raise
    new_task = NewTask(
        id=uuid4(),
        input=submission.input,
        metadata=submission.metadata,
        requested_specialist=submission.specialist,
        deadline=submission.deadline,
        timeout_seconds=submission.timeout_seconds,
        tenant=principal.tenant,
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
                return replay(found, wanted, response)
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
        SUBMIT_REJECTED.labels(_reject_reason(exc)).inc()
        raise  # the exception handlers answer 503 with Retry-After
    TASKS_SUBMITTED.inc()
    # Serialised here rather than by FastAPI, which would validate the document again first.
    return Response(
        TaskDocument.from_record(record).model_dump_json(by_alias=True),
        status_code=202,
        media_type="application/json",
        headers={**limit_headers, "Location": task_path(record.id)},
    )


@router.get("", summary="List tasks, newest first", responses=problem_responses(422, 503))
async def list_tasks(
    store: StoreDep,
    settings: SettingsDep,
    principal: Reader,
    status: Annotated[TaskStatus | None, Query(description="Only tasks in this status")] = None,
    specialist: Annotated[
        str | None, Query(max_length=63, description="Only tasks routed to this specialist"), NoNul
    ] = None,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
) -> TaskPage:
    size, after = page_size(limit, settings), page_after(cursor)
    # One extra row tells whether another page exists, so the last page carries no cursor.
    records = await store.list(
        status=status, specialist=specialist, limit=size + 1, after=after, tenant=principal.tenant
    )
    page, more = records[:size], len(records) > size
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if more else None
    return TaskPage(items=[TaskDocument.from_record(r) for r in page], next_cursor=next_cursor)


@router.get("/{task_id}", summary="Read a task", responses=problem_responses(404, 503))
async def get_task(task_id: TaskIdPath, store: StoreDep, principal: Reader) -> TaskDocument:
    return TaskDocument.from_record(await _get_task(store, task_id, principal))


@router.get(
    "/{task_id}/result", summary="Read a completed task's result", responses=problem_responses(404, 409, 503)
)
async def get_task_result(task_id: TaskIdPath, store: StoreDep, principal: Reader) -> TaskResult:
    record = await _get_task(store, task_id, principal)
    if record.status is not TaskStatus.COMPLETED or record.result is None:
        hint = _NO_RESULT_HINTS.get(record.status, "")
        raise ProblemException(
            TASK_NOT_COMPLETED(f"The task is {record.status.value}.{hint}", task_status=record.status)
        )
    return TaskResult(task_id=record.id, result=record.result, usage=record.usage)


_NO_RESULT_HINTS = {
    TaskStatus.FAILED: " It will have no result: see the task's error.",
    TaskStatus.DEAD_LETTERED: " See the task's dead_letter; an operator may replay it.",
    TaskStatus.CANCELLED: " It will have no result.",
}


@router.post(
    "/{task_id}/cancel",
    summary="Cancel a task",
    responses={
        200: {"description": "Cancelled: it had not started (or was cancelled already)"},
        202: {
            "model": TaskDocument,
            "description": "Running: cancellation requested; its worker stops it and it becomes cancelled",
        },
        **problem_responses(
            403,
            404,
            409,
            503,
            descriptions={
                403: "The API key's role may not cancel (a reader)",
                409: "The task already finished otherwise (see task_status)",
            },
        ),
    },
)
async def cancel_task(
    task_id: TaskIdPath, response: Response, resources: ResourcesDep, principal: Submitter
) -> TaskDocument:
    """A task that has not started is cancelled at once (200). A running task is asked to stop (202): every
    worker hears a cancel message, and the one running it stops it and records it ``cancelled``; without
    the message (no broker, no worker listening) the worker's heartbeat notices within a third of its lease.
    Cancelling a cancelled task answers 200 again; any other finished task answers 409."""
    # The owner check first: a task's tenant never changes, and another tenant's task is not found.
    await _get_task(resources.store, task_id, principal)
    record = await resources.store.cancel(parse_task_id(task_id))
    if record is None:
        raise ProblemException(NOT_FOUND("No task with this id."))
    if record.status is TaskStatus.CANCELLED:
        return TaskDocument.from_record(record)
    if record.status is not TaskStatus.RUNNING:
        raise ProblemException(
            TASK_ALREADY_FINISHED(
                f"The task is {record.status.value}; only an unfinished task can be cancelled.",
                task_status=record.status,
            )
        )
    await _tell_workers(resources, record.id)
    response.status_code = 202
    return TaskDocument.from_record(record)


async def _tell_workers(resources: Resources, task_id: UUID) -> None:
    """Best effort: the request is committed, and each worker's heartbeat reads it anyway."""
    try:
        await resources.bus.publisher.publish(
            resources.topology.control_exchange, "", ControlMessage(task_id=task_id)
        )
    except Unroutable:
        log.info("cancel of task %s: no worker listening; its heartbeat will see the request", task_id)
    except (BrokerUnavailable, PublishRejected) as exc:
        log.warning("cancel of task %s not broadcast (%s); its heartbeat will see the request", task_id, exc)

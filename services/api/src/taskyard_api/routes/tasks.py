"""``/v1/tasks``: submit a task, read it, read its result, list tasks.

A submission is stored first and announced second, and answers 202 only once the broker confirmed the
announcement. When the announcement fails the row is discarded before answering 503, so a client that was
told "not accepted" never finds the task running later.
"""

from __future__ import annotations

import logging
from typing import Annotated
from uuid import UUID, uuid4

from fastapi import APIRouter, Depends, Path, Query, Request, Response

from taskyard_api.cursor import InvalidCursor, decode_cursor, encode_cursor
from taskyard_api.deps import ResourcesDep, SettingsDep, StoreDep
from taskyard_api.models import TaskDocument, TaskPage, TaskResult, TaskSubmission, task_path
from taskyard_api.problems import (
    NOT_FOUND,
    TASK_NOT_COMPLETED,
    UNKNOWN_SPECIALIST,
    UNSUPPORTED_MEDIA_TYPE,
    VALIDATION_ERROR,
    FieldError,
    ProblemException,
    problem_responses,
)
from taskyard_api.settings import PAGE_SIZE_CEILING
from taskyard_common.errors import BrokerUnavailable, PublishRejected, Unroutable
from taskyard_common.messages import IntakeMessage, TaskStatus
from taskyard_common.metrics import SUBMIT_REJECTED, TASKS_SUBMITTED
from taskyard_common.store import NewTask, TaskRecord, TaskStore
from taskyard_common.store.postgres import StoreUnavailable
from taskyard_common.topology import INTAKE_ROUTING_KEY

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])

TaskIdPath = Annotated[str, Path(description="The task id (a UUID)")]


def _is_json(content_type: str) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


async def require_json_body(request: Request) -> None:
    """415 for a body that is not JSON (runs before the body is validated, so it wins over a 422)."""
    content_type = request.headers.get("content-type")
    if content_type is not None and _is_json(content_type):
        return
    if content_type is None and not await request.body():
        return  # no body at all: validation reports the missing fields
    raise ProblemException(
        UNSUPPORTED_MEDIA_TYPE("Send the task as a JSON document (Content-Type: application/json)."),
        headers={"Accept-Post": "application/json"},
    )


def _parse_task_id(task_id: str) -> UUID:
    try:
        return UUID(task_id)
    except ValueError:
        # Not a UUID, so no such task can exist: the same answer as an unknown id.
        raise ProblemException(NOT_FOUND("No task with this id.")) from None


async def _get_task(store: TaskStore, task_id: str) -> TaskRecord:
    record = await store.get(_parse_task_id(task_id))
    if record is None:
        raise ProblemException(NOT_FOUND("No task with this id."))
    return record


async def _discard(store: TaskStore, task_id: UUID) -> None:
    try:
        await store.discard_unpublished(task_id)
    except StoreUnavailable:
        # The one case where "not stored" cannot be kept: the sweeper announces the row after its grace.
        log.error("could not discard unannounced task %s: database unavailable", task_id)


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
    summary="Submit a task",
    dependencies=[Depends(require_json_body)],
    responses={
        202: {
            "description": "Accepted: stored and queued. Location names the task.",
            "headers": {"Location": {"description": "The task's URL", "schema": {"type": "string"}}},
        },
        **problem_responses(400, 413, 415, 422, 503),
    },
)
async def submit_task(
    submission: TaskSubmission, response: Response, resources: ResourcesDep
) -> TaskDocument:
    catalog, store, broker = resources.catalog, resources.store, resources.broker
    if submission.specialist is not None and catalog.get(submission.specialist) is None:
        raise ProblemException(
            UNKNOWN_SPECIALIST(
                f"There is no specialist named {submission.specialist!r}.", known_specialists=catalog.names
            )
        )
    try:
        # Known to be down: refuse before storing anything rather than insert and delete.
        publisher = broker.publisher
    except BrokerUnavailable:
        SUBMIT_REJECTED.labels("broker_unavailable").inc()
        raise
    new_task = NewTask(
        id=uuid4(),
        input=submission.input,
        metadata=submission.metadata,
        requested_specialist=submission.specialist,
    )
    try:
        record = await store.create(new_task)
    except StoreUnavailable:
        SUBMIT_REJECTED.labels("database_unavailable").inc()
        raise
    message = IntakeMessage(
        task_id=record.id,
        input=record.input,
        requested_specialist=record.requested_specialist,
        metadata=record.metadata,
    )
    try:
        await publisher.publish(resources.topology.intake_exchange, INTAKE_ROUTING_KEY, message)
    except (BrokerUnavailable, PublishRejected, Unroutable) as exc:
        await _discard(store, record.id)
        SUBMIT_REJECTED.labels(_reject_reason(exc)).inc()
        raise  # the exception handlers answer 503 with Retry-After
    try:
        await store.mark_published(record.id)
    except StoreUnavailable:
        # Announced, so accepted. The sweeper announces it once more later; routing applies only once.
        log.warning("task %s published but not marked published: database unavailable", record.id)
    TASKS_SUBMITTED.inc()
    response.headers["Location"] = task_path(record.id)
    return TaskDocument.from_record(record)


@router.get("", summary="List tasks, newest first", responses=problem_responses(422, 503))
async def list_tasks(
    store: StoreDep,
    settings: SettingsDep,
    status: Annotated[TaskStatus | None, Query(description="Only tasks in this status")] = None,
    specialist: Annotated[
        str | None, Query(max_length=63, description="Only tasks routed to this specialist")
    ] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=PAGE_SIZE_CEILING, description="Page size (default 50)")
    ] = None,
    cursor: Annotated[
        str | None, Query(max_length=200, description="next_cursor of the previous page")
    ] = None,
) -> TaskPage:
    page_size = settings.api.default_page_size if limit is None else limit
    if page_size > settings.api.max_page_size:
        raise ProblemException(
            VALIDATION_ERROR(
                f"limit may be at most {settings.api.max_page_size}.",
                errors=[FieldError(loc=["query", "limit"], msg="too large", type="less_than_equal")],
            )
        )
    after = None
    if cursor is not None:
        try:
            after = decode_cursor(cursor)
        except InvalidCursor:
            raise ProblemException(
                VALIDATION_ERROR(
                    "The cursor is not one this API issued.",
                    errors=[
                        FieldError(loc=["query", "cursor"], msg="malformed cursor", type="cursor_invalid")
                    ],
                )
            ) from None
    # One extra row tells whether another page exists, so the last page carries no cursor.
    records = await store.list(status=status, specialist=specialist, limit=page_size + 1, after=after)
    page, more = records[:page_size], len(records) > page_size
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if more else None
    return TaskPage(items=[TaskDocument.from_record(r) for r in page], next_cursor=next_cursor)


@router.get("/{task_id}", summary="Read a task", responses=problem_responses(404, 503))
async def get_task(task_id: TaskIdPath, store: StoreDep) -> TaskDocument:
    return TaskDocument.from_record(await _get_task(store, task_id))


@router.get(
    "/{task_id}/result", summary="Read a completed task's result", responses=problem_responses(404, 409, 503)
)
async def get_task_result(task_id: TaskIdPath, store: StoreDep) -> TaskResult:
    record = await _get_task(store, task_id)
    if record.status is not TaskStatus.COMPLETED or record.result is None:
        raise ProblemException(
            TASK_NOT_COMPLETED(f"The task is {record.status.value}.", task_status=record.status)
        )
    return TaskResult(task_id=record.id, result=record.result, usage=record.usage)

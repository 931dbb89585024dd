"""``/v1/tasks``: submit a task (or a chain: ``then``), read it, read its result, list tasks, cancel a task
(and what it delegated).

A submission goes through ``submission.submit``; these handlers turn its outcome into the answer. A single
task's document carries its links (``workflows.links``); a list's documents do not.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from taskyard_api.cancelling import tell_workers
from taskyard_api.deps import ResourcesDep, SettingsDep, StoreDep, WatcherDep
from taskyard_api.http.byte_pages import bounded_page
from taskyard_api.http.cursor import encode_cursor
from taskyard_api.http.etag import ETAG_HEADER, IfNoneMatchHeader, client_has_current, task_etag
from taskyard_api.http.fields import (
    LINK_FIELDS,
    FieldsQuery,
    document_json,
    omitted_columns,
    page_json,
    parse_fields,
)
from taskyard_api.http.params import (
    CursorQuery,
    LimitQuery,
    NoNul,
    TaskIdPath,
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
    ProblemException,
    problem_responses,
)
from taskyard_api.models import TaskDocument, TaskPage, TaskResult, TaskSubmission, task_path
from taskyard_api.submission.idempotency import REPLAYED_HEADER, IdempotencyKeyHeader
from taskyard_api.submission.submit import submit
from taskyard_api.tenancy.auth import Reader, Submitter
from taskyard_api.tenancy.owned import owned_task
from taskyard_api.watching.long_poll import WaitQuery, wait_for_change
from taskyard_api.workflows.links import new_task_document, task_document
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import Priority
from taskyard_common.store import TaskRecord
from taskyard_common.store.records import Cursor

log = logging.getLogger(__name__)

# Every route needs an API key; a key never sees another tenant's task (404, as for an unknown id).
router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=problem_responses(401))


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
                "ETag": ETAG_HEADER,
                REPLAYED_HEADER: {
                    "description": "true when this answers an earlier request with the same Idempotency-Key",
                    "schema": {"type": "string", "enum": ["true"]},
                },
                **RATE_LIMIT_HEADERS,
            },
        },
        **problem_responses(
            400,
            402,
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
    submitted = await submit(resources, submission, tenant=principal.tenant, idempotency_key=idempotency_key)
    location = task_path(submitted.record.id)
    if submitted.replayed:
        response.headers.update(submitted.rate_limit_headers)
        response.headers["Location"] = location
        response.headers[REPLAYED_HEADER] = "true"
        response.headers["ETag"] = task_etag(submitted.record)
        return await task_document(resources.store, submitted.record)
    # Serialised here rather than by FastAPI, which would validate the document again first.
    return Response(
        new_task_document(submitted.record).model_dump_json(by_alias=True),
        status_code=202,
        media_type="application/json",
        headers={**submitted.rate_limit_headers, "Location": location, "ETag": task_etag(submitted.record)},
    )


@router.get(
    "",
    summary="List tasks, newest first",
    response_model=TaskPage,
    responses=problem_responses(422, 503),
)
async def list_tasks(
    store: StoreDep,
    settings: SettingsDep,
    principal: Reader,
    status: Annotated[TaskStatus | None, Query(description="Only tasks in this status")] = None,
    specialist: Annotated[
        str | None, Query(max_length=63, description="Only tasks routed to this specialist"), NoNul
    ] = None,
    priority: Annotated[Priority | None, Query(description="Only tasks of this priority")] = None,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
    fields: FieldsQuery = None,
) -> Response:
    """Pages stop at ``limit`` items or at the API's byte bound, whichever comes first (``truncated``)."""
    size, after, wanted = page_size(limit, settings), page_after(cursor), parse_fields(fields)
    omit = omitted_columns(wanted)

    async def fetch(rows: int, position: Cursor | None) -> list[TaskRecord]:
        return await store.list(
            status=status,
            specialist=specialist,
            priority=priority,
            limit=rows,
            after=position,
            tenant=principal.tenant,
            omit=omit,
        )

    # Read in chunks and bounded in bytes (TASKYARD_API_MAX_PAGE_BYTES): a page of large tasks ends early,
    # with a cursor, and the process never holds more than the budget and one chunk of rows.
    page = await bounded_page(
        fetch,
        lambda record: document_json(TaskDocument.from_record(record), wanted),
        lambda r: (r.created_at, r.id),
        size=size,
        after=after,
        max_bytes=settings.api.max_page_bytes,
        weigh=len,
    )
    last = page.last
    next_cursor = encode_cursor(last.created_at, last.id) if page.more and last is not None else None
    return Response(page_json(page.items, next_cursor, page.truncated), media_type="application/json")


@router.get(
    "/{task_id}",
    summary="Read a task, or wait for it to change (long-poll)",
    response_model=TaskDocument,
    responses={
        200: {"description": "The task", "headers": {"ETag": ETAG_HEADER}},
        304: {
            "description": "If-None-Match names the current version: unchanged (with wait: for that long)",
            "headers": {"ETag": ETAG_HEADER},
        },
        **problem_responses(404, 422, 503),
    },
)
async def get_task(
    task_id: TaskIdPath,
    response: Response,
    store: StoreDep,
    watcher: WatcherDep,
    principal: Reader,
    wait: WaitQuery = None,
    if_none_match: IfNoneMatchHeader = None,
    fields: FieldsQuery = None,
) -> Any:
    """With ``wait``, answer as soon as the task changes, at the latest after ``wait`` seconds: changes from
    the version ``If-None-Match`` names (a different one answers at once), else from the current one. With
    ``fields``, only those fields (and ``id``); the links are read only when asked for."""
    wanted = parse_fields(fields)
    record = await owned_task(store, task_id, principal)
    etag = task_etag(record)
    if wait is not None and (if_none_match is None or client_has_current(if_none_match, etag)):
        changed = await wait_for_change(store, watcher, record.id, etag, wait)
        if changed is None:
            raise ProblemException(NOT_FOUND("No task with this id."))
        record, etag = changed, task_etag(changed)
    if client_has_current(if_none_match, etag):
        return Response(status_code=304, headers={"ETag": etag})
    response.headers["ETag"] = etag
    if wanted is None:
        return await task_document(store, record)
    document = (
        await task_document(store, record) if wanted & LINK_FIELDS else TaskDocument.from_record(record)
    )
    return Response(document_json(document, wanted), media_type="application/json", headers={"ETag": etag})


@router.get(
    "/{task_id}/result", summary="Read a completed task's result", responses=problem_responses(404, 409, 503)
)
async def get_task_result(task_id: TaskIdPath, store: StoreDep, principal: Reader) -> TaskResult:
    record = await owned_task(store, task_id, principal)
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
        200: {
            "description": "Cancelled: it had not started or was waiting for the tasks it delegated (or was "
            "cancelled already); what it delegated is cancelled too"
        },
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
    """A task that has not started (or waits for the tasks it delegated) is cancelled at once (200). A
    running task is asked to stop (202): every worker hears a cancel message, and the one running it stops
    it and records it ``cancelled``; without the message (no broker, no worker listening) the worker's
    heartbeat notices within a third of its lease. What it delegated is cancelled with it, all the way
    down, the same way. Cancelling a cancelled task answers 200 again; any other finished task answers 409."""
    # The owner check first: a task's tenant never changes, and another tenant's task is not found.
    await owned_task(resources.store, task_id, principal)
    record = await resources.store.cancel(parse_task_id(task_id))
    if record is None:
        raise ProblemException(NOT_FOUND("No task with this id."))
    if record.status not in (TaskStatus.CANCELLED, TaskStatus.RUNNING):
        raise ProblemException(
            TASK_ALREADY_FINISHED(
                f"The task is {record.status.value}; only an unfinished task can be cancelled.",
                task_status=record.status,
            )
        )
    for running in await resources.store.cancel_descendants(record.id):
        await tell_workers(resources, running)
    if record.status is TaskStatus.RUNNING:
        await tell_workers(resources, record.id)
        response.status_code = 202
    return await task_document(resources.store, record)

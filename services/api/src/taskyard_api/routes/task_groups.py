"""``/v1/task-groups``: submit tasks to run in parallel (with a reduce step run once on their outcomes), read
a group (its counts by status and a page of its children), cancel what of it has not finished.

A submission goes through ``submission.groups``; these handlers turn its outcome into the answer.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response

from taskyard_api.cancelling import tell_workers
from taskyard_api.deps import ResourcesDep, SettingsDep, StoreDep
from taskyard_api.http.cursor import encode_cursor
from taskyard_api.http.params import (
    CursorQuery,
    LimitQuery,
    page_after,
    page_size,
    parse_task_id,
    require_json_body,
)
from taskyard_api.http.problems import (
    GROUP_ALREADY_FINISHED,
    NOT_FOUND,
    RATE_LIMIT_HEADERS,
    ProblemException,
    problem_responses,
)
from taskyard_api.settings import ServiceSettings
from taskyard_api.submission.groups import submit_group
from taskyard_api.submission.idempotency import REPLAYED_HEADER, GroupIdempotencyKeyHeader
from taskyard_api.tenancy.auth import Principal, Reader, Submitter
from taskyard_api.workflows.documents import GroupDocument, GroupSubmission, group_path
from taskyard_api.workflows.links import child_link
from taskyard_common.store import TaskStore
from taskyard_common.store.groups import GroupRecord
from taskyard_common.store.records import Cursor

router = APIRouter(prefix="/v1/task-groups", tags=["task-groups"], responses=problem_responses(401))

GroupIdPath = Annotated[str, Path(description="The group id (a UUID)")]
_NO_GROUP = "No group with this id."
_NOT_FOUND = {404: "No such group (an unknown or malformed id, or another tenant's group)"}


async def owned_group(store: TaskStore, group_id: str, principal: Principal) -> GroupRecord:
    """Another tenant's group is not found, as an unknown id."""
    record = await store.get_group(parse_task_id(group_id, _NO_GROUP))
    if record is None or not principal.owns(record.tenant):
        raise ProblemException(NOT_FOUND(_NO_GROUP))
    return record


async def group_document(
    store: TaskStore, record: GroupRecord, settings: ServiceSettings, limit: int | None, after: Cursor | None
) -> GroupDocument:
    size = page_size(limit, settings)
    # One extra row tells whether another page exists, so the last page carries no cursor.
    rows = await store.group_children(record.id, limit=size + 1, after=after)
    page, more = rows[:size], len(rows) > size
    next_cursor = encode_cursor(page[-1]["created_at"], page[-1]["id"]) if more else None
    return GroupDocument.from_record(record, [child_link(row) for row in page], next_cursor)


@router.post(
    "",
    status_code=202,
    response_model=GroupDocument,
    summary="Submit a group of tasks (and a reduce step)",
    dependencies=[Depends(require_json_body)],
    responses={
        202: {
            "description": "Accepted: the group and every task stored and queued; the document lists every "
            "child, in the order of tasks. Location names the group. With an Idempotency-Key already used for "
            "the same body: the original group again, with Idempotent-Replayed: true.",
            "headers": {
                "Location": {"description": "The group's URL", "schema": {"type": "string"}},
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
                422: "The request is not valid (validation-error, unknown-specialist: the first invalid task "
                "answers), the group is larger than the rate limit's burst, or the Idempotency-Key was used "
                "for another body (idempotency-key-reused)",
                429: "This tenant cannot submit that many tasks now (a group takes one token per task, all at "
                "once); nothing was stored. Retry after Retry-After seconds",
                503: "Not stored, none of its tasks: the broker is unavailable or the queue is full (back "
                "pressure), or the database is unavailable. Retry after Retry-After seconds",
            },
        ),
    },
)
async def submit_task_group(
    submission: GroupSubmission,
    response: Response,
    resources: ResourcesDep,
    principal: Submitter,
    idempotency_key: GroupIdempotencyKeyHeader = None,
) -> Any:
    submitted = await submit_group(
        resources, submission, tenant=principal.tenant, idempotency_key=idempotency_key
    )
    headers = {**submitted.rate_limit_headers, "Location": group_path(submitted.group.id)}
    if submitted.replayed:
        headers[REPLAYED_HEADER] = "true"
    document = GroupDocument.from_record(submitted.group, submitted.children, None)
    # Serialised here rather than by FastAPI, which would validate the document (a thousand children) again.
    return Response(
        document.model_dump_json(by_alias=True),
        status_code=202,
        media_type="application/json",
        headers=headers,
    )


@router.get(
    "/{group_id}",
    summary="Read a group: its status, counts by status, a page of its children",
    response_model=GroupDocument,
    responses=problem_responses(404, 422, 503, descriptions=_NOT_FOUND),
)
async def get_task_group(
    group_id: GroupIdPath,
    store: StoreDep,
    settings: SettingsDep,
    principal: Reader,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
) -> GroupDocument:
    """``children`` is a page of the group's tasks, oldest first: pass ``next_cursor`` as ``cursor``."""
    record = await owned_group(store, group_id, principal)
    return await group_document(store, record, settings, limit, page_after(cursor))


@router.post(
    "/{group_id}/cancel",
    summary="Cancel a group's unfinished tasks",
    responses={
        200: {
            "model": GroupDocument,
            "description": "Cancelled: none of its tasks was running (or it was "
            "cancelled already); it runs no reduce step",
        },
        202: {
            "model": GroupDocument,
            "description": "Its unfinished tasks cancelled; the running ones were asked to stop (their workers "
            "stop them, then the group is cancelled)",
        },
        **problem_responses(
            403,
            404,
            409,
            503,
            descriptions={
                **_NOT_FOUND,
                403: "The API key's role may not cancel (a reader)",
                409: "The group already finished, completed or failed (see group_status)",
            },
        ),
    },
)
async def cancel_task_group(
    group_id: GroupIdPath, response: Response, resources: ResourcesDep, principal: Submitter
) -> GroupDocument:
    """Its tasks that have not started are cancelled at once; running ones are asked to stop, as
    ``POST /v1/tasks/{id}/cancel`` does; its reduce step will not run. Idempotent."""
    store = resources.store
    record = await owned_group(store, group_id, principal)
    if record.status in ("completed", "failed"):
        raise ProblemException(
            GROUP_ALREADY_FINISHED(
                f"The group is {record.status}; only a running group can be cancelled.",
                group_status=record.status,
            )
        )
    running = await store.cancel_group(record.id)
    for task_id in running:
        await tell_workers(resources, task_id)
    if running:
        response.status_code = 202
    now = await store.get_group(record.id)
    if now is None:
        raise ProblemException(NOT_FOUND(_NO_GROUP))
    return await group_document(store, now, resources.settings, None, None)

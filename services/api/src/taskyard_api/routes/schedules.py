"""``/v1/schedules``: cron schedules that create a task at each occurrence; create, read, list, pause,
resume, delete.

The API only stores schedules; the broker agent's scheduler creates their tasks (see docs/architecture.md).
Like tasks, a schedule belongs to the API key's tenant and another tenant's is not found; a ``reader`` may
read, a ``submitter`` or ``admin`` may change. Creating a schedule takes no rate-limit token, and neither do
its occurrences: its cron expression is its rate.
"""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Response

from taskyard_api.deps import ResourcesDep, SettingsDep
from taskyard_api.http.cursor import encode_cursor
from taskyard_api.http.params import (
    CursorQuery,
    LimitQuery,
    page_after,
    page_size,
    parse_task_id,
    require_json_body,
)
from taskyard_api.http.problems import NOT_FOUND, ProblemException, problem_responses
from taskyard_api.resources import Resources
from taskyard_api.schedules.checks import check_task, template
from taskyard_api.schedules.documents import (
    ScheduleDocument,
    SchedulePage,
    ScheduleRequest,
    schedule_path,
)
from taskyard_api.tenancy.auth import Principal, Reader, Submitter
from taskyard_common import cron
from taskyard_common.ids import uuid7
from taskyard_common.messages import utcnow
from taskyard_common.store.schedule_records import NewSchedule, ScheduleRecord

router = APIRouter(prefix="/v1/schedules", tags=["schedules"], responses=problem_responses(401))

ScheduleIdPath = Annotated[str, Path(description="The schedule id (a UUID)")]
NO_SCHEDULE = "No schedule with this id."
_NOT_FOUND = {404: "No such schedule (an unknown or malformed id, or another tenant's)"}
_CHANGE_FORBIDDEN = {403: "The API key's role may not change schedules (a reader)"}


def _schedule_id(schedule_id: str) -> UUID:
    return parse_task_id(schedule_id, NO_SCHEDULE)


def _found(record: ScheduleRecord | None) -> ScheduleDocument:
    if record is None:
        raise ProblemException(NOT_FOUND(NO_SCHEDULE))
    return ScheduleDocument.from_record(record)


@router.post(
    "",
    status_code=201,
    response_model=ScheduleDocument,
    summary="Create a schedule",
    dependencies=[Depends(require_json_body)],
    responses={
        201: {
            "description": "Created; next_run_at is its first occurrence. Location names the schedule",
            "headers": {"Location": {"description": "The schedule's URL", "schema": {"type": "string"}}},
        },
        **problem_responses(
            400,
            403,
            413,
            415,
            422,
            503,
            descriptions={
                **_CHANGE_FORBIDDEN,
                422: "The request is not valid (validation-error: the cron expression, the time zone, the "
                "task as POST /v1/tasks checks it, a not_before or deadline in the task), or the task names "
                "a specialist that does not exist (unknown-specialist)",
                503: "The database is unavailable; nothing was stored. Retry after Retry-After seconds",
            },
        ),
    },
)
async def create_schedule(
    request: ScheduleRequest, response: Response, resources: ResourcesDep, principal: Submitter
) -> ScheduleDocument:
    check_task(request.task, resources.catalog, resources.settings)
    record = await resources.schedules.create(
        NewSchedule(
            id=uuid7(),
            tenant=principal.tenant,
            cron=request.cron,
            timezone=request.timezone,
            task=template(request.task),
            overlap=request.overlap,
            metadata=request.metadata,
            next_run_at=cron.next_after(request.cron, request.timezone, utcnow()),
        )
    )
    response.headers["Location"] = schedule_path(record.id)
    return ScheduleDocument.from_record(record)


@router.get("", summary="List schedules, newest first", responses=problem_responses(422, 503))
async def list_schedules(
    resources: ResourcesDep,
    settings: SettingsDep,
    principal: Reader,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
) -> SchedulePage:
    size, after = page_size(limit, settings), page_after(cursor)
    # One extra row tells whether another page exists, so the last page carries no cursor.
    records = await resources.schedules.list(principal.tenant, limit=size + 1, after=after)
    page, more = records[:size], len(records) > size
    next_cursor = encode_cursor(page[-1].created_at, page[-1].id) if more else None
    return SchedulePage(items=[ScheduleDocument.from_record(r) for r in page], next_cursor=next_cursor)


@router.get(
    "/{schedule_id}",
    summary="Read a schedule: its next occurrence, its last one and what it did",
    responses=problem_responses(404, 503, descriptions=_NOT_FOUND),
)
async def get_schedule(
    schedule_id: ScheduleIdPath, resources: ResourcesDep, principal: Reader
) -> ScheduleDocument:
    return _found(await resources.schedules.get(_schedule_id(schedule_id), principal.tenant))


@router.post(
    "/{schedule_id}/pause",
    summary="Pause a schedule: no occurrence creates a task until it is resumed",
    responses=problem_responses(403, 404, 503, descriptions={**_NOT_FOUND, **_CHANGE_FORBIDDEN}),
)
async def pause_schedule(
    schedule_id: ScheduleIdPath, resources: ResourcesDep, principal: Submitter
) -> ScheduleDocument:
    """Idempotent: pausing a paused schedule answers it again. An occurrence a scheduler is handling right
    now finishes first (the pause waits for it)."""
    return _found(await resources.schedules.pause(_schedule_id(schedule_id), principal.tenant))


@router.post(
    "/{schedule_id}/resume",
    summary="Resume a paused schedule from its next occurrence",
    responses=problem_responses(403, 404, 503, descriptions={**_NOT_FOUND, **_CHANGE_FORBIDDEN}),
)
async def resume_schedule(
    schedule_id: ScheduleIdPath, resources: ResourcesDep, principal: Submitter
) -> ScheduleDocument:
    """The occurrences that fell while it was paused are not run: it continues with the first one after
    now. Resuming a schedule that is not paused changes nothing."""
    return _found(await _resume(resources, _schedule_id(schedule_id), principal))


async def _resume(resources: Resources, schedule_id: UUID, principal: Principal) -> ScheduleRecord | None:
    current = await resources.schedules.get(schedule_id, principal.tenant)
    if current is None:
        return None
    try:
        next_run_at = cron.next_after(current.cron, current.timezone, utcnow())
    except cron.InvalidCron:
        next_run_at = None  # stored by another release, or its time zone is gone: resumed, nothing due
    return await resources.schedules.resume(schedule_id, principal.tenant, next_run_at)


@router.delete(
    "/{schedule_id}",
    status_code=204,
    summary="Delete a schedule (the tasks it created stay)",
    responses={
        204: {"description": "Deleted"},
        **problem_responses(403, 404, 503, descriptions={**_NOT_FOUND, **_CHANGE_FORBIDDEN}),
    },
)
async def delete_schedule(
    schedule_id: ScheduleIdPath, resources: ResourcesDep, principal: Submitter
) -> Response:
    if not await resources.schedules.delete(_schedule_id(schedule_id), principal.tenant):
        raise ProblemException(NOT_FOUND(NO_SCHEDULE))
    return Response(status_code=204)

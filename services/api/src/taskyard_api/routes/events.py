"""``GET /v1/tasks/{task_id}/events``: a task's event log, as a JSON page or a Server-Sent Events stream.

The same route answers both: ``Accept: text/event-stream`` gets the stream (the stored events, then the live
ones until the terminal event, see ``watching.stream``), anything else a page. The position is
``Last-Event-ID`` (what a reconnecting ``EventSource`` sends) or else ``after``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request

from taskyard_api.deps import SettingsDep, StoreDep, WatcherDep
from taskyard_api.http.params import LimitQuery, TaskIdPath, page_size
from taskyard_api.http.problems import problem_responses
from taskyard_api.models import TaskEventDocument, TaskEventPage
from taskyard_api.tenancy.auth import Reader
from taskyard_api.tenancy.owned import owned_task
from taskyard_api.watching.stream import MEDIA_TYPE, EventStreamResponse, event_stream, wants_event_stream

router = APIRouter(prefix="/v1/tasks", tags=["tasks"], responses=problem_responses(401))

# Event numbers are PostgreSQL integers: a larger position could not be compared, only refused.
MAX_EVENT_SEQ = 2**31 - 1

AfterQuery = Annotated[
    int, Query(ge=0, le=MAX_EVENT_SEQ, description="Only the events numbered above this (0: from the first)")
]
LastEventIdHeader = Annotated[
    int | None,
    Header(
        alias="Last-Event-ID",
        ge=0,
        le=MAX_EVENT_SEQ,
        description="The id of the last event received (sent by a reconnecting EventSource); wins over after",
    ),
]

_STREAM_DESCRIPTION = (
    "The task's events: a JSON page, or with Accept: text/event-stream a Server-Sent Events stream (id: the "
    "event's seq, event: its type, data: the event as JSON) of the stored events after the position, then "
    "the live ones, ending after the terminal event; an idle stream sends a comment line every 15 s"
)


@router.get(
    "/{task_id}/events",
    summary="Read a task's events, or stream them (Server-Sent Events)",
    response_model=TaskEventPage,
    responses={
        200: {
            "description": _STREAM_DESCRIPTION,
            "content": {MEDIA_TYPE: {"schema": {"type": "string"}}},
        },
        **problem_responses(404, 422, 503),
    },
)
async def task_events(
    task_id: TaskIdPath,
    request: Request,
    store: StoreDep,
    watcher: WatcherDep,
    settings: SettingsDep,
    principal: Reader,
    after: AfterQuery = 0,
    limit: LimitQuery = None,
    last_event_id: LastEventIdHeader = None,
) -> Any:
    record = await owned_task(store, task_id, principal)
    size = page_size(limit, settings)
    position = last_event_id if last_event_id is not None else after
    if wants_event_stream(request.headers.get("accept")):
        if record.status.terminal and record.event_seq <= position:
            return EventStreamResponse(None)  # it finished before: nothing more will come
        return EventStreamResponse(
            event_stream(
                store,
                watcher,
                record.id,
                after=position,
                heartbeat_seconds=settings.api.sse_heartbeat_seconds,
                retry_seconds=settings.api.watch_poll_seconds,
            )
        )
    events = await store.events(record.id, after=position, limit=size)
    return TaskEventPage(
        items=[TaskEventDocument.model_validate(e.model_dump()) for e in events],
        next_after=events[-1].seq if events else position,
    )

"""``/v1/dead-letters``: the tasks whose message RabbitMQ gave up on, to replay or discard.

The broker agent records each dead letter; here an operator lists them, replays one (the task runs again,
optionally on another specialist) or discards it (the task stays ``dead_lettered``). These routes are
admin-only, and an admin sees only its own tenant's.

A replay is committed first and published second. When the publish fails the answer is 503, but the replay
stands: the task's ``published_at`` stays empty, and after a grace period the API's sweeper announces a
``pending`` one, the broker agent's reaper a ``queued`` one.
"""

from __future__ import annotations

import logging
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from taskyard_api.deps import ResourcesDep, SettingsDep, StoreDep
from taskyard_api.http.byte_pages import bounded_page, json_size
from taskyard_api.http.cursor import encode_cursor
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
    BROKER_UNAVAILABLE,
    NOT_FOUND,
    QUEUE_FULL,
    UNKNOWN_SPECIALIST,
    ProblemException,
    problem_responses,
)
from taskyard_api.models import TaskDocument, task_path
from taskyard_api.tenancy.auth import Admin, Principal
from taskyard_common.announce import announce
from taskyard_common.errors import BrokerUnavailable, PublishRejected, Unroutable
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store import DeadLetterRecord, TaskStore
from taskyard_common.store.records import Cursor

log = logging.getLogger(__name__)

# Admin-only; an admin sees only its own tenant's dead letters (another tenant's: 404).
router = APIRouter(prefix="/v1/dead-letters", tags=["dead-letters"], responses=problem_responses(401, 403))

NO_DEAD_LETTER = "No open dead letter for this task (never dead-lettered, or already replayed or discarded)."
_NOT_FOUND_DESCRIPTION = {404: "No open dead letter for this task id"}


class DeadLetterReason(StrEnum):
    """Why the broker dead-lettered the message (its ``x-first-death-reason``)."""

    DELIVERY_LIMIT = "delivery_limit"
    REJECTED = "rejected"
    EXPIRED = "expired"
    MAXLEN = "maxlen"


class DeadLetterLinks(BaseModel):
    self_: str = Field(alias="self", description="This dead letter")
    task: str = Field(description="The dead-lettered task")
    replay: str = Field(description="POST here to replay it")


def dead_letter_path(task_id: UUID) -> str:
    return f"/v1/dead-letters/{task_id}"


class DeadLetterDocument(BaseModel):
    """A dead letter still to be dealt with: replayed or discarded."""

    task_id: UUID
    specialist: str | None = Field(description="The specialist whose queue it died in; null for intake")
    reason: str = Field(description="delivery_limit, rejected, expired or maxlen (unknown: none of these)")
    queue: str = Field(description="The queue it died in (``lease``: its worker's lease expired too often)")
    deaths: list[dict[str, Any]] = Field(description="The broker's x-death entries")
    recorded_at: datetime
    task_status: TaskStatus = Field(description="The task's status (dead_lettered)")
    links: DeadLetterLinks

    @classmethod
    def from_record(cls, record: DeadLetterRecord) -> DeadLetterDocument:
        path = dead_letter_path(record.task_id)
        links = {"self": path, "task": task_path(record.task_id), "replay": f"{path}/replay"}
        return cls(
            task_id=record.task_id,
            specialist=record.specialist,
            reason=record.reason,
            queue=record.queue,
            deaths=record.deaths,
            recorded_at=record.recorded_at,
            task_status=record.task_status,
            links=DeadLetterLinks.model_validate(links),
        )


class DeadLetterPage(BaseModel):
    """One page of dead letters, most recent first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[DeadLetterDocument]
    next_cursor: str | None


class ReplayRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"specialist": "general"}]})

    specialist: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        description="Run it on this specialist instead (see GET /v1/specialists); default: where it was",
    )
    from_scratch: bool = Field(
        default=False,
        description="Drop the task's step checkpoints and run the agent from the beginning; default: resume "
        "after the last recorded step",
    )


async def _open_dead_letter(store: TaskStore, task_id: str, principal: Principal) -> DeadLetterRecord:
    record = await store.get_dead_letter(parse_task_id(task_id, NO_DEAD_LETTER))
    if record is None or not principal.owns(record.tenant):
        raise ProblemException(NOT_FOUND(NO_DEAD_LETTER))
    return record


@router.get("", summary="List open dead letters, most recent first", responses=problem_responses(422, 503))
async def list_dead_letters(
    store: StoreDep,
    settings: SettingsDep,
    principal: Admin,
    specialist: Annotated[
        str | None, Query(max_length=63, description="Only dead letters of this specialist"), NoNul
    ] = None,
    reason: Annotated[DeadLetterReason | None, Query(description="Only dead letters for this reason")] = None,
    limit: LimitQuery = None,
    cursor: CursorQuery = None,
) -> DeadLetterPage:
    size, after = page_size(limit, settings), page_after(cursor)

    async def fetch(rows: int, position: Cursor | None) -> list[DeadLetterRecord]:
        return await store.list_dead_letters(
            specialist=specialist,
            reason=reason.value if reason else None,
            limit=rows,
            after=position,
            tenant=principal.tenant,
        )

    # Bounded in bytes too (each holds its message): a page of large ones ends early, with a cursor.
    page = await bounded_page(
        fetch,
        DeadLetterDocument.from_record,
        lambda r: (r.recorded_at, r.task_id),
        size=size,
        after=after,
        max_bytes=settings.api.max_page_bytes,
        weigh=json_size,
    )
    last = page.last
    next_cursor = encode_cursor(last.recorded_at, last.task_id) if page.more and last is not None else None
    return DeadLetterPage(items=page.items, next_cursor=next_cursor)


@router.get(
    "/{task_id}",
    summary="Read an open dead letter",
    responses=problem_responses(404, 503, descriptions=_NOT_FOUND_DESCRIPTION),
)
async def get_dead_letter(task_id: TaskIdPath, store: StoreDep, principal: Admin) -> DeadLetterDocument:
    return DeadLetterDocument.from_record(await _open_dead_letter(store, task_id, principal))


@router.post(
    "/{task_id}/replay",
    status_code=202,
    summary="Replay a dead letter: run its task again",
    dependencies=[Depends(require_json_body)],
    responses={
        202: {
            "description": "Replayed: the task is queued (or pending, when it was never routed; scheduled when "
            "its not_before is still ahead) and published. Location names the task.",
            "headers": {"Location": {"description": "The task's URL", "schema": {"type": "string"}}},
        },
        **problem_responses(
            400,
            404,
            413,
            415,
            422,
            503,
            descriptions={
                **_NOT_FOUND_DESCRIPTION,
                503: "Broker unavailable. Before the replay: nothing changed, retry after Retry-After seconds. "
                "After it (task_status set): the replay stands and is published automatically; follow the task",
            },
        ),
    },
)
async def replay_dead_letter(
    task_id: TaskIdPath,
    response: Response,
    resources: ResourcesDep,
    principal: Admin,
    replay: Annotated[ReplayRequest | None, Body()] = None,
) -> TaskDocument:
    """The task gets a fresh start (attempts reset to 0) on its specialist, or on ``specialist`` when given;
    a task that died before it was routed goes back to the broker agent instead (scheduled, and waiting for it,
    while its not_before is ahead)."""
    ident = (await _open_dead_letter(resources.store, task_id, principal)).task_id
    specialist = replay.specialist if replay is not None else None
    catalog = resources.catalog
    if specialist is not None and catalog.get(specialist) is None:
        raise ProblemException(
            UNKNOWN_SPECIALIST(
                f"There is no specialist named {specialist!r}.", known_specialists=catalog.names
            )
        )
    retry_after = {"Retry-After": str(resources.settings.retry_after_seconds)}
    try:
        # Known to be down: leave the dead letter as it is rather than replay and hope.
        publisher = resources.bus.publisher
    except BrokerUnavailable:
        raise ProblemException(
            BROKER_UNAVAILABLE("The message broker is unavailable; the dead letter was not replayed."),
            retry_after,
        ) from None
    from_scratch = replay.from_scratch if replay is not None else False
    record = await resources.store.replay(ident, specialist, from_scratch=from_scratch)
    if record is None:
        raise ProblemException(NOT_FOUND(NO_DEAD_LETTER))
    try:
        await announce(publisher, resources.topology, record, resources.store.mark_published)
    except (BrokerUnavailable, PublishRejected, Unroutable) as exc:
        log.warning("replayed task %s not published (%s); announced after the grace period", record.id, exc)
        kind = QUEUE_FULL if isinstance(exc, PublishRejected) else BROKER_UNAVAILABLE
        api = resources.settings.api
        detail = (
            f"The dead letter was replayed (the task is {record.status.value}) but could not be published; "
            f"it is published automatically within about "
            f"{api.sweeper_grace_seconds + api.sweeper_interval_seconds:g} seconds. "
            "Do not replay it again: follow the task."
        )
        headers = {**retry_after, "Location": task_path(record.id)}
        raise ProblemException(kind(detail, task_status=record.status), headers) from exc
    log.info("replayed dead letter of task %s (now %s)", record.id, record.status.value)
    response.headers["Location"] = task_path(record.id)
    return TaskDocument.from_record(record)


@router.delete(
    "/{task_id}",
    status_code=204,
    summary="Discard a dead letter; the task stays dead_lettered",
    response_class=Response,
    responses={
        204: {"description": "Discarded"},
        **problem_responses(404, 503, descriptions=_NOT_FOUND_DESCRIPTION),
    },
)
async def discard_dead_letter(task_id: TaskIdPath, store: StoreDep, principal: Admin) -> Response:
    ident = (await _open_dead_letter(store, task_id, principal)).task_id
    if not await store.discard_dead_letter(ident):
        raise ProblemException(NOT_FOUND(NO_DEAD_LETTER))
    return Response(status_code=204)

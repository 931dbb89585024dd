"""Request parts several routers share: the task id in the path, JSON bodies, page size and cursor."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import Path, Query, Request
from pydantic import AfterValidator

from taskyard_api.http.cursor import InvalidCursor, decode_cursor
from taskyard_api.http.problems import (
    NOT_FOUND,
    UNSUPPORTED_MEDIA_TYPE,
    VALIDATION_ERROR,
    FieldError,
    ProblemException,
)
from taskyard_api.settings import PAGE_SIZE_CEILING, ServiceSettings
from taskyard_common.store.records import Cursor

TaskIdPath = Annotated[str, Path(description="The task id (a UUID)")]
LimitQuery = Annotated[int | None, Query(ge=1, le=PAGE_SIZE_CEILING, description="Page size (default 50)")]
CursorQuery = Annotated[str | None, Query(max_length=200, description="next_cursor of the previous page")]


def _no_nul(value: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL: such a filter would fail in the database instead of matching nothing.
    if value is not None and "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


# For the ``specialist`` filters: a value the database cannot compare is a 422, not a 500.
NoNul = AfterValidator(_no_nul)


def parse_task_id(task_id: str, detail: str = "No task with this id.") -> UUID:
    try:
        return UUID(task_id)
    except ValueError:
        # Not a UUID, so no such task can exist: the same answer as an unknown id.
        raise ProblemException(NOT_FOUND(detail)) from None


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
        return  # no body at all: validation reports missing fields, or an optional body is absent
    raise ProblemException(
        UNSUPPORTED_MEDIA_TYPE("Send the request body as a JSON document (Content-Type: application/json)."),
        headers={"Accept-Post": "application/json"},
    )


def page_size(limit: int | None, settings: ServiceSettings) -> int:
    """``limit`` or the configured default; above the configured maximum is a 422."""
    size = settings.api.default_page_size if limit is None else limit
    if size > settings.api.max_page_size:
        raise ProblemException(
            VALIDATION_ERROR(
                f"limit may be at most {settings.api.max_page_size}.",
                errors=[FieldError(loc=["query", "limit"], msg="too large", type="less_than_equal")],
            )
        )
    return size


def page_after(cursor: str | None) -> Cursor | None:
    """The position a ``cursor`` query parameter names; a cursor this API did not issue is a 422."""
    if cursor is None:
        return None
    try:
        return decode_cursor(cursor)
    except InvalidCursor:
        raise ProblemException(
            VALIDATION_ERROR(
                "The cursor is not one this API issued.",
                errors=[FieldError(loc=["query", "cursor"], msg="malformed cursor", type="cursor_invalid")],
            )
        ) from None

"""Lean reads as pure functions: which fields a ``fields`` parameter names, which store columns it lets the
store leave unread, and where a page stops by its byte bound."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from taskyard_api.http.byte_pages import bounded_page
from taskyard_api.http.cursor import decode_cursor, encode_cursor
from taskyard_api.http.fields import document_json, omitted_columns, page_json, parse_fields
from taskyard_api.http.problems import ProblemException
from taskyard_api.models import TaskDocument
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store import TaskRecord
from taskyard_common.store.records import Cursor


def record(n: int, size: int = 10) -> TaskRecord:
    at = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(seconds=n)
    return TaskRecord(
        id=uuid.UUID(int=n + 1), status=TaskStatus.PENDING, input="x" * size, metadata={},
        requested_specialist=None, specialist=None, routing=None, attempts=0, result=None, error=None,
        usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, created_at=at,
        published_at=None, routed_at=None, started_at=None, finished_at=None, updated_at=at,
    )  # fmt: skip


def test_fields_always_include_the_id_and_refuse_unknown_names():
    assert parse_fields(None) is None
    assert parse_fields(" status , created_at,") == {"id", "status", "created_at"}
    for empty in ("", " , ", "\x1c"):
        with pytest.raises(ProblemException):
            parse_fields(empty)
    with pytest.raises(ProblemException) as refused:
        parse_fields("status,password")
    assert refused.value.problem.status == 422 and "password" in (refused.value.problem.detail or "")


def test_the_store_skips_only_the_columns_no_field_needs():
    assert omitted_columns(None) == frozenset()
    assert omitted_columns(parse_fields("id,status")) == {
        "input",
        "result",
        "error",
        "attempt_log",
        "dead_letter",
    }
    assert omitted_columns(parse_fields("result,attempt_history")) == {"input", "error", "dead_letter"}


async def task_page(
    records: list[TaskRecord], *, size: int, fields: frozenset[str] | None, max_bytes: int
) -> dict:
    """What ``GET /v1/tasks`` builds from the store's rows (newest first), here from a list."""

    async def fetch(rows: int, after: Cursor | None) -> list[TaskRecord]:
        start = (
            0
            if after is None
            else next(i for i, r in enumerate(records) if (r.created_at, r.id) == after) + 1
        )
        return records[start : start + rows]

    page = await bounded_page(
        fetch,
        lambda r: document_json(TaskDocument.from_record(r), fields),
        lambda r: (r.created_at, r.id),
        size=size,
        after=None,
        max_bytes=max_bytes,
        weigh=len,
    )
    last = page.last
    cursor = encode_cursor(last.created_at, last.id) if page.more and last is not None else None
    return json.loads(page_json(page.items, cursor, page.truncated))


async def test_a_page_stops_at_its_byte_bound_with_a_cursor_after_its_last_item():
    records = [record(n, size=300) for n in range(6)]
    page = await task_page(records, size=5, fields=None, max_bytes=2048)
    assert page["truncated"] and 1 <= len(page["items"]) < 5
    last = records[len(page["items"]) - 1]
    assert decode_cursor(page["next_cursor"]) == (last.created_at, last.id)
    whole = await task_page(records, size=5, fields=parse_fields("status"), max_bytes=2048)
    assert (len(whole["items"]), whole["truncated"]) == (5, False) and whole["next_cursor"] is not None
    assert whole["items"][0] == {"id": str(records[0].id), "status": "pending"}
    one = await task_page([record(0, size=5000)], size=5, fields=None, max_bytes=1024)
    assert (len(one["items"]), one["truncated"], one["next_cursor"]) == (1, False, None), "never empty"

"""Entity tags of task documents, and ``If-None-Match`` (RFC 9110, 8.8.3 and 13.1.2).

A task document changes only with the task's row, and every change of the row that shows in the document
moves its ``event_seq`` (a new event) or its ``updated_at``: the pair names the document's version without
hashing it. The tag is weak: the same version may be serialised differently (key order, number formats).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import Header

from taskyard_common.store import TaskRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def task_etag(record: TaskRecord) -> str:
    return f'W/"{record.event_seq}.{(record.updated_at - _EPOCH) // _MICROSECOND}"'


def _opaque(tag: str) -> str:
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def client_has_current(if_none_match: str | None, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (weak comparison) or is ``*``: the client's copy is current."""
    if if_none_match is None:
        return False
    if if_none_match.strip() == "*":
        return True
    current = _opaque(etag)
    return any(_opaque(tag) == current for tag in if_none_match.split(","))


# The OpenAPI description of the header on the answers that carry it.
ETAG_HEADER = {
    "description": "The version of the task document (weak); send it as If-None-Match to get 304 while unchanged",
    "schema": {"type": "string"},
}
IfNoneMatchHeader = Annotated[
    str | None,
    Header(
        alias="If-None-Match",
        max_length=1024,
        description="An ETag of this task: 304 while it is still the current version",
    ),
]

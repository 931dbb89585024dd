"""Lean reads: ``?fields=`` (the task document's top-level fields to return) and list pages bounded in bytes.

A list page of whole documents carries every input and result: with ``fields=id,status,created_at`` it
carries a few dozen bytes per task, and the store does not even read the large columns left out (see
``store.reads.OMITTABLE``). Whatever ``fields`` says, ``id`` is always returned.

A page stops at ``TASKYARD_API_MAX_PAGE_BYTES`` of items as well as at its ``limit``: a page of large
results cannot grow to hundreds of megabytes. A page cut short says so (``truncated``) and its
``next_cursor`` continues right after its last item; it always holds at least one item, however large.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated

from fastapi import Query

from taskyard_api.http.problems import VALIDATION_ERROR, FieldError, ProblemException
from taskyard_api.models import TaskDocument
from taskyard_common.store.reads import OMITTABLE

FieldsQuery = Annotated[
    str | None,
    Query(
        max_length=1000,
        description="Comma-separated top-level fields of the task document to return (id always is), "
        "e.g. id,status,created_at: leave out input and result to keep pages small",
    ),
]

# The document's fields (by their JSON names) and the store columns each is made of, when not its own name.
DOCUMENT_FIELDS = frozenset(f.alias or name for name, f in TaskDocument.model_fields.items())
_SOURCES = {"input": "input", "result": "result", "error": "error", "attempt_history": "attempt_log"}
# The fields that need the task's links (a read of their own).
LINK_FIELDS = frozenset({"chain", "next", "children"})


def parse_fields(fields: str | None) -> frozenset[str] | None:
    """The fields asked for (None: all); an unknown name is a 422."""
    if fields is None:
        return None
    names = {name.strip() for name in fields.split(",") if name.strip()}
    if not names:
        raise ProblemException(
            VALIDATION_ERROR(
                "fields names no field: leave it out for the whole document, or name some, e.g. id,status.",
                errors=[FieldError(loc=["query", "fields"], msg="no field named", type="value_error")],
            )
        )
    unknown = sorted(names - DOCUMENT_FIELDS)
    if unknown:
        raise ProblemException(
            VALIDATION_ERROR(
                f"Unknown field(s): {', '.join(unknown)}. Fields: {', '.join(sorted(DOCUMENT_FIELDS))}.",
                errors=[FieldError(loc=["query", "fields"], msg="unknown field", type="value_error")],
            )
        )
    return frozenset(names | {"id"})


def omitted_columns(fields: frozenset[str] | None) -> frozenset[str]:
    """The large store columns no asked-for field needs (``dead_letter`` feeds only its own field)."""
    if fields is None:
        return frozenset()
    unused = {column for field, column in _SOURCES.items() if field not in fields}
    if "dead_letter" not in fields:
        unused.add("dead_letter")
    return frozenset(unused) & frozenset(OMITTABLE)


def document_json(document: TaskDocument, fields: frozenset[str] | None) -> bytes:
    if fields is None:
        return document.model_dump_json(by_alias=True).encode()
    # model_dump_json's include takes field names; every field whose alias differs (links: self) is nested.
    return document.model_dump_json(by_alias=True, include=set(fields)).encode()


def page_json(items: Sequence[bytes], next_cursor: str | None, truncated: bool) -> bytes:
    """A list page from its items' JSON (see ``document_json``)."""
    tail = json.dumps({"next_cursor": next_cursor, "truncated": truncated})[1:]
    return b'{"items":[' + b",".join(items) + b"]," + tail.encode()

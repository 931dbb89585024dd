"""``Idempotency-Key`` on ``POST /v1/tasks`` and ``POST /v1/task-groups`` (IETF
draft-ietf-httpapi-idempotency-key-header); the groups' own handling is in ``groups.py``.

A retried submission with the same key and the same body answers the original task again (202, the same
``Location``, ``Idempotent-Replayed: true``), whatever its status now; the same key with another body is a
422 ``idempotency-key-reused``. While the first request is still publishing its task, a duplicate gets 409
``idempotency-key-in-use`` with ``Retry-After: 1``. A refused submission (503) releases its key with its task.
Keys are per tenant and forgotten after ``TASKYARD_API_IDEMPOTENCY_RETENTION_SECONDS``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from fastapi import Header
from pydantic import BaseModel

from taskyard_api.http.problems import IDEMPOTENCY_KEY_IN_USE, IDEMPOTENCY_KEY_REUSED, ProblemException
from taskyard_api.models import TaskSubmission
from taskyard_common.lifecycle import TaskStatus
from taskyard_common.store import IdempotentCreate, TaskRecord


def _key_header(what: str) -> Any:
    return Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x20-\x7e]+$",
        description=f"1-255 printable ASCII characters. A retry with the same key and body answers the "
        f"original {what} (Idempotent-Replayed: true) instead of creating another; remembered for "
        "TASKYARD_API_IDEMPOTENCY_RETENTION_SECONDS (default 24 h).",
    )


IdempotencyKeyHeader = Annotated[str | None, _key_header("task")]
# POST /v1/task-groups: keys of groups are kept apart from those of tasks.
GroupIdempotencyKeyHeader = Annotated[str | None, _key_header("group")]

REPLAYED_HEADER = "Idempotent-Replayed"


def request_hash(submission: TaskSubmission) -> str:
    """SHA-256 of the validated submission's canonical JSON (sorted keys, no spaces). Without a webhook or
    a chain (``then``), the field is left out, so a key stored before submissions had one still matches its
    retry."""
    exclude = {name for name in ("webhook", "then") if getattr(submission, name) is None}
    return canonical_hash(submission, exclude)


def canonical_hash(request: BaseModel, exclude: set[str] | None = None) -> str:
    """SHA-256 of a validated request's canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(
        request.model_dump(mode="json", exclude=exclude),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def replayed_task(found: IdempotentCreate, wanted_hash: str) -> TaskRecord:
    """The task a submission whose key was already used answers with (``found.created`` is False)."""
    if found.request_hash != wanted_hash:
        raise ProblemException(
            IDEMPOTENCY_KEY_REUSED(
                "This Idempotency-Key was used for a different request; use a new key for a new task."
            )
        )
    record = found.record
    if record is None or (record.status is TaskStatus.PENDING and record.published_at is None):
        raise ProblemException(
            IDEMPOTENCY_KEY_IN_USE(
                "A request with this Idempotency-Key is still being processed; retry after Retry-After."
            ),
            headers={"Retry-After": "1"},
        )
    return record

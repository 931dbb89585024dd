"""The requests the clients send, built once for both ``Client`` and ``AsyncClient``: path, parameters,
body, headers, and whether a failed send may be repeated (see ``retry``)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote
from uuid import UUID

TaskId = str | UUID
TaskInput = str | Mapping[str, Any]
# The API's bound on ``?wait=`` of a long-poll.
MAX_WAIT_SECONDS = 60.0


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    retry: bool = True  # safe to send again (a read, a cancel, a submission with its idempotency key)
    conflict_retried: bool = False  # 409 idempotency-key-in-use is retried (submissions)
    timeout: float | None = None  # this request's own read timeout (long-polls)


def _id(value: TaskId) -> str:
    return quote(str(value), safe="")


def _params(**values: Any) -> dict[str, str]:
    return {name: str(value) for name, value in values.items() if value is not None}


def new_idempotency_key() -> str:
    return f"taskyard-client-{uuid.uuid4()}"


def submit(
    input: TaskInput,
    *,
    specialist: str | None,
    metadata: Mapping[str, str] | None,
    timeout_seconds: float | None,
    deadline: datetime | str | None,
    webhook: Mapping[str, Any] | None,
    idempotency_key: str | None,
    priority: str | None = None,
    not_before: datetime | str | None = None,
) -> Call:
    body: dict[str, Any] = {"input": input if isinstance(input, str) else dict(input)}
    if specialist is not None:
        body["specialist"] = specialist
    if metadata:
        body["metadata"] = dict(metadata)
    if timeout_seconds is not None:
        body["timeout_seconds"] = timeout_seconds
    if deadline is not None:
        body["deadline"] = deadline.isoformat() if isinstance(deadline, datetime) else deadline
    if webhook is not None:
        body["webhook"] = dict(webhook)
    if priority is not None:
        body["priority"] = priority
    if not_before is not None:
        body["not_before"] = not_before.isoformat() if isinstance(not_before, datetime) else not_before
    # Generated here, once: every retry of this call sends the same key, so the API makes one task.
    key = idempotency_key or new_idempotency_key()
    return Call("POST", "/v1/tasks", json=body, headers={"Idempotency-Key": key}, conflict_retried=True)


def get(task_id: TaskId) -> Call:
    return Call("GET", f"/v1/tasks/{_id(task_id)}")


def long_poll(task_id: TaskId, *, wait: float, etag: str | None) -> Call:
    wait = min(wait, MAX_WAIT_SECONDS)
    headers = {"If-None-Match": etag} if etag else {}
    return Call(
        "GET",
        f"/v1/tasks/{_id(task_id)}",
        params={"wait": f"{wait:.3f}"},
        headers=headers,
        timeout=wait + 15,  # the API answers by then; the rest is slack for a slow network
    )


def result(task_id: TaskId) -> Call:
    return Call("GET", f"/v1/tasks/{_id(task_id)}/result")


def cancel(task_id: TaskId) -> Call:
    # Cancelling is idempotent on the API's side (a cancelled task answers 200 again).
    return Call("POST", f"/v1/tasks/{_id(task_id)}/cancel")


def task_page(
    *,
    status: str | None,
    specialist: str | None,
    limit: int | None,
    cursor: str | None,
    priority: str | None = None,
) -> Call:
    params = _params(status=status, specialist=specialist, priority=priority, limit=limit, cursor=cursor)
    return Call("GET", "/v1/tasks", params=params)


def event_page(task_id: TaskId, *, after: int, limit: int | None) -> Call:
    return Call("GET", f"/v1/tasks/{_id(task_id)}/events", params=_params(after=after, limit=limit))


def events_path(task_id: TaskId) -> str:
    return f"/v1/tasks/{_id(task_id)}/events"


def specialists() -> Call:
    return Call("GET", "/v1/specialists")


def usage(*, start: datetime | str | None, end: datetime | str | None, group_by: str | None) -> Call:
    def text(value: datetime | str | None) -> str | None:
        return value.isoformat() if isinstance(value, datetime) else value

    return Call(
        "GET", "/v1/usage", params=_params(**{"from": text(start), "to": text(end), "group_by": group_by})
    )


def dead_letter_page(
    *, specialist: str | None, reason: str | None, limit: int | None, cursor: str | None
) -> Call:
    params = _params(specialist=specialist, reason=reason, limit=limit, cursor=cursor)
    return Call("GET", "/v1/dead-letters", params=params)


def dead_letter(task_id: TaskId) -> Call:
    return Call("GET", f"/v1/dead-letters/{_id(task_id)}")


def replay(task_id: TaskId, *, specialist: str | None, from_scratch: bool) -> Call:
    body: dict[str, Any] = {}
    if specialist is not None:
        body["specialist"] = specialist
    if from_scratch:
        body["from_scratch"] = True
    # Never repeated: a replay answered 503 may stand already (the API says so with task_status).
    return Call("POST", f"/v1/dead-letters/{_id(task_id)}/replay", json=body, retry=False)


def discard(task_id: TaskId) -> Call:
    return Call("DELETE", f"/v1/dead-letters/{_id(task_id)}", retry=False)


def submit_group(
    tasks: Sequence[Mapping[str, Any]], *, reduce: Mapping[str, Any] | None, idempotency_key: str | None
) -> Call:
    body: dict[str, Any] = {"tasks": [_group_task(task) for task in tasks]}
    if reduce is not None:
        body["reduce"] = dict(reduce)
    key = idempotency_key or new_idempotency_key()
    return Call("POST", "/v1/task-groups", json=body, headers={"Idempotency-Key": key}, conflict_retried=True)


def _group_task(task: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(task) - {"input", "specialist", "metadata"}
    if "input" not in task or unknown:
        raise ValueError("each group task is {'input': ..., 'specialist'?: ..., 'metadata'?: ...}")
    return {name: value for name, value in task.items() if value is not None}


def group(group_id: TaskId) -> Call:
    return Call("GET", f"/v1/task-groups/{_id(group_id)}")


def cancel_group(group_id: TaskId) -> Call:
    return Call("POST", f"/v1/task-groups/{_id(group_id)}/cancel")

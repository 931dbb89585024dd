"""The owner check of every route about one task: another tenant's task is not found, as an unknown id."""

from __future__ import annotations

from taskyard_api.http.params import parse_task_id
from taskyard_api.http.problems import NOT_FOUND, ProblemException
from taskyard_api.tenancy.auth import Principal
from taskyard_common.store import TaskRecord, TaskStore


async def owned_task(store: TaskStore, task_id: str, principal: Principal) -> TaskRecord:
    record = await store.get(parse_task_id(task_id))
    if record is None or not principal.owns(record.tenant):
        raise ProblemException(NOT_FOUND("No task with this id."))
    return record

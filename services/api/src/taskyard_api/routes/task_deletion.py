"""Deleting finished tasks: ``DELETE /v1/tasks/{id}`` (one, by its tenant's submitters and admins) and
``DELETE /v1/tenant/tasks`` (every finished task of the caller's tenant, admins only): a user's data removed
on request, before retention would.

Both remove what retention removes (``taskyard_common.store.retention``): the task, its events, step
checkpoints, webhook deliveries, dead letter and idempotency key (a later submission with that key creates a
new task), and a finished group left without tasks. An unfinished task is refused (409: cancel it first), and
so is a finished one that an unfinished workflow still reads (a waiting parent's child, a running group's
child). Nothing is published: nobody watches a finished task's wake-ups, and an event stream or long-poll
open on it ends with the task gone (404 from then on).
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.params import TaskIdPath, parse_task_id
from taskyard_api.http.problems import (
    NOT_FOUND,
    TASK_IN_WORKFLOW,
    TASK_NOT_FINISHED,
    ProblemException,
    problem_responses,
)
from taskyard_api.tenancy.auth import Admin, Submitter
from taskyard_common import metrics
from taskyard_common.store.retention import Deletion, Removed

router = APIRouter(tags=["tasks"], responses=problem_responses(401))

# One call of DELETE /v1/tenant/tasks removes batches for about this long, then answers; the client calls
# again while ``complete`` is false. A request never holds a connection for minutes, and each batch is a
# short transaction of its own.
PURGE_SECONDS = 5.0
PURGE_BATCH = 500


class TenantPurge(BaseModel):
    deleted: int = Field(description="Finished tasks this call removed (with everything attached to them)")
    complete: bool = Field(description="No removable task is left; false: call again")
    remaining: int = Field(
        description="The tenant's tasks still stored: unfinished ones (cancel them first), ones an unfinished "
        "workflow still needs, and (when not complete) those not removed yet"
    )


@router.delete(
    "/v1/tasks/{task_id}",
    status_code=204,
    summary="Delete a finished task",
    responses={
        204: {"description": "Deleted, with its events, checkpoints, webhook deliveries and dead letter"},
        **problem_responses(
            403,
            404,
            409,
            503,
            descriptions={
                403: "The API key's role may not delete (a reader)",
                409: "Not finished (task-not-finished: cancel it first), or a workflow that is not finished "
                "still needs it (task-in-workflow)",
            },
        ),
    },
)
async def delete_task(task_id: TaskIdPath, resources: ResourcesDep, principal: Submitter) -> Response:
    deletion = await resources.retention.delete_task(parse_task_id(task_id), principal.tenant)
    if deletion.outcome is Deletion.NOT_FOUND:
        raise ProblemException(NOT_FOUND("No task with this id."))
    if deletion.outcome is Deletion.UNFINISHED:
        raise ProblemException(
            TASK_NOT_FINISHED(
                f"The task is {deletion.status}; only a finished task can be deleted (cancel it first).",
                task_status=deletion.status,
            )
        )
    if deletion.outcome is Deletion.NEEDED:
        raise ProblemException(
            TASK_IN_WORKFLOW(
                "The task's waiting parent or running group still reads its outcome; delete it once "
                "that has finished.",
                task_status=deletion.status,
            )
        )
    metrics.count_removed(deletion.removed.rows)
    return Response(status_code=204)


@router.delete(
    "/v1/tenant/tasks",
    summary="Delete every finished task of this tenant",
    responses=problem_responses(
        403, 503, descriptions={403: "Only an admin key may delete all of its tenant's tasks"}
    ),
)
async def purge_tenant(resources: ResourcesDep, principal: Admin) -> TenantPurge:
    """Removes the tenant's finished tasks, oldest first, in batches, for a few seconds at most; call again
    until ``complete``. Unfinished tasks stay: cancel them, wait for them to end, then call again."""
    loop = asyncio.get_running_loop()
    until = loop.time() + PURGE_SECONDS
    done, complete = Removed(), False
    while not complete and loop.time() < until:
        batch = await resources.retention.purge_tenant_batch(principal.tenant, PURGE_BATCH)
        metrics.count_removed(batch.rows)
        done.add(batch)
        complete = batch.tasks < PURGE_BATCH
    remaining = await resources.retention.remaining(principal.tenant)
    return TenantPurge(deleted=done.tasks, complete=complete, remaining=remaining)

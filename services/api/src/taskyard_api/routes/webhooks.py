"""``/v1/tasks/{task_id}/webhook-deliveries``: what was announced to a task's webhook, and sending it again.

The broker agent's dispatcher sends the deliveries (see docs/api.md, Webhooks); these routes read the
outbox it drains. A task of another tenant is not found, as everywhere.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated

from fastapi import APIRouter, Path

from taskyard_api.deps import ResourcesDep
from taskyard_api.http.params import TaskIdPath, parse_task_id
from taskyard_api.http.problems import NOT_FOUND, ProblemException, problem_responses
from taskyard_api.resources import Resources
from taskyard_api.tenancy.auth import Principal, Reader, Submitter
from taskyard_api.webhooks.documents import WebhookDelivery, WebhookDeliveryList
from taskyard_common.store import TaskRecord

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/tasks", tags=["webhooks"], responses=problem_responses(401))

DeliveryIdPath = Annotated[str, Path(description="The delivery's id (its webhook-id)")]
# Ids are msg_<hex>_<number>; anything else names no delivery (and NUL would not even reach the database).
_DELIVERY_ID = re.compile(r"[A-Za-z0-9_.-]{1,200}")
NO_DELIVERY = "This task has no webhook delivery with this id."


async def _owned_task(resources: Resources, task_id: str, principal: Principal) -> TaskRecord:
    record = await resources.store.get(parse_task_id(task_id))
    if record is None or not principal.owns(record.tenant):
        raise ProblemException(NOT_FOUND("No task with this id."))
    return record


@router.get(
    "/{task_id}/webhook-deliveries",
    summary="List a task's webhook deliveries and their attempts",
    responses=problem_responses(404, 503),
)
async def list_webhook_deliveries(
    task_id: TaskIdPath, resources: ResourcesDep, principal: Reader
) -> WebhookDeliveryList:
    """One delivery per event the task's webhook asked for that has happened, oldest first; empty for a
    task without a webhook or not finished yet."""
    record = await _owned_task(resources, task_id, principal)
    return WebhookDeliveryList(items=await resources.deliveries.of_task(record.id))


@router.post(
    "/{task_id}/webhook-deliveries/{delivery_id}/redeliver",
    status_code=202,
    summary="Send a webhook delivery again",
    responses={
        202: {"description": "Pending again and due now, with the same id and a fresh retry window"},
        **problem_responses(
            403,
            404,
            503,
            descriptions={
                403: "The API key's role may not redeliver (a reader)",
                404: "No such task, or no such delivery of it",
            },
        ),
    },
)
async def redeliver_webhook(
    task_id: TaskIdPath, delivery_id: DeliveryIdPath, resources: ResourcesDep, principal: Submitter
) -> WebhookDelivery:
    """Whatever its status (delivered, failed, still pending), the delivery is sent again as soon as a
    dispatcher is free, with the same ``webhook-id``, and retried for a new window if it fails."""
    record = await _owned_task(resources, task_id, principal)
    if not _DELIVERY_ID.fullmatch(delivery_id):
        raise ProblemException(NOT_FOUND(NO_DELIVERY))
    delivery = await resources.deliveries.redeliver(record.id, delivery_id)
    if delivery is None:
        raise ProblemException(NOT_FOUND(NO_DELIVERY))
    log.info("webhook delivery %s of task %s asked for again", delivery.id, record.id)
    return delivery

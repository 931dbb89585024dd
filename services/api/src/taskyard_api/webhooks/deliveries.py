"""A task's webhook deliveries in the outbox, as the API reads them and asks for them again."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import asyncpg

from taskyard_api.webhooks.documents import WebhookDelivery
from taskyard_common.store._pg import PoolStore

_COLUMNS = (
    "id, task_id, event, url, status, attempts, next_attempt_at, created_at, delivered_at, redelivered_at,"
    " attempt_log, payload"
)


def delivery_path(task_id: UUID, delivery_id: str) -> str:
    return f"/v1/tasks/{task_id}/webhook-deliveries/{delivery_id}"


def to_document(row: asyncpg.Record) -> WebhookDelivery:
    data: dict[str, Any] = dict(row)
    task_id: UUID = data.pop("task_id")
    data["attempt_history"] = data.pop("attempt_log")
    if data["status"] != "pending":
        data["next_attempt_at"] = None
    data["links"] = {
        "task": f"/v1/tasks/{task_id}",
        "redeliver": f"{delivery_path(task_id, data['id'])}/redeliver",
    }
    return WebhookDelivery.model_validate(data)


class WebhookDeliveries(PoolStore):
    """Shares the task store's pool."""

    async def of_task(self, task_id: UUID) -> list[WebhookDelivery]:
        rows = await self._fetch(
            f"SELECT {_COLUMNS} FROM webhook_deliveries WHERE task_id = $1 ORDER BY created_at, id", task_id
        )
        return [to_document(r) for r in rows]

    async def redeliver(self, task_id: UUID, delivery_id: str) -> WebhookDelivery | None:
        """Pending again, due now, with a fresh retry window and the same id; None when the task has no
        such delivery. An attempt in flight meanwhile is not recorded (its claim is gone)."""
        row = await self._fetchrow(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = clock_timestamp(),"
            " redelivered_at = clock_timestamp() WHERE id = $1 AND task_id = $2"
            f" RETURNING {_COLUMNS}",
            delivery_id,
            task_id,
        )
        return to_document(row) if row is not None else None

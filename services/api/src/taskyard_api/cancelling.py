"""Telling the workers to stop a running task whose cancellation was just committed."""

from __future__ import annotations

import logging
from uuid import UUID

from taskyard_api.resources import Resources
from taskyard_common.errors import BrokerUnavailable, PublishRejected, Unroutable
from taskyard_common.messages import ControlMessage

log = logging.getLogger(__name__)


async def tell_workers(resources: Resources, task_id: UUID) -> None:
    """Broadcast a cancel message on the control exchange. Best effort: the request is committed, and each
    worker's lease heartbeat reads it anyway."""
    try:
        await resources.bus.publisher.publish(
            resources.topology.control_exchange, "", ControlMessage(task_id=task_id)
        )
    except Unroutable:
        log.info("cancel of task %s: no worker listening; its heartbeat will see the request", task_id)
    except (BrokerUnavailable, PublishRejected) as exc:
        log.warning("cancel of task %s not broadcast (%s); its heartbeat will see the request", task_id, exc)

"""``GET /v1/tasks/{task_id}?wait=S``: hold the request until the task document changes, at most S seconds.

The request watches the task (see ``watcher``), so it answers as soon as a wake-up or the watcher's poll says
the task changed and a read shows a new ETag; while it waits it holds no database connection.
"""

from __future__ import annotations

import asyncio
from typing import Annotated
from uuid import UUID

from fastapi import Query

from taskyard_api.http.etag import task_etag
from taskyard_api.watching.watcher import Watcher
from taskyard_common.metrics import LONG_POLLS_IN_PROGRESS
from taskyard_common.store import TaskRecord, TaskStore

# The longest wait a client may ask for: below the idle timeouts of common proxies and load balancers.
MAX_WAIT_SECONDS = 60.0

WaitQuery = Annotated[
    float | None,
    Query(
        gt=0,
        le=MAX_WAIT_SECONDS,
        allow_inf_nan=False,
        description="Long-poll: answer as soon as the task changes, at the latest after this many seconds "
        "(0 < wait <= 60)",
    ),
]


async def wait_for_change(
    store: TaskStore, watcher: Watcher, task_id: UUID, etag: str, wait_seconds: float
) -> TaskRecord | None:
    """The task as soon as its ETag is no longer ``etag``, else as it is after ``wait_seconds`` (or at
    once when the API stops); None when it is gone."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    LONG_POLLS_IN_PROGRESS.inc()
    try:
        with watcher.watch(task_id) as watch:
            while True:
                watch.rearm()
                record = await store.get(task_id)
                if record is None or task_etag(record) != etag or watch.closing:
                    return record
                watch.saw(record.event_seq, record.updated_at)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return record
                await watch.wait(remaining)
    finally:
        LONG_POLLS_IN_PROGRESS.dec()

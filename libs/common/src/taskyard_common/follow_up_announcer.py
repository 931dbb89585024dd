"""Announcing the tasks a task's end creates or resumes: a chain's next step, a parent whose children are
done, a group's reduce step (the store hands each one to ``on_follow_up`` once its row is committed).

The announcement is the announce path's (``taskyard_common.announce``): published, then marked. It runs in
the background, so the transition that ended the task never waits for the broker; if it is lost (the broker
away, the process dying), the row stays unmarked and the usual recovery publishes it: the API's sweeper for
a pending task (a chain step, a reduce step), the broker agent's reaper for a queued one (a resumed parent).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from taskyard_common.amqp import Publisher
from taskyard_common.announce import announce
from taskyard_common.errors import NotAnnounceable, TaskyardError
from taskyard_common.store import TaskRecord, TaskStore
from taskyard_common.topology import Topology

log = logging.getLogger(__name__)


class FollowUpAnnouncer:
    def __init__(self, publisher: Callable[[], Publisher], topology: Topology, store: TaskStore) -> None:
        """``publisher`` gives the publisher to use now (raising ``BrokerUnavailable`` while there is none)."""
        self._publisher = publisher
        self._topology = topology
        self._store = store
        self._running: set[asyncio.Task[None]] = set()

    def __call__(self, record: TaskRecord) -> None:
        task = asyncio.get_running_loop().create_task(self._announce(record))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _announce(self, record: TaskRecord) -> None:
        try:
            await announce(self._publisher(), self._topology, record, self._store.mark_published)
        except (TaskyardError, NotAnnounceable) as exc:
            log.warning("task %s (%s) not announced yet: %s; recovered later", record.id, record.status, exc)

    async def close(self, grace_seconds: float = 5.0) -> None:
        """Let the announcements under way finish (bounded)."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace_seconds)

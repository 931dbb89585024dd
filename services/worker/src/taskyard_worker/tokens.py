"""The ``token`` events of one streamed attempt: the text of its replies, appended to the task's event log
while the model writes it.

Deltas come far faster than a database should take statements, so they are batched: the text of a step
waits at most ``flush_seconds`` and goes out as one event (``{"step": n, "text": ...}``), one
``append_events`` call per task per interval, plus one when the reply ends (so a step's text is in the log
before its ``llm_call`` event and before the task's terminal event). Text that will not stand is voided by a
marker, ``{"step": n, "restart": true}``: the call is tried again (an in-step retry, or the step failed and
the next attempt tries it) or the reply turned out to be a tool call; text not sent yet is simply dropped.

Tokens never fail the run: an append the store refuses (the log is full, or the lease is gone) stops the
tokens of this attempt, and a store error drops that batch; each is logged once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import Any, Protocol
from uuid import UUID

log = logging.getLogger(__name__)


class EventLog(Protocol):
    async def append_events(
        self, task_id: UUID, owner: str, events: Sequence[tuple[str, dict[str, Any]]]
    ) -> bool: ...


class TokenStream:
    """The token events of one attempt of one task (a ``streaming.TokenSink``)."""

    def __init__(self, events: EventLog, task_id: UUID, owner: str, *, flush_seconds: float) -> None:
        self._events = events
        self._task_id = task_id
        self._owner = owner
        self._flush_seconds = flush_seconds
        self._pending: list[dict[str, Any]] = []
        self._step = 0
        self._muted = False
        # Steps whose text went out (or is on its way) since their last marker.
        self._sent: set[int] = set()
        self._refused = False
        self._failed = False
        self._timer: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    def begin(self, step: int) -> None:
        """An LLM call for step ``step`` starts."""
        self._step = step
        self._muted = False

    def text(self, delta: str) -> None:
        if self._muted or self._refused or not delta:
            return
        last = self._pending[-1] if self._pending else None
        if last is not None and last["step"] == self._step and "text" in last:
            last["text"] += delta
        else:
            self._pending.append({"step": self._step, "text": delta})
        self._schedule()

    def mute(self) -> None:
        """The reply is a tool call: its text is not part of an answer."""
        self._void()
        self._muted = True

    def restart(self) -> None:
        """The call failed: its text is void (the call, or the step in the next attempt, is tried again)."""
        self._void()
        self._muted = False

    async def finish(self) -> None:
        """The call ended: what is left goes out now."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self._send()

    def close(self) -> None:
        """The run ended: nothing more goes out."""
        for task in self._tasks:
            task.cancel()

    def _void(self) -> None:
        step = self._step
        self._pending = [e for e in self._pending if not (e["step"] == step and "text" in e)]
        if step in self._sent:
            self._sent.discard(step)
            self._pending.append({"step": step, "restart": True})
            self._schedule()

    def _schedule(self) -> None:
        if self._timer is None and not self._refused:
            self._timer = self._spawn(self._flush_later())

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coroutine)
        self._tasks.add(task)  # a reference, so the task is not collected mid-flight
        task.add_done_callback(self._tasks.discard)
        return task

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_seconds)
        self._timer = None  # from here on the send is not cancelled; new text starts the next interval
        await self._send()

    async def _send(self) -> None:
        async with self._lock:  # one append at a time: the events of a task keep their order
            batch, self._pending = self._pending, []
            if not batch or self._refused:
                return
            self._sent.update(e["step"] for e in batch if "text" in e)
            try:
                held = await self._events.append_events(
                    self._task_id, self._owner, [("token", e) for e in batch]
                )
            except Exception as exc:
                # The run is worth more than its tokens: this batch is lost, the next may go through.
                if not self._failed:
                    log.warning("task %s: token events not appended: %s", self._task_id, exc)
                    self._failed = True
                return
            if not held:
                self._refused = True
                log.warning(
                    "task %s: token events refused (the event log is full, or the lease is gone);"
                    " no more tokens in this attempt",
                    self._task_id,
                )

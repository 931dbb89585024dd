"""``Client``: the taskyard API from synchronous Python code (``AsyncClient`` is its asyncio twin).

from taskyard_client import Client

with Client() as taskyard:             # TASKYARD_URL / TASKYARD_API_KEY, or a profile
    task = taskyard.submit("Summarize: ...")
    for event in taskyard.events(task.id):
        print(event.type, event.data)
    print(taskyard.result(task.id).output)
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from taskyard_client import _calls as calls
from taskyard_client._base import ClientBase, stream_timeout
from taskyard_client._calls import TaskId, TaskInput
from taskyard_client.errors import StreamBroken, TransportError, WaitTimeout, api_error
from taskyard_client.events import EventCursor, SseParser
from taskyard_client.models import (
    DeadLetter,
    DeadLetterPage,
    EventPage,
    Group,
    Specialist,
    SpecialistList,
    Task,
    TaskEvent,
    TaskPage,
    TaskResult,
    UsageReport,
)
from taskyard_client.retry import RetryPolicy, after_failure

M = TypeVar("M", bound=BaseModel)


class Client(ClientBase):
    """A connection pool to one taskyard API; close it (or use it as a context manager) when done.

    ``url`` and ``api_key`` default to ``TASKYARD_URL`` and ``TASKYARD_API_KEY``, then to the ``profile``
    (see ``taskyard_client.config``). ``retry`` bounds the retries of 429, 503 and lost connections.
    ``http_client`` replaces the ``httpx.Client`` (its base URL and headers are then the caller's)."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        profile: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        super().__init__(url, api_key, profile=profile, timeout=timeout, retry=retry)
        self._http = http_client or httpx.Client(
            base_url=self.url, headers=self.headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- sending, with the retry policy ------------------------------------------------------------

    def _send(self, call: calls.Call) -> httpx.Response:
        attempt, waited = 1, 0.0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params or None,
                    json=call.json,
                    headers=call.headers,
                    timeout=self._timeout_for(call),
                )
            except httpx.TransportError as exc:
                delay = after_failure(self.retry, attempt=attempt, waited=waited) if call.retry else None
                if delay is None:
                    raise TransportError(f"{call.method} {call.path}: {exc!r}") from exc
            else:
                if response.is_success or response.status_code == 304:
                    return response
                delay = self._delay_after(call, response, attempt, waited)
                if delay is None:
                    raise api_error(response)
            time.sleep(delay)
            attempt, waited = attempt + 1, waited + delay

    def _model(self, call: calls.Call, model: type[M]) -> M:
        return model.model_validate_json(self._send(call).content)

    # -- tasks --------------------------------------------------------------------------------------

    def submit(
        self,
        input: TaskInput,
        *,
        specialist: str | None = None,
        metadata: Mapping[str, str] | None = None,
        timeout_seconds: float | None = None,
        deadline: datetime | str | None = None,
        webhook: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
        priority: str | None = None,
        not_before: datetime | str | None = None,
    ) -> Task:
        """Submit a task (202): text or a JSON object. An ``Idempotency-Key`` is generated unless given and
        sent with every retry, so a retried submission never makes a second task. ``priority``: high, normal
        or low; ``not_before``: it stays scheduled until then."""
        call = calls.submit(
            input,
            specialist=specialist,
            metadata=metadata,
            timeout_seconds=timeout_seconds,
            deadline=deadline,
            webhook=webhook,
            idempotency_key=idempotency_key,
            priority=priority,
            not_before=not_before,
        )
        return self._model(call, Task)

    def get(self, task_id: TaskId) -> Task:
        return self._model(calls.get(task_id), Task)

    def wait(self, task_id: TaskId, *, timeout: float | None = None, poll: float = 30.0) -> Task:
        """The task once it is finished (completed, failed, cancelled, dead-lettered), by long-polls of at
        most ``poll`` seconds. Raises ``WaitTimeout`` (with the last state) after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        response = self._send(calls.get(task_id))
        task, etag = Task.model_validate_json(response.content), response.headers.get("etag")
        while not task.terminal:
            wait = self._next_wait(deadline, poll)
            if wait is None:
                raise WaitTimeout(task)
            response = self._send(calls.long_poll(task_id, wait=wait, etag=etag))
            if response.status_code != 304:
                task, etag = Task.model_validate_json(response.content), response.headers.get("etag")
        return task

    def result(self, task_id: TaskId) -> TaskResult:
        """A completed task's result; ``Conflict`` (``problem.task_status``) while it is not completed."""
        return self._model(calls.result(task_id), TaskResult)

    def cancel(self, task_id: TaskId) -> Task:
        """Cancel it: at once when it has not started, else its worker stops it (then poll or wait)."""
        return self._model(calls.cancel(task_id), Task)

    def list(
        self,
        *,
        status: str | None = None,
        specialist: str | None = None,
        priority: str | None = None,
        page_size: int | None = None,
        limit: int | None = None,
    ) -> Iterator[Task]:
        """Tasks, newest first, page after page (``page_size`` each); at most ``limit`` of them."""
        cursor: str | None = None
        seen = 0
        while True:
            call = calls.task_page(
                status=status, specialist=specialist, priority=priority, limit=page_size, cursor=cursor
            )
            page = self._model(call, TaskPage)
            for task in page.items:
                if limit is not None and seen >= limit:
                    return
                seen += 1
                yield task
            cursor = page.next_cursor
            if cursor is None or (limit is not None and seen >= limit):
                return

    def event_page(self, task_id: TaskId, *, after: int = 0, limit: int | None = None) -> EventPage:
        return self._model(calls.event_page(task_id, after=after, limit=limit), EventPage)

    def events(self, task_id: TaskId, *, after: int = 0) -> Iterator[TaskEvent]:
        """The task's events numbered above ``after``: the stored ones, then the live ones (Server-Sent
        Events) until the terminal event. A dropped connection is resumed with ``Last-Event-ID``: every
        event comes once, in order. Raises ``StreamBroken`` when the retry policy gives up."""
        cursor = EventCursor(after)
        failures, waited = 0, 0.0
        while not cursor.finished:
            progressed, ended_cleanly = False, False
            try:
                with self._http.stream(
                    "GET",
                    calls.events_path(task_id),
                    headers=cursor.headers(),
                    timeout=stream_timeout(self.timeout),
                ) as response:
                    if response.status_code != 200:
                        response.read()
                        self._refuse_stream(response, failures + 1, waited)
                    else:
                        parser = SseParser()
                        for chunk in response.iter_bytes():
                            for frame in parser.feed(chunk):
                                event = cursor.take(frame)
                                if event is not None:
                                    progressed = True
                                    yield event
                        ended_cleanly = True
                        cursor.stream_ended()
                        if cursor.finished:
                            return
            except httpx.TransportError:
                pass
            if ended_cleanly and not progressed:
                # The stream had nothing after our position: finished before it, or the API was stopping.
                yield from self._remaining_events(task_id, cursor)
                if cursor.finished:
                    return
            if progressed:
                failures, waited = 0, 0.0
            failures += 1
            delay = after_failure(self.retry, attempt=failures, waited=waited)
            if delay is None:
                raise StreamBroken(f"the event stream of task {task_id} kept failing", cursor.last_seq)
            time.sleep(delay)
            waited += delay

    def _remaining_events(self, task_id: TaskId, cursor: EventCursor) -> Iterator[TaskEvent]:
        task = self.get(task_id)
        while True:
            page = self.event_page(task_id, after=cursor.last_seq, limit=200)
            for item in page.items:
                event = cursor.take_event(item)
                if event is not None:
                    yield event
            if not page.items:
                break
        # Every event is read: one read before them saw the task finished, so none can follow.
        cursor.finished = task.terminal

    def _refuse_stream(self, response: httpx.Response, attempt: int, waited: float) -> None:
        """A stream answered with an error: return to retry it (429, 503), raise otherwise."""
        if self._delay_after(calls.Call("GET", ""), response, attempt, waited) is None:
            raise api_error(response)

    # -- the catalog and dead letters ------------------------------------------------------------

    def specialists(self) -> builtins.list[Specialist]:
        return self._model(calls.specialists(), SpecialistList).items

    def usage(
        self,
        *,
        start: datetime | str | None = None,
        end: datetime | str | None = None,
        group_by: str | None = None,
    ) -> UsageReport:
        """The tenant's LLM spend (tasks, tokens, USD) for tasks created in ``[start, end)`` (default: this
        UTC month so far), grouped by ``specialist``, ``model`` or ``day`` when asked."""
        return self._model(calls.usage(start=start, end=end, group_by=group_by), UsageReport)

    def dead_letters(
        self, *, specialist: str | None = None, reason: str | None = None, page_size: int | None = None
    ) -> Iterator[DeadLetter]:
        """Open dead letters, most recent first, page after page (admin keys only)."""
        cursor: str | None = None
        while True:
            call = calls.dead_letter_page(
                specialist=specialist, reason=reason, limit=page_size, cursor=cursor
            )
            page = self._model(call, DeadLetterPage)
            yield from page.items
            cursor = page.next_cursor
            if cursor is None:
                return

    def dead_letter(self, task_id: TaskId) -> DeadLetter:
        return self._model(calls.dead_letter(task_id), DeadLetter)

    def replay(self, task_id: TaskId, *, specialist: str | None = None, from_scratch: bool = False) -> Task:
        """Run a dead-lettered task again (on ``specialist`` when given); never retried by the client."""
        return self._model(calls.replay(task_id, specialist=specialist, from_scratch=from_scratch), Task)

    def discard(self, task_id: TaskId) -> None:
        """Close a dead letter without running its task (it stays dead_lettered)."""
        self._send(calls.discard(task_id))

    # -- groups ------------------------------------------------------------------------------------

    def submit_group(
        self,
        tasks: Sequence[Mapping[str, Any]],
        *,
        reduce: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> Group:
        """Submit tasks as one group (``[{"input": ..., "specialist"?: ..., "metadata"?: ...}]``), with an
        optional reduce task (``{"specialist"?: ..., "instructions"?: ...}``) run once they all finished."""
        return self._model(calls.submit_group(tasks, reduce=reduce, idempotency_key=idempotency_key), Group)

    def group(self, group_id: TaskId) -> Group:
        return self._model(calls.group(group_id), Group)

    def cancel_group(self, group_id: TaskId) -> Group:
        return self._model(calls.cancel_group(group_id), Group)

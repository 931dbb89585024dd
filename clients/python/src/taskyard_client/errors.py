"""What the SDK raises: every refusal of the API as an ``ApiError`` carrying its problem document, with one
subclass per status a caller may want to catch, plus the client-side failures (the API unreachable, a wait
that ran out, an event stream that could not be resumed)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import ValidationError

from taskyard_client.models import Problem

if TYPE_CHECKING:
    from taskyard_client.models import Task


class TaskyardError(Exception):
    """Anything the SDK raises."""


class ApiError(TaskyardError):
    """The API answered an error: ``problem`` is its RFC 9457 document (``problem.type`` is stable, branch
    on it; ``problem.detail`` explains this occurrence)."""

    def __init__(self, problem: Problem, headers: httpx.Headers | None = None) -> None:
        self.problem = problem
        self.status = problem.status
        self.headers = headers if headers is not None else httpx.Headers()
        text = problem.title or f"HTTP {problem.status}"
        if problem.detail:
            text = f"{text}: {problem.detail}"
        super().__init__(f"{problem.status} {text}")

    @property
    def retry_after(self) -> float | None:
        """``Retry-After`` in seconds, when the answer carried one in delta-seconds form."""
        try:
            return float(self.headers["retry-after"])
        except (KeyError, ValueError):
            return None


class BadRequest(ApiError):
    """400: a body the API could not read as JSON."""


class Unauthorized(ApiError):
    """401: no API key, or an unknown, malformed or revoked one."""


class Forbidden(ApiError):
    """403: the key's role may not do this (e.g. dead letters need ``admin``)."""


class NotFound(ApiError):
    """404: no such task (or another tenant's), no open dead letter, no such path."""


class Conflict(ApiError):
    """409: the task is not in a state that allows it (``problem.task_status`` says which it is in)."""


class PayloadTooLarge(ApiError):
    """413: the body is over the API's limit."""


class ValidationFailed(ApiError):
    """422: invalid fields (``problem.errors``), an unknown specialist, a reused idempotency key."""


class RateLimited(ApiError):
    """429: this tenant submits too fast; nothing was stored."""


class ServiceUnavailable(ApiError):
    """503: the broker or the database is down, or the queue is full."""


class ServerError(ApiError):
    """5xx other than 503: quote ``problem.request_id`` when reporting it."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: RateLimited,
    503: ServiceUnavailable,
}


class TransportError(TaskyardError):
    """The API could not be reached (or stopped answering), after the retries the policy allows."""


class WaitTimeout(TaskyardError):
    """``wait()`` ran out of time before the task finished; ``task`` is its last known state."""

    def __init__(self, task: Task) -> None:
        self.task = task
        super().__init__(f"task {task.id} is still {task.status}")


class StreamBroken(TaskyardError):
    """The event stream dropped and could not be resumed; ``last_event_id`` is where it stopped (resume with
    ``events(task_id, after=last_event_id)``)."""

    def __init__(self, message: str, last_event_id: int) -> None:
        self.last_event_id = last_event_id
        super().__init__(message)


def problem_of(response: httpx.Response) -> Problem:
    """The answer's problem document; a stand-in when it has none (a proxy's HTML error page, say)."""
    body: Any = None
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        pass
    if isinstance(body, dict):
        try:
            return Problem.model_validate({"status": response.status_code, **body})
        except ValidationError:
            pass
    detail = response.text[:200].strip() or None
    return Problem(status=response.status_code, title=response.reason_phrase, detail=detail)


def api_error(response: httpx.Response) -> ApiError:
    problem = problem_of(response)
    kind = _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else ApiError
    return kind(problem, response.headers)

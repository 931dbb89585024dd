"""RFC 9457 problem details: the one shape of every error the API answers (``application/problem+json``).

Each kind of problem has a stable type URI and a fixed title, so clients can branch on ``type`` and show
``title``; ``detail`` explains this occurrence. Extension members carry what a client needs to act: the
validation ``errors``, a task's ``task_status`` (a group's ``group_status``), the ``known_specialists``, the ``unavailable`` dependencies,
or the ``request_id`` to quote for an internal error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from taskyard_api.http.request_id import current_request_id
from taskyard_common.lifecycle import TaskStatus

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_BASE_URI = "https://taskyard.dev/problems/"


class FieldError(BaseModel):
    """One invalid part of a request: where (``loc``), what rule (``type``), and a readable ``msg``."""

    model_config = ConfigDict(extra="forbid")

    loc: list[str | int]
    msg: str
    type: str


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(default="about:blank", description="URI identifying the kind of problem")
    title: str = Field(description="Short summary of the kind of problem; the same for every occurrence")
    status: int = Field(ge=400, le=599, description="The HTTP status code")
    detail: str | None = Field(default=None, description="Explanation of this occurrence")
    instance: str | None = Field(default=None, description="The request path of this occurrence")
    errors: list[FieldError] | None = Field(default=None, description="Validation errors (422)")
    task_status: TaskStatus | None = Field(default=None, description="The task's current status (409, 503)")
    group_status: str | None = Field(default=None, description="The group's current status (409)")
    known_specialists: list[str] | None = Field(default=None, description="Valid specialist names")
    unavailable: list[str] | None = Field(default=None, description="Dependencies that are down (503)")
    request_id: str | None = Field(
        default=None, description="This request's id (also the X-Request-ID header): quote it when reporting"
    )


@dataclass(frozen=True)
class ProblemKind:
    slug: str
    title: str
    status: int

    @property
    def type(self) -> str:
        return PROBLEM_BASE_URI + self.slug

    def __call__(
        self, detail: str | None = None, *, instance: str | None = None, **extensions: Any
    ) -> Problem:
        return Problem(
            type=self.type,
            title=self.title,
            status=self.status,
            detail=detail,
            instance=instance,
            **extensions,
        )


VALIDATION_ERROR = ProblemKind("validation-error", "The request is not valid", 422)
UNKNOWN_SPECIALIST = ProblemKind("unknown-specialist", "Unknown specialist", 422)
NOT_FOUND = ProblemKind("not-found", "Not found", 404)
TASK_NOT_COMPLETED = ProblemKind("task-not-completed", "Task not completed", 409)
TASK_ALREADY_FINISHED = ProblemKind("task-already-finished", "Task already finished", 409)
TASK_NOT_FINISHED = ProblemKind("task-not-finished", "Task not finished", 409)
TASK_IN_WORKFLOW = ProblemKind("task-in-workflow", "Task still needed by its workflow", 409)
GROUP_ALREADY_FINISHED = ProblemKind("group-already-finished", "Group already finished", 409)
PAYLOAD_TOO_LARGE = ProblemKind("payload-too-large", "Request body too large", 413)
UNSUPPORTED_MEDIA_TYPE = ProblemKind("unsupported-media-type", "Unsupported media type", 415)
BROKER_UNAVAILABLE = ProblemKind("broker-unavailable", "Message broker unavailable", 503)
QUEUE_FULL = ProblemKind("queue-full", "Task queue full", 503)
DATABASE_UNAVAILABLE = ProblemKind("database-unavailable", "Database unavailable", 503)
NOT_READY = ProblemKind("not-ready", "Service not ready", 503)
UNAUTHORIZED = ProblemKind("unauthorized", "Authentication required", 401)
FORBIDDEN = ProblemKind("forbidden", "Not allowed for this API key's role", 403)
RATE_LIMITED = ProblemKind("rate-limited", "Too many submissions", 429)
READ_RATE_LIMITED = ProblemKind("read-rate-limited", "Too many reads", 429)
IDEMPOTENCY_KEY_REUSED = ProblemKind(
    "idempotency-key-reused", "Idempotency key reused for another request", 422
)
IDEMPOTENCY_KEY_IN_USE = ProblemKind("idempotency-key-in-use", "Idempotency key in use", 409)
INTERNAL_ERROR = ProblemKind("internal-error", "Internal server error", 500)


def generic_problem(status: int, detail: str | None = None, *, instance: str | None = None) -> Problem:
    """A status with no taskyard-specific meaning: ``about:blank`` and the status phrase (RFC 9457 §4.2.1)."""
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    return Problem(title=title, status=status, detail=detail, instance=instance)


class ProblemException(Exception):
    """Raised by handlers and dependencies to answer with ``problem``; the exception handler renders it."""

    def __init__(self, problem: Problem, headers: dict[str, str] | None = None) -> None:
        super().__init__(problem.detail or problem.title)
        self.problem = problem
        self.headers = headers


def problem_response(problem: Problem, headers: dict[str, str] | None = None) -> JSONResponse:
    # Every problem carries the request's id, so a client can quote it (the logs carry it too).
    if problem.request_id is None and (request_id := current_request_id()) is not None:
        problem = problem.model_copy(update={"request_id": request_id})
    return JSONResponse(
        problem.model_dump(mode="json", exclude_none=True),
        status_code=problem.status,
        headers=headers,
        media_type=PROBLEM_MEDIA_TYPE,
    )


_DESCRIPTIONS = {
    400: "The request could not be read",
    404: "Not found (an unknown or malformed task id)",
    402: "The tenant's monthly LLM budget is spent (budget-exhausted); nothing was stored",
    401: "No valid API key: send Authorization: Bearer <key> (WWW-Authenticate: Bearer)",
    403: "The API key's role may not do this",
    409: "The task has not completed yet (see task_status)",
    413: "The request body exceeds the size limit",
    415: "The request body is not JSON",
    429: "Too many submissions for this tenant; retry after Retry-After seconds (see RateLimit)",
    422: "The request is not valid (see errors)",
    500: "Internal error; the details are logged under request_id",
    503: "A dependency is unavailable; retry after Retry-After seconds",
}


_RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer"}}
}


_WWW_AUTHENTICATE = {
    "WWW-Authenticate": {"description": "The scheme to use: Bearer", "schema": {"type": "string"}}
}
# draft-ietf-httpapi-ratelimit-headers, structured-field form.
RATE_LIMIT_HEADERS = {
    "RateLimit-Policy": {
        "description": 'The submission quota: "submit";q=<burst>;w=<seconds to refill it>',
        "schema": {"type": "string"},
    },
    "RateLimit": {
        "description": '"submit";r=<submissions left>;t=<seconds until the bucket is full, or until the next '
        "one when none is left>",
        "schema": {"type": "string"},
    },
}


def problem_responses(
    *statuses: int, descriptions: Mapping[int, str] | None = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries for error statuses; ``http/openapi.py`` files them under problem+json.

    ``descriptions`` replaces the generic text where a status means something more specific on a route.
    """
    specific = descriptions or {}
    responses: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        description = specific.get(status, _DESCRIPTIONS[status])
        responses[status] = {"model": Problem, "description": description}
        if status == 503:
            responses[status]["headers"] = _RETRY_AFTER
        elif status == 401:
            responses[status]["headers"] = _WWW_AUTHENTICATE
        elif status == 429:
            responses[status]["headers"] = {**_RETRY_AFTER, **RATE_LIMIT_HEADERS}
    return responses

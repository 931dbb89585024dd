"""Every error becomes a problem document: exception handlers plus a last-resort middleware for the rest.

The last resort is a middleware rather than an ``Exception`` handler because Starlette re-raises after calling
such a handler; here the error is logged once, with a request id, and the client sees only that id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard_api.http.problems import (
    BROKER_UNAVAILABLE,
    DATABASE_UNAVAILABLE,
    INTERNAL_ERROR,
    NOT_FOUND,
    QUEUE_FULL,
    VALIDATION_ERROR,
    FieldError,
    ProblemException,
    generic_problem,
    problem_response,
)
from taskyard_api.http.request_id import current_request_id, new_request_id
from taskyard_common.errors import BrokerUnavailable, PublishRejected, StoreUnavailable, Unroutable
from taskyard_common.store import DRIVER_UNAVAILABLE

log = logging.getLogger(__name__)


def _field_errors(exc: RequestValidationError) -> list[FieldError]:
    # Only where, which rule and the message: never ``input`` (it echoes user data) nor ``ctx`` (may hold
    # exception objects that do not serialise).
    errors = []
    for error in exc.errors():
        loc = [part if isinstance(part, int) else str(part) for part in error.get("loc", ())]
        errors.append(FieldError(loc=loc, msg=str(error.get("msg", "")), type=str(error.get("type", ""))))
    return errors


# What FastAPI takes in its ``exception_handlers``: each handler typed for the exception it is registered for.
ExceptionHandlers = dict[int | type[Exception], Callable[[Request, Any], Coroutine[Any, Any, Response]]]


def exception_handlers(retry_after_seconds: int) -> ExceptionHandlers:
    retry_after = {"Retry-After": str(retry_after_seconds)}

    async def on_problem(request: Request, exc: ProblemException) -> Response:
        problem = exc.problem
        if problem.instance is None:
            problem = problem.model_copy(update={"instance": request.scope["path"]})
        return problem_response(problem, exc.headers)

    async def on_validation(request: Request, exc: RequestValidationError) -> Response:
        errors = _field_errors(exc)
        detail = f"{len(errors)} invalid field(s): see errors"
        return problem_response(VALIDATION_ERROR(detail, instance=request.scope["path"], errors=errors))

    async def on_http(request: Request, exc: StarletteHTTPException) -> Response:
        path = request.scope["path"]
        # Starlette's default detail is the status phrase, which the title already says.
        detail: str | None = exc.detail if isinstance(exc.detail, str) else None
        if detail == generic_problem(exc.status_code).title:
            detail = None
        if exc.status_code == 404:
            problem = NOT_FOUND(detail or "There is nothing at this path.", instance=path)
        else:
            problem = generic_problem(exc.status_code, detail, instance=path)
        # Keep what the exception asks for, e.g. ``Allow`` on a 405.
        return problem_response(problem, dict(exc.headers) if exc.headers else None)

    async def on_store_unavailable(request: Request, exc: Exception) -> Response:
        # ``StoreUnavailable`` from the store's query helpers; a driver error here is one that reached the
        # API without passing through them (a defect, but still an outage for the client, never a 500).
        reason = exc if isinstance(exc, StoreUnavailable) else type(exc).__name__
        log.warning("database unavailable for %s %s: %s", request.method, request.scope["path"], reason)
        detail = "The task database is unreachable; retry later."
        return problem_response(DATABASE_UNAVAILABLE(detail, instance=request.scope["path"]), retry_after)

    async def on_publish_error(
        request: Request, exc: BrokerUnavailable | PublishRejected | Unroutable
    ) -> Response:
        # Only submissions publish; they discarded their row before re-raising, hence "not stored".
        if isinstance(exc, PublishRejected):
            kind, detail = QUEUE_FULL, "The task queue is full; the task was not stored. Retry later."
        elif isinstance(exc, Unroutable):
            log.error("intake publish came back unroutable: %s", exc)
            kind, detail = BROKER_UNAVAILABLE, "The task queue is missing; the task was not stored."
        else:
            kind, detail = BROKER_UNAVAILABLE, "The message broker is unavailable; the task was not stored."
        return problem_response(kind(detail, instance=request.scope["path"]), retry_after)

    return {
        ProblemException: on_problem,
        RequestValidationError: on_validation,
        StarletteHTTPException: on_http,
        StoreUnavailable: on_store_unavailable,
        **dict.fromkeys(DRIVER_UNAVAILABLE, on_store_unavailable),
        BrokerUnavailable: on_publish_error,
        PublishRejected: on_publish_error,
        Unroutable: on_publish_error,
    }


class InternalErrorMiddleware:
    """Turns any unhandled exception into a 500 problem that says nothing but a request id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            # RequestIdMiddleware, outside this one, set the id and puts it in the X-Request-ID header.
            request_id = current_request_id() or new_request_id()
            log.exception(
                "unhandled error in %s %s (request_id=%s)", scope["method"], scope["path"], request_id
            )
            if started:
                # Half a response is already out: let the server abort the connection.
                raise
            problem = INTERNAL_ERROR(
                "An internal error occurred; quote the request_id when reporting it.",
                instance=scope["path"],
                request_id=request_id,
            )
            await problem_response(problem, {"X-Request-ID": request_id})(scope, receive, send)

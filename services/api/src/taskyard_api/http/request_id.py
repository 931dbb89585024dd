"""A request id on every answer and every log line: ``X-Request-ID``, echoed when the client sent a sane one.

The middleware is the outermost one, so every response carries the header, including the 413, 415 and 500
problems other middlewares produce. The id lives in a context variable for the length of the request:
``problems.problem_response`` copies it into each problem document (``request_id``), and
``RequestIdLogFilter`` stamps it on each log record, which ``taskyard_common.logging`` then prints.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable
from contextvars import ContextVar

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = "X-Request-ID"
_HEADER_KEY = HEADER.lower().encode("latin-1")
# What a client may choose: short, and nothing that could forge a log line or a header.
_SANE = re.compile(r"[A-Za-z0-9._:-]{1,128}")

_current: ContextVar[str | None] = ContextVar("taskyard_request_id", default=None)


def current_request_id() -> str | None:
    """The id of the request being served, or None outside one."""
    return _current.get()


def new_request_id() -> str:
    return uuid.uuid4().hex


def choose_request_id(sent: bytes | None) -> str:
    """The client's id when it is sane, a fresh one otherwise (never an error: the id only helps)."""
    if sent is not None:
        try:
            text = sent.decode("ascii")
        except UnicodeDecodeError:
            return new_request_id()
        if _SANE.fullmatch(text):
            return text
    return new_request_id()


def _sent_id(scope: Scope) -> bytes | None:
    headers: Iterable[tuple[bytes, bytes]] = scope["headers"]
    for name, value in headers:
        if name == _HEADER_KEY:
            return value
    return None


class RequestIdMiddleware:
    """Pure ASGI: sets the request id for the request's context and adds it to the response headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = choose_request_id(_sent_id(scope))
        token = _current.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers[HEADER] = request_id  # replaces any other value: there is one id per request
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)


class RequestIdLogFilter(logging.Filter):
    """Adds ``request_id`` to records logged while a request is served (attach it to handlers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = _current.get()
        if request_id is not None and not hasattr(record, "request_id"):
            record.request_id = request_id
        return True

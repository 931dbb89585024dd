"""Request count and latency per method, route template and status, as a pure ASGI middleware.

Labels stay bounded: the route is the matched template (``/v1/tasks/{task_id}``) or ``unmatched``, never the
raw path, and methods outside the standard set count as ``OTHER``.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard_common.metrics import HTTP_DURATION, HTTP_REQUESTS

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"


def route_label(scope: Scope) -> str:
    # The router records the route it chose in the scope (a 405 records the path's route too).
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED


class HttpMetricsMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        # If nothing is sent before an exception escapes, the server answers 500.
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            count, duration = _series(method, route_label(scope), status)
            count.inc()
            duration.observe(time.perf_counter() - start)


# The labelled children, looked up once per label set: ``labels()`` takes a lock and builds a tuple on every
# call, on the path of every request. The label sets are bounded (see above), so is this cache.
_SERIES: dict[tuple[str, str, int], tuple[Any, Any]] = {}


def _series(method: str, route: str, status: int) -> tuple[Any, Any]:
    key = (method, route, status)
    found = _SERIES.get(key)
    if found is None:
        found = _SERIES[key] = (
            HTTP_REQUESTS.labels(method, route, str(status)),
            HTTP_DURATION.labels(method, route),
        )
    return found

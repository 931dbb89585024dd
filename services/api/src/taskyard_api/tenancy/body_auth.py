"""Refuse a request with a body that carries no valid API key before the body is read.

FastAPI reads and parses a route's JSON body before it solves the route's dependencies, the authentication
among them: without this guard anyone could make the API parse up to ``TASKYARD_API_MAX_BODY_BYTES`` (1 MiB)
of JSON per request without a key. This pure ASGI middleware looks at the ``Authorization`` header of every
``/v1`` request with a body (POST, PUT, PATCH) first and answers 401 at once when the key is missing, malformed,
unknown or revoked. A valid key is handed on in the request's state, so the route's own dependency (which
also checks the role) does not look it up again. If the look-up itself fails (the database is away), the
request goes on as before and the route's dependency answers it (503).
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from taskyard_api.http.problems import UNAUTHORIZED, problem_response
from taskyard_api.resources import Resources

log = logging.getLogger(__name__)

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# The request-state key under which the key found here reaches ``auth.authorize``: (presented key, ApiKey).
PRE_AUTHENTICATED = "taskyard_pre_authenticated"
CHALLENGE = {"WWW-Authenticate": "Bearer"}
INVALID = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
MISSING_KEY = "Send an API key: Authorization: Bearer <key>."
INVALID_KEY = "The API key is not valid (unknown, malformed or revoked)."


def bearer_token(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None


class AuthBeforeBodyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _guarded(scope):
            await self.app(scope, receive, send)
            return
        resources: Resources | None = getattr(scope["app"].state, "resources", None)
        if resources is None or not resources.settings.api.auth_enabled:
            await self.app(scope, receive, send)
            return
        token = bearer_token(scope)
        if token is None:
            await problem_response(UNAUTHORIZED(MISSING_KEY), headers=CHALLENGE)(scope, receive, send)
            return
        try:
            key = await resources.keys.authenticate(token)
        except Exception:
            # The route's dependency looks the key up again and maps the failure (503 when the store is away).
            log.debug("could not authenticate before the body; the route will", exc_info=True)
            await self.app(scope, receive, send)
            return
        if key is None:
            await problem_response(UNAUTHORIZED(INVALID_KEY), headers=INVALID)(scope, receive, send)
            return
        scope.setdefault("state", {})[PRE_AUTHENTICATED] = (token, key)
        await self.app(scope, receive, send)


def _guarded(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] not in _BODY_METHODS:
        return False
    path: str = scope["path"]
    return path == "/v1" or path.startswith("/v1/")

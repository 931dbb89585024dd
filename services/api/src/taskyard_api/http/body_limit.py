"""A pure ASGI guard on request body size, answering 413 as a problem document.

It checks ``Content-Length`` and counts the bytes actually received (chunked bodies declare no length).
The check runs when the application first reads the body, i.e. after routing, so the 413 is counted under
the route it was meant for. Once refused, the application is told the client left, and whatever it tries
to answer is dropped: the 413 is already on the wire.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from taskyard_api.http.problems import PAYLOAD_TOO_LARGE, problem_response

_DISCONNECT: Message = {"type": "http.disconnect"}


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the server refuses these; nothing to measure here
    return None


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = _declared_length(scope)
        received = 0
        started = refused = False

        async def refuse() -> Message:
            nonlocal refused
            if not started:
                problem = PAYLOAD_TOO_LARGE(
                    f"The request body exceeds the limit of {limit} bytes.", instance=scope["path"]
                )
                # The rest of the body stays unread: the connection cannot be reused.
                await problem_response(problem, {"Connection": "close"})(scope, receive, send)
            refused = True
            return _DISCONNECT

        async def limited_receive() -> Message:
            nonlocal received
            if refused:
                return _DISCONNECT
            if declared is not None and declared > limit:
                return await refuse()
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    return await refuse()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)

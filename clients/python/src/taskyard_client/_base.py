"""What ``Client`` and ``AsyncClient`` share besides the requests: the endpoint, the headers, the retry
decisions and the long-poll arithmetic. Neither does any I/O here."""

from __future__ import annotations

import time
from importlib.metadata import PackageNotFoundError, version

import httpx

from taskyard_client import _calls as calls
from taskyard_client.config import resolve
from taskyard_client.retry import RetryPolicy, after_answer

# The shortest long-poll worth sending; less time than this left means the wait is over.
_MIN_WAIT = 0.1


def _version() -> str:
    try:
        return version("taskyard-client")
    except PackageNotFoundError:
        return "0"


def stream_timeout(timeout: float) -> httpx.Timeout:
    """An event stream's timeouts: connecting as any request, but reads may wait between events; the API
    sends a heartbeat every 15 s by default, so four times the request timeout (at least a minute) of
    silence means the connection is dead, and it is resumed."""
    return httpx.Timeout(timeout, read=max(60.0, 4 * timeout))


class ClientBase:
    def __init__(
        self,
        url: str | None,
        api_key: str | None,
        *,
        profile: str | None,
        timeout: float,
        retry: RetryPolicy | None,
    ) -> None:
        endpoint = resolve(url, api_key, profile=profile)
        self.url = endpoint.url
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        # The key goes in a header, never in a URL (URLs end up in logs).
        self.headers = {"User-Agent": f"taskyard-client/{_version()}", "Accept": "application/json"}
        if endpoint.api_key:
            self.headers["Authorization"] = f"Bearer {endpoint.api_key}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={self.url!r})"  # never the key

    def _timeout_for(self, call: calls.Call) -> float | httpx.Timeout:
        return self.timeout if call.timeout is None else max(self.timeout, call.timeout)

    def _delay_after(
        self, call: calls.Call, response: httpx.Response, attempt: int, waited: float
    ) -> float | None:
        if not call.retry:
            return None
        problem_type = None
        if response.status_code == 409:
            try:
                body = response.json()
            except ValueError:
                body = None
            problem_type = body.get("type") if isinstance(body, dict) else None
        return after_answer(
            self.retry,
            status=response.status_code,
            problem_type=problem_type if isinstance(problem_type, str) else None,
            retry_after=response.headers.get("retry-after"),
            attempt=attempt,
            waited=waited,
            conflict_retried=call.conflict_retried,
        )

    @staticmethod
    def _next_wait(deadline: float | None, poll: float) -> float | None:
        """The next long-poll's ``wait``, or None when the caller's deadline has come."""
        if deadline is None:
            return max(_MIN_WAIT, poll)
        left = deadline - time.monotonic()
        if left < _MIN_WAIT:
            return None
        return min(poll, left)

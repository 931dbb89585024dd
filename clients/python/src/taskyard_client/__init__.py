"""The taskyard API from Python: ``Client`` (synchronous) and ``AsyncClient`` (asyncio), the documents they
return (``taskyard_client.models``) and the errors they raise (``taskyard_client.errors``).

This package needs httpx and pydantic only; the ``taskyard`` command line (``taskyard_client.cli``) adds
typer and rich, and nothing here imports it.
"""

from taskyard_client.answer import AnswerText
from taskyard_client.async_client import AsyncClient
from taskyard_client.client import Client
from taskyard_client.errors import (
    ApiError,
    Conflict,
    Forbidden,
    NotFound,
    RateLimited,
    ServiceUnavailable,
    StreamBroken,
    TaskyardError,
    TransportError,
    Unauthorized,
    ValidationFailed,
    WaitTimeout,
)
from taskyard_client.models import (
    TERMINAL,
    DeadLetter,
    Group,
    Problem,
    Specialist,
    Task,
    TaskEvent,
    TaskResult,
    TaskStatus,
    UsageReport,
)
from taskyard_client.retry import RetryPolicy

__all__ = [
    "TERMINAL",
    "AnswerText",
    "ApiError",
    "AsyncClient",
    "Client",
    "Conflict",
    "DeadLetter",
    "Forbidden",
    "Group",
    "NotFound",
    "Problem",
    "RateLimited",
    "RetryPolicy",
    "ServiceUnavailable",
    "Specialist",
    "StreamBroken",
    "Task",
    "TaskEvent",
    "TaskResult",
    "TaskStatus",
    "TaskyardError",
    "TransportError",
    "Unauthorized",
    "UsageReport",
    "ValidationFailed",
    "WaitTimeout",
]

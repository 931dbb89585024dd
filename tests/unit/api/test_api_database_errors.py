"""A database outage is a ``503 database-unavailable`` with ``Retry-After``, never a ``500``: the store's
error mapping (``UNAVAILABLE``) for each driver error a PostgreSQL restart raises, and the API's handlers for
one that would reach a route without passing through the store's helpers (docs/resilience.md, row 4)."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from taskyard_api.http.errors import InternalErrorMiddleware, exception_handlers
from taskyard_api.http.problems import PROBLEM_MEDIA_TYPE
from taskyard_common.errors import StoreUnavailable
from taskyard_common.store._pg import PoolStore

# What a restart raises, by timing: a connection the server closed after the pool handed it out (asyncpg's
# protocol state error, seen in the chaos suite), the server's own termination notice (57P01, 57P02), a
# query cut in the middle, a connection refused or not yet accepted (57P03), a closed connection.
OUTAGE_ERRORS = [
    asyncpg.exceptions.InternalClientError("cannot switch to state 12; another operation (2) is in progress"),
    asyncpg.exceptions.AdminShutdownError("terminating connection due to administrator command"),
    asyncpg.exceptions.CrashShutdownError(
        "terminating connection because of crash of another server process"
    ),
    asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
    asyncpg.exceptions.CannotConnectNowError("the database system is shutting down"),
    asyncpg.exceptions.InterfaceError("connection is closed"),
    ConnectionRefusedError(111, "Connection refused"),
    TimeoutError(),
]


class FailingConnection:
    def __init__(self, error: Exception) -> None:
        self.error = error

    async def fetchrow(self, *args: Any) -> None:
        raise self.error

    async def fetch(self, *args: Any) -> None:
        raise self.error


class FakePool:
    def __init__(self, error: Exception) -> None:
        self.conn = FailingConnection(error)

    async def acquire(self) -> FailingConnection:
        return self.conn

    async def release(self, conn: FailingConnection) -> None:
        pass


@pytest.mark.parametrize("error", OUTAGE_ERRORS, ids=lambda e: type(e).__name__)
async def test_the_store_turns_every_outage_error_into_store_unavailable(error: Exception) -> None:
    store = PoolStore(FakePool(error))  # type: ignore[arg-type]
    with pytest.raises(StoreUnavailable, match=type(error).__name__):
        await store._fetchrow("SELECT 1")
    with pytest.raises(StoreUnavailable):
        await store._fetch("SELECT 1")


async def test_a_query_error_is_not_an_outage() -> None:
    store = PoolStore(FakePool(asyncpg.exceptions.UniqueViolationError("duplicate key")))  # type: ignore[arg-type]
    with pytest.raises(asyncpg.exceptions.UniqueViolationError):
        await store._fetchrow("INSERT ...")


def app_raising(error: Exception) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI):  # type: ignore[no-untyped-def]
        yield

    app = FastAPI(exception_handlers=exception_handlers(7), lifespan=lifespan)
    app.add_middleware(InternalErrorMiddleware)

    @app.get("/v1/tasks/x")
    async def read() -> None:
        raise error

    return app


@pytest.mark.parametrize(
    "error",
    [e for e in OUTAGE_ERRORS if not isinstance(e, OSError | TimeoutError)],
    ids=lambda e: type(e).__name__,
)
async def test_a_driver_error_that_reaches_a_route_is_a_503_with_retry_after(error: Exception) -> None:
    transport = httpx.ASGITransport(app=app_raising(error))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        response = await client.get("/v1/tasks/x")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "7"
    assert response.headers["content-type"] == PROBLEM_MEDIA_TYPE
    assert response.json()["type"] == "https://taskyard.dev/problems/database-unavailable"
    # Nothing of the driver's text reaches the client.
    assert type(error).__name__ not in response.text and str(error) not in response.text

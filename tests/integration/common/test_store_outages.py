"""PostgreSQL ending a session under the store (what ``pg_ctl stop -m fast`` does to every backend): the
store answers ``StoreUnavailable``, never a driver error, and the pool carries on with new connections.

``pg_terminate_backend`` sends a backend the same SIGTERM a fast shutdown does (57P01, "terminating
connection due to administrator command"); only the test's own connection is terminated, so the shared
server is left alone."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from taskyard_common.errors import StoreUnavailable

pytestmark = pytest.mark.integration


async def terminate(database_url: str, pid: int) -> None:
    admin = await asyncpg.connect(database_url)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


async def test_a_connection_closed_by_the_server_after_it_was_handed_out_is_store_unavailable(
    store, database_url, monkeypatch
):
    # The pool handed a connection out, then the server closed it, then the query ran. By timing, asyncpg
    # raises ConnectionDoesNotExistError, InterfaceError or InternalClientError ("cannot switch to state"),
    # the last of which escaped as a 500 during the chaos suite's PostgreSQL restart; the unit tests in
    # tests/unit/api/test_api_database_errors.py hold each class, this one the real sequence.
    acquire = store._acquire

    async def acquire_then_terminate():
        conn = await acquire()
        await terminate(database_url, conn.get_server_pid())
        return conn

    monkeypatch.setattr(store, "_acquire", acquire_then_terminate)
    with pytest.raises(StoreUnavailable):
        await store._fetchrow("SELECT 1")
    monkeypatch.setattr(store, "_acquire", acquire)
    await store.ping()  # a new connection in its place


async def test_a_query_in_flight_when_the_server_ends_its_session_is_store_unavailable(store, database_url):
    marker = f"-- {uuid.uuid4()}"
    query = asyncio.create_task(store._fetchrow(f"SELECT pg_sleep(5) {marker}"))
    admin = await asyncpg.connect(database_url)
    try:
        for _ in range(100):
            pid = await admin.fetchval(
                "SELECT pid FROM pg_stat_activity WHERE query = $1", f"SELECT pg_sleep(5) {marker}"
            )
            if pid is not None:
                break
            await asyncio.sleep(0.05)
        assert pid is not None, "the query never started"
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()
    with pytest.raises(StoreUnavailable):
        await query
    await store.ping()

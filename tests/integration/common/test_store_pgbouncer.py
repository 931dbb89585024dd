"""The store through a real PgBouncer in transaction mode (``TASKYARD_DB_POOLED``), when a ``pgbouncer``
binary is installed (skipped otherwise; Debian 12's package is 1.18, without prepared-statement tracking, so
the store runs with ``statement_cache_size=0``, what the chart sets when ``max_prepared_statements`` is 0).

Every client of the PgBouncer database shares a handful of server connections, so a task's transitions and
its concurrent siblings go through whichever server connection each transaction gets. The schema comes from
the server connections (here PgBouncer's ``connect_query``; in the chart the role's search path), never from
the client's startup packet, which PgBouncer would refuse.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
from pydantic import SecretStr

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store import NewTask, PostgresTaskStore, StartOutcome
from taskyard_common.store.connecting import WrongSchema
from taskyard_devkit.ports import free_port

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("pgbouncer") is None, reason="no pgbouncer binary installed"),
]

DECISION = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.4)


def _config(directory: Path, port: int, database_url: str, schema: str) -> Path:
    server = urlsplit(database_url)
    (directory / "users.txt").write_text(f'"{server.username}" ""\n')
    config = directory / "pgbouncer.ini"
    config.write_text(
        "[databases]\n"
        f"pooled = host={server.hostname} port={server.port or 5432} dbname={server.path.lstrip('/')}"
        f" user={server.username} password={server.password or ''}"
        f" connect_query='SET search_path TO \"{schema}\"'\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {directory / 'users.txt'}\n"
        "pool_mode = transaction\ndefault_pool_size = 3\nmax_client_conn = 100\n"
        f"logfile = {directory / 'pgbouncer.log'}\npidfile = {directory / 'pgbouncer.pid'}\n"
    )
    return config


@pytest.fixture
def pgbouncer(database_url: str, db_settings: DbSettings) -> Iterator[str]:
    """A PgBouncer in transaction mode in front of the test's schema; yields its URL."""
    directory = Path(tempfile.mkdtemp(prefix="taskyard-pgbouncer-"))
    directory.chmod(0o777)  # PgBouncer refuses to run as root: it runs as nobody
    port = free_port()
    config = _config(directory, port, database_url, db_settings.db_schema)
    config.chmod(0o644)
    argv = ["pgbouncer", str(config)]
    if os.geteuid() == 0:
        argv[1:1] = ["-u", "nobody"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (directory / "pgbouncer.pid").exists():
            assert proc.poll() is None, (directory / "pgbouncer.log").read_text()
            assert time.monotonic() < deadline, "PgBouncer did not start"
            time.sleep(0.05)
        user = urlsplit(database_url).username
        yield f"postgresql://{user}@127.0.0.1:{port}/pooled"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def pooled_store(pgbouncer: str, db_settings: DbSettings) -> AsyncIterator[PostgresTaskStore]:
    settings = db_settings.model_copy(
        update={"url": SecretStr(pgbouncer), "pooled": True, "statement_cache_size": 0, "pool_max_size": 8}
    )
    store = await PostgresTaskStore.open(settings)
    try:
        yield store
    finally:
        await store.close()


async def test_a_search_path_in_the_startup_packet_is_refused(pgbouncer: str, db_settings: DbSettings):
    # Why TASKYARD_DB_POOLED exists: a direct-mode store cannot even connect through PgBouncer.
    with pytest.raises(asyncpg.PostgresError, match="search_path"):
        await asyncpg.connect(pgbouncer, server_settings={"search_path": db_settings.db_schema})


async def test_the_lifecycle_through_transaction_mode(pooled_store: PostgresTaskStore):
    async def one(n: int) -> None:
        task = NewTask(id=uuid.uuid4(), input=f"task {n}", metadata={"n": str(n)})
        await pooled_store.create(task)
        assert await pooled_store.route(task.id, DECISION)
        started = await pooled_store.start(task.id, owner=f"w{n}", lease_seconds=30, attempt=1)
        assert started.outcome is StartOutcome.STARTED
        assert await pooled_store.complete(task.id, {"output": f"done {n}"}, Usage(), owner=f"w{n}")
        done = await pooled_store.get(task.id)
        assert (
            done is not None
            and done.status is TaskStatus.COMPLETED
            and done.result == {"output": f"done {n}"}
        )

    # 30 tasks at once over 8 client connections and 3 server connections.
    await asyncio.gather(*(one(n) for n in range(30)))
    page = await pooled_store.list(status=TaskStatus.COMPLETED, specialist=None, limit=50, after=None)
    assert len(page) == 30


async def test_a_pooled_store_checks_the_schema_the_server_connections_use(
    pgbouncer: str, db_settings: DbSettings
):
    other = db_settings.model_copy(
        update={"url": SecretStr(pgbouncer), "pooled": True, "db_schema": "not_this_one"}
    )
    with pytest.raises(WrongSchema):
        await PostgresTaskStore.open(other)

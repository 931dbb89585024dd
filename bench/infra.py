"""Where the benchmark finds RabbitMQ and PostgreSQL, and each scenario's own namespace in them.

Services are started with the dev launcher (``taskyard_devkit``: real processes from the console scripts
users run), so tests and benchmarks start taskyard the same way.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import aio_pika
import asyncpg

from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store.migrate import migrate
from taskyard_common.topology import Topology

ROOT = Path(__file__).resolve().parent.parent
LOCAL_ENV = ROOT / ".taskyard" / "local.env"
DEFAULT_AMQP_URL = "amqp://guest:guest@127.0.0.1:5672/"

T = TypeVar("T")


def _local_env() -> dict[str, str]:
    """``make up``'s bootstrap keeps the local database URL here (KEY=VALUE lines)."""
    if not LOCAL_ENV.exists():
        return {}
    pairs = {}
    for line in LOCAL_ENV.read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = line.split("=", 1)
            pairs[key.strip()] = value.strip().strip("'\"")
    return pairs


def service_urls() -> tuple[str, str]:
    """(AMQP URL, PostgreSQL URL): the environment as the tests read it, then ``.taskyard/local.env``."""
    local = _local_env()

    def pick(*names: str) -> str | None:
        for name in names:
            if os.environ.get(name):
                return os.environ[name]
        return next((local[n] for n in names if local.get(n)), None)

    amqp = pick("AMQP_URL", "TASKYARD_AMQP_URL") or DEFAULT_AMQP_URL
    db = pick("DATABASE_URL", "TASKYARD_DB_URL")
    if not db:
        raise SystemExit(
            "no PostgreSQL URL: set DATABASE_URL (or run `make bootstrap` for .taskyard/local.env)"
        )
    return amqp, db


@dataclass
class Context:
    amqp_url: str
    db_url: str
    quick: bool  # also true in a smoke run: a scenario without smoke sizes uses its quick ones
    work_dir: Path  # logs and generated catalogs of this run
    run_id: str = ""
    # The test suite's run (``--smoke``): tiny counts, a few seconds per scenario, figures meaningless.
    smoke: bool = False
    # ``--reuse-store SCHEMA``: the large-store scenario's full store, filled earlier and kept.
    reuse_store: str | None = None
    # ``--remove-from-reused-store``: the retention phase runs on the reused store as well (it shrinks it).
    remove_from_reused_store: bool = False
    # ``--poison-model-seconds``: each model call of the poison scenario's healthy tasks (chaos row 5).
    poison_model_seconds: float = 1.0

    def __post_init__(self) -> None:
        self.run_id = self.run_id or uuid.uuid4().hex[:8]

    def pick(self, full: T, quick: T, smoke: T) -> T:
        """The size (count, limit) for this run's mode."""
        return smoke if self.smoke else quick if self.quick else full

    def prefix(self, scenario: str) -> str:
        return f"bench{self.run_id}.{scenario}"

    def schema(self, scenario: str) -> str:
        return f"bench{self.run_id}_{scenario}"

    def log_dir(self, scenario: str) -> Path:
        path = self.work_dir / scenario
        path.mkdir(parents=True, exist_ok=True)
        return path


@asynccontextmanager
async def db_schema(ctx: Context, scenario: str, *, migrated: bool = True) -> AsyncIterator[str]:
    """A fresh schema (taskyard's tables when ``migrated``), dropped afterwards."""
    schema = ctx.schema(scenario)
    conn = await asyncpg.connect(ctx.db_url)
    try:
        if migrated:
            await migrate(conn, schema)
        else:
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        await conn.close()
    try:
        yield schema
    finally:
        conn = await asyncpg.connect(ctx.db_url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


async def delete_amqp(url: str, queues: Iterable[str], exchanges: Iterable[str] = ()) -> None:
    connection = await aio_pika.connect(url, client_properties={"connection_name": "bench cleanup"})
    try:
        channel = await connection.channel()
        for queue in queues:
            # Queue.delete()'s default flags fail on quorum queues (540): use the channel's method.
            await channel.queue_delete(queue)
        for exchange in exchanges:
            await channel.exchange_delete(exchange)
    finally:
        await connection.close()


@asynccontextmanager
async def taskyard_namespace(
    ctx: Context, scenario: str, specialists: list[str]
) -> AsyncIterator[tuple[AmqpSettings, DbSettings]]:
    """Settings for one scenario's own queue prefix and migrated schema; both removed afterwards."""
    amqp = AmqpSettings(url=ctx.amqp_url, prefix=ctx.prefix(scenario), delivery_limit=5, max_length=100_000)
    async with db_schema(ctx, scenario) as schema:
        try:
            yield amqp, DbSettings(url=ctx.db_url, db_schema=schema)
        finally:
            topology = Topology(amqp.prefix)
            await delete_amqp(
                ctx.amqp_url, topology.all_queue_names(specialists), topology.all_exchange_names()
            )

"""Fixtures shared by every suite: real broker and database, one queue prefix and one schema per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aio_pika
import asyncpg
import pytest

from taskyard_common.catalog import Catalog, load_catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.migrate import migrate
from taskyard_common.topology import Topology
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm, start_devllm
from taskyard_devkit.readiness import wait_http_ok_sync
from tests.support.infra import postgres_container, rabbitmq_container, service_url

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def catalog_path() -> Path:
    return ROOT / "specialists.yaml"


@pytest.fixture(scope="session")
def catalog(catalog_path: Path) -> Catalog:
    return load_catalog(catalog_path)


@pytest.fixture(scope="session")
def amqp_url() -> Iterator[str]:
    with service_url(("AMQP_URL", "TASKYARD_AMQP_URL"), "RabbitMQ (AMQP_URL)", rabbitmq_container) as url:
        yield url


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    with service_url(
        ("DATABASE_URL", "TASKYARD_DB_URL"), "PostgreSQL (DATABASE_URL)", postgres_container
    ) as url:
        yield url


@pytest.fixture
def test_id(request: pytest.FixtureRequest) -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def amqp_settings(amqp_url: str, test_id: str, catalog: Catalog) -> AsyncIterator[AmqpSettings]:
    """Settings with this test's own prefix; every queue under it is deleted afterwards."""
    settings = AmqpSettings(url=amqp_url, prefix=f"{test_id}.taskyard", delivery_limit=3, max_length=1000)
    yield settings
    topology = Topology(settings.prefix)
    connection = await aio_pika.connect(amqp_url, client_properties={"connection_name": f"cleanup {test_id}"})
    try:
        channel = await connection.channel()
        for queue in topology.all_queue_names(catalog.names):
            # Queue.delete()'s default flags fail on quorum queues (540): use the channel's method.
            await channel.queue_delete(queue)
        for exchange in topology.all_exchange_names():
            await channel.exchange_delete(exchange)
    finally:
        await connection.close()


@pytest.fixture
async def db_settings(database_url: str, test_id: str) -> AsyncIterator[DbSettings]:
    """A migrated schema of this test's own, dropped afterwards."""
    settings = DbSettings(url=database_url, db_schema=f"{test_id}_tasks", pool_max_size=5)
    conn = await asyncpg.connect(database_url)
    try:
        await migrate(conn, settings.db_schema)
    finally:
        await conn.close()
    yield settings
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.db_schema}" CASCADE')
    finally:
        await conn.close()


@pytest.fixture
async def store(db_settings: DbSettings) -> AsyncIterator[PostgresTaskStore]:
    task_store = await PostgresTaskStore.open(db_settings)
    try:
        yield task_store
    finally:
        await task_store.close()


@pytest.fixture(scope="session")
def service_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("service-logs")


@pytest.fixture(scope="session")
def devllm(service_logs: Path) -> Iterator[DevLlm]:
    """One development model server for the session; tests isolate themselves by model name."""
    service, llm = start_devllm(service_logs)
    try:
        wait_http_ok_sync(llm.health_url, service)
        yield llm
    finally:
        service.stop()


@pytest.fixture
async def cluster(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path, devllm: DevLlm, tmp_path: Path
) -> AsyncIterator[Cluster]:
    """An empty cluster of real service processes: each test starts what it needs; everything is stopped
    (SIGTERM) afterwards and must exit cleanly."""
    cluster = Cluster(amqp_settings, db_settings, catalog_path, devllm, tmp_path)
    try:
        yield cluster
    finally:
        unclean = cluster.stop_all()
        # Captured output is shown only when the test fails: then the services' logs say why.
        print(cluster.logs())
        assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"

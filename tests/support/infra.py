"""Where the tests find RabbitMQ and PostgreSQL.

``AMQP_URL`` / ``DATABASE_URL`` when set; otherwise testcontainers when a Docker engine answers; otherwise the
test is skipped, except under ``CI=true`` where a missing service is a failure, never a silent skip.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest


def _docker_available() -> bool:
    try:
        import docker  # testcontainers' dependency

        docker.from_env(timeout=3).ping()
    except Exception:
        return False
    return True


def _unavailable(what: str) -> None:
    message = f"{what} is not configured and no Docker engine is available to start one"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{message} (CI=true: refusing to skip)")
    pytest.skip(message)


@contextmanager
def service_url(
    env_names: tuple[str, ...], what: str, container: Callable[[], Iterator[str]]
) -> Iterator[str]:
    for name in env_names:
        if os.environ.get(name):
            yield os.environ[name]
            return
    if not _docker_available():
        _unavailable(what)
    yield from container()


def rabbitmq_container() -> Iterator[str]:
    from testcontainers.rabbitmq import RabbitMqContainer

    with RabbitMqContainer("rabbitmq:4.1-management") as rabbit:
        params = rabbit.get_connection_params()
        yield f"amqp://guest:guest@{params.host}:{params.port}/"


def postgres_container() -> Iterator[str]:
    from testcontainers.postgres import PostgresContainer

    with PostgresContainer("postgres:16", driver=None) as pg:
        yield pg.get_connection_url()

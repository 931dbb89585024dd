"""The environment a service process needs to join one queue prefix and one database schema.

Tests and benchmark scenarios each get a prefix and a schema of their own so they can share one broker and
one database; every process they start must be told both, with the same queue arguments.
"""

from __future__ import annotations

from pathlib import Path

from taskyard_common.settings import AmqpSettings, DbSettings


def service_env(amqp: AmqpSettings, db: DbSettings, catalog_path: Path | None = None) -> dict[str, str]:
    env = {
        "TASKYARD_AMQP_URL": amqp.url.get_secret_value(),
        "TASKYARD_AMQP_PREFIX": amqp.prefix,
        # The namespace's queue arguments: declaring with others would be refused (406).
        "TASKYARD_AMQP_DELIVERY_LIMIT": str(amqp.delivery_limit),
        "TASKYARD_AMQP_MAX_LENGTH": str(amqp.max_length),
        "TASKYARD_DB_URL": db.url.get_secret_value(),
        "TASKYARD_DB_SCHEMA": db.db_schema,
    }
    if catalog_path is not None:
        env["TASKYARD_CATALOG_PATH"] = str(catalog_path)
    return env

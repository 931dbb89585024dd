"""Typed settings, one small class per concern, each with its own environment prefix.

Nothing here reads the environment at import time: a service builds the classes it needs once, in its
``get_settings()``, and passes them down. The environment names are the contract with the Helm chart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def _config(prefix: str) -> SettingsConfigDict:
    # populate_by_name lets code pass fields by name (``AmqpSettings(url=...)``). A validation alias is also
    # an environment variable name, so never list a bare field name there: ``URL`` or ``API_KEY`` set for
    # another program would silently configure taskyard.
    return SettingsConfigDict(env_prefix=prefix, extra="ignore", populate_by_name=True)


class AmqpSettings(BaseSettings):
    """RabbitMQ connection and topology tunables (``TASKYARD_AMQP_*``; ``AMQP_URL`` also accepted)."""

    model_config = _config("TASKYARD_AMQP_")

    # No credentials in the default: aio-pika falls back to the broker's own local-only guest account.
    url: SecretStr = Field(
        default=SecretStr("amqp://127.0.0.1:5672/"),
        validation_alias=AliasChoices("TASKYARD_AMQP_URL", "AMQP_URL"),
    )
    prefix: str = Field(default="taskyard", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
    delivery_limit: int = Field(default=5, ge=1, le=1000)
    max_length: int = Field(default=100_000, ge=1)
    publish_timeout_seconds: float = Field(default=5.0, gt=0)
    # The least time between two new channels a publisher opens after refused or unconfirmed publishes.
    channel_renew_seconds: float = Field(default=5.0, gt=0)
    connect_timeout_seconds: float = Field(default=5.0, gt=0)
    # Declaring the whole topology (dozens of quorum queues) may be slow on a busy broker, but never endless.
    declare_timeout_seconds: float = Field(default=60.0, gt=0)
    # Seconds a client is told to wait before retrying when the broker refuses or is unreachable.
    retry_after_seconds: int = Field(default=5, ge=1)


class DbSettings(BaseSettings):
    """PostgreSQL task store (``TASKYARD_DB_*``; ``DATABASE_URL`` also accepted)."""

    model_config = _config("TASKYARD_DB_")

    url: SecretStr = Field(
        default=SecretStr("postgresql://127.0.0.1:5432/taskyard"),
        validation_alias=AliasChoices("TASKYARD_DB_URL", "DATABASE_URL"),
    )
    # Every table lives in this schema, so tests (and several installs) can share one database.
    db_schema: str = Field(
        default="taskyard",
        pattern=r"^[a-z_][a-z0-9_]{0,62}$",
        validation_alias=AliasChoices("TASKYARD_DB_SCHEMA"),
    )
    pool_min_size: int = Field(default=1, ge=0)
    pool_max_size: int = Field(default=10, ge=1)
    command_timeout_seconds: float = Field(default=10.0, gt=0)
    # Connections go through PgBouncer in transaction mode: PgBouncer refuses a search_path in the startup
    # packet, so none is sent and the schema must be the role's default (a schema named after the role,
    # found through "$user"): checked when a pool opens. Migrations connect to PostgreSQL directly.
    pooled: bool = False
    # asyncpg's prepared-statement cache per connection. Behind PgBouncer >= 1.21 with
    # max_prepared_statements > 0 the cache works as it does directly; behind an older PgBouncer (or one
    # with max_prepared_statements = 0) it must be 0.
    statement_cache_size: int = Field(default=100, ge=0)


class LlmSettings(BaseSettings):
    """The OpenAI-compatible endpoint (``TASKYARD_LLM_*``, or the ``openai`` client's own variables)."""

    model_config = _config("TASKYARD_LLM_")

    base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("TASKYARD_LLM_BASE_URL", "OPENAI_BASE_URL")
    )
    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("TASKYARD_LLM_API_KEY", "OPENAI_API_KEY")
    )
    model: str = "gpt-4o-mini"
    timeout_seconds: float = Field(default=60.0, gt=0)
    # The routing call is small and on the intake hot path: it gets its own, shorter limit.
    routing_timeout_seconds: float = Field(default=20.0, gt=0)

    @property
    def enabled(self) -> bool:
        return bool(self.base_url) or self.api_key is not None


class CatalogSettings(BaseSettings):
    """Where the specialist catalog comes from (``TASKYARD_CATALOG_*``); every service follows its changes
    without a restart (see ``taskyard_common.catalog_sources``)."""

    model_config = _config("TASKYARD_CATALOG_")

    # file: the YAML file at ``path``, read again when its content changes (polled) or on SIGHUP.
    # kubernetes: the Specialist resources of ``kubernetes_namespace``, listed and watched.
    # database: the specialists stored in PostgreSQL (``PUT/DELETE /v1/specialists/{name}``), seeded from
    # the file at ``path`` when the store has never held a catalog.
    source: Literal["file", "kubernetes", "database"] = "file"
    path: Path = Path("specialists.yaml")
    # How often the file's content or the database's catalog version is compared with the last one read.
    poll_seconds: float = Field(default=1.0, gt=0, le=300)
    # Where the rules router sends what matches nothing: required with the kubernetes source (resources
    # have no catalog-wide field); with the database source it replaces the seeded file's fallback.
    fallback: str | None = None
    # The API server: default, the in-cluster address (KUBERNETES_SERVICE_HOST/PORT) with the pod's
    # service account token and CA.
    kubernetes_url: str | None = None
    kubernetes_namespace: str | None = None
    kubernetes_token_path: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
    kubernetes_ca_path: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")


class HealthSettings(BaseSettings):
    """Health and metrics port of the non-HTTP services (``TASKYARD_HEALTH_*``); port 0 disables it."""

    model_config = _config("TASKYARD_HEALTH_")

    host: str = "127.0.0.1"
    port: int = Field(default=9000, ge=0, le=65535)


class LogSettings(BaseSettings):
    """Logging (``TASKYARD_LOG_*``)."""

    model_config = _config("TASKYARD_LOG_")

    level: str = "INFO"
    json_format: bool = Field(default=False, validation_alias=AliasChoices("TASKYARD_LOG_JSON"))

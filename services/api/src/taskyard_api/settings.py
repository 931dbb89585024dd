"""The API's settings: its own ``TASKYARD_API_*`` class, composed with the shared ones.

Nothing here reads the environment at import time; ``get_settings()`` builds everything once, at start.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from taskyard_common.settings import AmqpSettings, CatalogSettings, DbSettings, LogSettings
from taskyard_common.webhooks import WebhookSettings

# The hard upper bound of a page, also published in the OpenAPI document (``limit <= 200``).
PAGE_SIZE_CEILING = 200


class ApiSettings(BaseSettings):
    """HTTP server and API tunables (``TASKYARD_API_*``)."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_API_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    # Serve /metrics on a port of its own (same host) and answer 404 for it on ``port``: then an Ingress
    # in front of ``port`` cannot expose the metrics. None: /metrics on ``port`` (local development).
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # Request bodies above this are refused with 413 before they reach a handler.
    max_body_bytes: int = Field(default=1024 * 1024, ge=1)
    # A task's ``input`` above this (its compact JSON encoding, in UTF-8 bytes) is refused with 422: it is
    # stored, carried in every message of the task and read by the router's LLM.
    max_input_bytes: int = Field(default=256 * 1024, ge=1)
    # How often the sweeper looks for tasks committed but never announced, and how old they must be.
    sweeper_interval_seconds: float = Field(default=10.0, gt=0)
    sweeper_grace_seconds: float = Field(default=30.0, gt=0)
    # A confirmed submission's ``published_at`` is written behind, in batches, within this many seconds
    # (see submission/published.py); far below the sweeper's grace, so the sweeper never overtakes a live process.
    published_flush_seconds: float = Field(default=0.05, gt=0, le=5)
    default_page_size: int = Field(default=50, ge=1, le=PAGE_SIZE_CEILING)
    max_page_size: int = Field(default=PAGE_SIZE_CEILING, ge=1, le=PAGE_SIZE_CEILING)
    # A list page's items stop at this many bytes of JSON too (at least one item): the page says it was cut
    # (truncated) and its next_cursor goes on from there.
    max_page_bytes: int = Field(default=1024 * 1024, ge=1024)
    # Cap of the exponential backoff between RabbitMQ connection attempts before the first success
    # (afterwards aio-pika's robust connection reconnects on its own).
    broker_retry_max_seconds: float = Field(default=30.0, gt=0)
    # /readyz must answer quickly even when the database hangs.
    readiness_timeout_seconds: float = Field(default=2.0, gt=0)
    # Bearer API keys on every /v1 route. Off: every request is tenant "default" with the admin role (for
    # local development only; the API logs a warning at start).
    auth_enabled: bool = True
    # How long an API process trusts a key it has looked up: a revoked key keeps working on it for at most
    # this long. 0: look every request's key up (a revocation applies from the very next request).
    auth_cache_seconds: float = Field(default=5.0, ge=0, le=300)
    # How long an Idempotency-Key of POST /v1/tasks is remembered; the sweeper deletes older ones.
    idempotency_retention_seconds: float = Field(default=86400.0, gt=0)
    # Submissions per tenant, shared by every replica (a token bucket in PostgreSQL); either 0 disables it.
    rate_limit_per_second: float = Field(default=50.0, ge=0, allow_inf_nan=False)
    rate_limit_burst: int = Field(default=100, ge=0)
    # Reads (every GET under /v1) per tenant and API process (tenancy/read_limit.py); either 0 disables it.
    read_rate_limit_per_second: float = Field(default=100.0, ge=0, allow_inf_nan=False)
    read_rate_limit_burst: int = Field(default=200, ge=0)
    # Event streams and long-polls wake on RabbitMQ wake-ups; besides, the watched tasks are read this often
    # (one query for all of them), so a lost wake-up only delays.
    watch_poll_seconds: float = Field(default=2.0, gt=0, le=60)
    # An idle event stream sends a comment line this often, so proxies keep it open and clients see it alive.
    sse_heartbeat_seconds: float = Field(default=15.0, gt=0, le=300)

    @property
    def rate_limited(self) -> bool:
        return self.rate_limit_per_second > 0 and self.rate_limit_burst > 0

    @model_validator(mode="after")
    def _default_page_fits(self) -> ApiSettings:
        if self.default_page_size > self.max_page_size:
            raise ValueError("TASKYARD_API_DEFAULT_PAGE_SIZE must not exceed TASKYARD_API_MAX_PAGE_SIZE")
        return self


class ServiceSettings(BaseModel):
    """Everything the API process needs, built once and passed down."""

    model_config = ConfigDict(frozen=True)

    amqp: AmqpSettings
    db: DbSettings
    catalog: CatalogSettings
    log: LogSettings
    api: ApiSettings
    # The address rules of a submission's webhook URL (TASKYARD_WEBHOOK_*, shared with the dispatcher).
    webhook: WebhookSettings

    @model_validator(mode="after")
    def _grace_outlives_a_publish(self) -> ServiceSettings:
        # The sweeper must never republish a row whose request is still waiting for its publish confirm:
        # that request may yet fail, discard the row and answer 503, and the task must then not run.
        if self.api.sweeper_grace_seconds <= self.amqp.publish_timeout_seconds:
            raise ValueError(
                "TASKYARD_API_SWEEPER_GRACE_SECONDS must be larger than TASKYARD_AMQP_PUBLISH_TIMEOUT_SECONDS"
            )
        return self

    @property
    def retry_after_seconds(self) -> int:
        return self.amqp.retry_after_seconds


@lru_cache(maxsize=1)
def get_settings() -> ServiceSettings:
    """Read the environment once (at start, never at import)."""
    return ServiceSettings(
        amqp=AmqpSettings(),
        db=DbSettings(),
        catalog=CatalogSettings(),
        log=LogSettings(),
        api=ApiSettings(),
        webhook=WebhookSettings(),
    )

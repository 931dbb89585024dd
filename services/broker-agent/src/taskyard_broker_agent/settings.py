"""The broker agent's settings: its own ``TASKYARD_BROKER_*`` class, composed with the shared ones.

Nothing here reads the environment at import time; ``get_settings()`` builds everything once, at start.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)
from taskyard_common.webhooks import WebhookSettings


class BrokerAgentSettings(BaseSettings):
    """Routing tunables (``TASKYARD_BROKER_*``)."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_BROKER_", extra="ignore")

    # Intake messages handled at once per process, whatever their priority (each level's intake consumer
    # prefetches twice this). Routing is I/O bound (one LLM call, two SQL statements, one confirmed
    # publish), so a high limit keeps the LLM endpoint busy without more processes.
    prefetch: int = Field(default=64, ge=1, le=10_000)
    # False forces the rules router even when an LLM endpoint is configured (cost, outage, air gap).
    llm_routing: bool = True
    # An LLM answer less confident than this is discarded for the rules router's.
    min_confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    # The rules router's score for the LLM's specialist that the request must show for the LLM's choice to
    # stand (routing/evidence.py): below it the rules decide, usually the fallback. 0 turns the check off.
    evidence_floor: float = Field(default=1.5, ge=0.0)  # evidence.EVIDENCE_FLOOR (a test keeps them equal)
    # The routing call only needs the gist of a request: longer inputs are cut before they reach the LLM.
    max_request_chars: int = Field(default=8000, ge=100)
    # LLM routing decisions remembered per process for identical normalized requests (0: no cache), and
    # for how long: a repeated request costs no second LLM call.
    cache_size: int = Field(default=10_000, ge=0, le=10_000_000)
    cache_ttl_seconds: float = Field(default=3600.0, ge=0)
    # A transient failure (database blip, specialist queue full, broker not confirming) sends the intake
    # message through a delay queue: exponential backoff with jitter from the base, capped, rounded up to a
    # delay tier. After ``max_attempts`` routing attempts the task fails with ``routing_failed``. The same
    # base and cap pace the dead-letter consumer's retries while the database is unreachable.
    retry_base_seconds: float = Field(default=1.0, gt=0)
    retry_max_seconds: float = Field(default=30.0, gt=0)
    max_attempts: int = Field(default=10, ge=1, le=1000)
    # Dead letters in flight per process (recording one is a single transaction).
    dead_letter_prefetch: int = Field(default=32, ge=1, le=10_000)
    # How often the reaper looks for running tasks whose lease expired.
    reaper_interval_seconds: float = Field(default=5.0, gt=0)
    # After the database was away from the reaper (a round failed on it, or no round got through for longer
    # than this plus the interval), expired leases are left alone for this long once it answers again: the
    # workers' heartbeats failed too meanwhile, and a live worker renews its leases within a third of its
    # lease (TASKYARD_WORKER_LEASE_SECONDS, 30 by default) of the database's return. Keep it at least that.
    reaper_recovery_grace_seconds: float = Field(default=30.0, ge=0)
    # A requeued task whose work message is still not confirmed published after this long (an agent died
    # between reclaiming and publishing it) is published again.
    republish_after_seconds: float = Field(default=60.0, gt=0)
    # On SIGTERM, how long in-flight intake messages may take to finish before they are handed back.
    shutdown_grace_seconds: float = Field(default=20.0, gt=0)


class LaneSettings(BaseSettings):
    """Tenant lanes and the parked tasks' feeder (``TASKYARD_BROKER_LANE_*``; see ``lanes.py``)."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_BROKER_LANE_", extra="ignore")

    # Off: nothing is parked at routing (a worker's refused start still parks, and the feeder releases it).
    enabled: bool = True
    # A lane's depth: max(min_depth, ceil(factor * the specialist's slots across its workers)).
    factor: float = Field(default=1.0, gt=0, le=100)
    min_depth: int = Field(default=4, ge=1, le=100_000)
    # How often the feeder releases parked tasks (a parked task waits about half of this on average once
    # its lane has room), and how many one round releases at most.
    feeder_interval_seconds: float = Field(default=0.25, gt=0, le=60)
    feeder_batch: int = Field(default=1000, ge=1, le=100_000)
    # How often the workers consuming each specialist's queues are counted (a lane's depth follows them):
    # a lane deepens this long at most after a worker starts consuming (``fleet.py``).
    fleet_seconds: float = Field(default=2.0, gt=0, le=300)


class SchedulerSettings(BaseSettings):
    """The cron schedules' scheduler (``TASKYARD_BROKER_SCHEDULER_*``)."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_BROKER_SCHEDULER_", extra="ignore")

    # Off: this agent creates no schedule occurrences (another replica, or none, does).
    enabled: bool = True
    # How often it claims the due schedules: an occurrence's task is created at most this late (plus the
    # round's own time) while a scheduler runs.
    interval_seconds: float = Field(default=5.0, gt=0, le=300)
    # Due schedules one round claims (locks) at most; the next round takes the rest.
    batch_size: int = Field(default=100, ge=1, le=10_000)


class RetentionSettings(BaseSettings):
    """Retention of finished tasks (``TASKYARD_TASK_RETENTION_*``): the broker agent's retention loop."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_TASK_RETENTION_", extra="ignore")

    # Finished tasks older than this (since they finished) are removed with everything attached to them,
    # unless their tenant has its own retention (taskyard-admin tenants retention).
    days: float = Field(default=30.0, gt=0, le=36500)
    # Off: this agent removes nothing (another replica, or none, does).
    enabled: bool = True
    # How often a round starts; a round removes batches until none is left or ``max_batches`` ran.
    interval_seconds: float = Field(default=60.0, gt=0, le=86400)
    # Tasks per batch, one transaction each: the locks and the WAL of one batch stay small.
    batch_size: int = Field(default=500, ge=1, le=10_000)
    max_batches: int = Field(default=100, ge=1, le=100_000)
    # A pause between two batches, so a backlog is worked off without taking the database from the
    # submit path.
    batch_pause_seconds: float = Field(default=0.05, ge=0, le=60)


class ServiceSettings(BaseModel):
    """Everything the broker agent process needs, built once and passed down."""

    model_config = ConfigDict(frozen=True)

    amqp: AmqpSettings
    db: DbSettings
    llm: LlmSettings
    catalog: CatalogSettings
    health: HealthSettings
    log: LogSettings
    broker: BrokerAgentSettings
    # The webhook dispatcher (TASKYARD_WEBHOOK_*, shared with the API's address rules).
    webhook: WebhookSettings
    # Read from the environment when not given (``get_settings`` gives it).
    scheduler: SchedulerSettings = Field(default_factory=SchedulerSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    lanes: LaneSettings = Field(default_factory=LaneSettings)

    @property
    def llm_routing_enabled(self) -> bool:
        """Route with the LLM only when one is configured and routing through it is not switched off."""
        return self.broker.llm_routing and self.llm.enabled


@lru_cache(maxsize=1)
def get_settings() -> ServiceSettings:
    """Read the environment once (at start, never at import)."""
    return ServiceSettings(
        amqp=AmqpSettings(),
        db=DbSettings(),
        llm=LlmSettings(),
        catalog=CatalogSettings(),
        health=HealthSettings(),
        log=LogSettings(),
        broker=BrokerAgentSettings(),
        webhook=WebhookSettings(),
        scheduler=SchedulerSettings(),
        retention=RetentionSettings(),
        lanes=LaneSettings(),
    )

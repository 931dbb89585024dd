"""The worker's settings: its own ``TASKYARD_WORKER_*`` tunables, composed with the shared classes.

Nothing reads the environment at import: ``get_settings()`` builds everything once, in ``main()``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, IPvAnyNetwork, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from taskyard_common.settings import (
    AmqpSettings,
    CatalogSettings,
    DbSettings,
    HealthSettings,
    LlmSettings,
    LogSettings,
)


class WorkerSettings(BaseSettings):
    """Tool limits, leases, settling and shutdown behaviour of a specialist worker (``TASKYARD_WORKER_*``)."""

    model_config = SettingsConfigDict(env_prefix="TASKYARD_WORKER_", extra="ignore")

    # Hosts the http_fetch tool may reach: ``host`` (exactly that name), ``.domain`` (its subdomains), either
    # with ``:port`` (else only the scheme's default port). Empty: the tool refuses every URL, so a worker
    # never reaches the network on a model's say-so unless an operator opted in.
    # NoDecode: the environment gives a plain comma-separated string, not JSON.
    http_allowlist: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Non-public networks (CIDRs) the allowed hosts may still resolve to, e.g. an in-cluster service or, in
    # tests, 127.0.0.1/32. Empty: only public addresses are fetched.
    http_allowed_networks: Annotated[list[IPvAnyNetwork], NoDecode] = Field(default_factory=list)
    http_max_bytes: int = Field(default=200_000, ge=1)
    http_timeout_seconds: float = Field(default=10.0, gt=0)
    # After SIGTERM, each running task finishes the step it is in, records it and is handed back (uncharged;
    # the next worker resumes it); a step still running after this long is cut short and handed back as
    # well. Keep it at the step bound (LLM timeout x tries + tool timeout) and below the pod's
    # terminationGracePeriodSeconds.
    shutdown_grace_seconds: float = Field(default=30.0, ge=0)
    # Every tool result is cut to this many characters before it reaches the model's context.
    max_tool_output_chars: int = Field(default=8000, ge=100)
    # The tool calls of one reply run concurrently; past this many, the rest are answered with an error (the
    # model may call them again), so one step holds at most this many results (e.g. http_fetch bodies).
    max_tool_calls_per_reply: int = Field(default=8, ge=1, le=128)
    # Delegation (the ``delegate`` tool): how deep a tree of delegated tasks may grow, and how many tasks
    # one task may delegate over its life.
    max_delegation_depth: int = Field(default=3, ge=0, le=20)
    max_delegated_tasks: int = Field(default=10, ge=0, le=1000)
    # How long a started task's lease lasts without a heartbeat (renewed every third of it). A worker that
    # dies stops renewing, and the reaper takes the task back at most this long after.
    lease_seconds: float = Field(default=30.0, gt=0)
    # A delivery still running after this long is acked early (the lease protects the task from then on),
    # so RabbitMQ's 30-minute consumer timeout never closes the channel under a long task.
    settle_after_seconds: float = Field(default=600.0, gt=0)
    # Step checkpoints of one task, in bytes of JSON (the conversation's messages): past this, an attempt goes
    # on without recording more steps, so an interruption costs the steps since.
    checkpoint_max_bytes: int = Field(default=4 * 1024 * 1024, ge=0)
    # How long a finished run keeps trying to record its answer while the store is away, before the attempt
    # is deferred (uncharged) and its checkpointed answer completed by the next one.
    complete_retry_seconds: float = Field(default=60.0, ge=0)
    # A streaming specialist's text goes to the task's event log at most this often (one append per task
    # per interval, plus one when a reply ends); 0: as it comes, one append per turn of the event loop.
    token_flush_seconds: float = Field(default=0.25, ge=0)
    # Move redelivered messages (a crash returned them) to the quarantine queue to run them one at a time.
    quarantine: bool = True
    # Run as a supervisor (``supervisor.py``): a warm parent forks the worker children (one for the main
    # queues, one for the quarantine queue) and forks a dead one again at once, ending its leases. False:
    # one process that consumes everything, restarted by whoever started it.
    supervisor: bool = True
    # Under a supervisor, how many children consume the quarantine queue, one suspect each at a time: the
    # suspects of a crash (every task it found in flight, healthy most of them) wait behind each other there.
    # The main child serves the metrics of them all (``pod_metrics``).
    # 0: the main child consumes the quarantine queue too (a poison task's crash in quarantine then takes
    # the main child's running tasks with it).
    quarantine_children: int = Field(default=2, ge=0, le=16)
    # Under a supervisor, how many children consume the main queues, sharing the specialist's concurrency
    # (each runs ``ceil(concurrency / main_children)`` tasks and prefetches twice that). A poison task's crash
    # ends only its own child: with more children it takes fewer healthy tasks with it, at the cost of a
    # process, a broker connection and a database pool each. The first one serves health and metrics.
    main_children: int = Field(default=1, ge=1, le=64)
    # Under a supervisor with one main child: once a main child dies by a signal (a task killed it), the main
    # queues run in this many children, splitting the concurrency as ``main_children`` does, until
    # ``split_calm_seconds`` pass without another such crash; then in one again (``main_split.py``). 1: never.
    split_after_crash: int = Field(default=4, ge=1, le=64)
    split_calm_seconds: float = Field(default=300.0, gt=0)
    # Job mode (a KEDA ScaledJob): stop gracefully and exit 0 once nothing was in flight and nothing was
    # delivered for this long, so the Job completes. None: run until SIGTERM. ``--exit-when-idle`` wins.
    exit_when_idle_seconds: float | None = Field(default=None, gt=0)

    @field_validator("http_allowlist", "http_allowed_networks", mode="before")
    @classmethod
    def _split_hosts(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            # A JSON list is accepted too, for values files that render lists that way.
            value = json.loads(text) if text.startswith("[") else text.split(",")
        if isinstance(value, list | tuple):
            hosts = [str(h).strip().lower().rstrip(".") for h in value]
            return [h for h in hosts if h]
        return value


class ServiceSettings(BaseModel):
    """Everything one worker process needs, built once and passed down."""

    model_config = ConfigDict(frozen=True)

    amqp: AmqpSettings
    db: DbSettings
    llm: LlmSettings
    catalog: CatalogSettings
    health: HealthSettings
    log: LogSettings
    worker: WorkerSettings


def get_settings() -> ServiceSettings:
    return ServiceSettings(
        amqp=AmqpSettings(),
        db=DbSettings(),
        llm=LlmSettings(),
        catalog=CatalogSettings(),
        health=HealthSettings(),
        log=LogSettings(),
        worker=WorkerSettings(),
    )

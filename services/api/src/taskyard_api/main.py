"""The API's entry point: ``create_app`` builds the application, ``main`` serves it with uvicorn."""

from __future__ import annotations

import argparse
import inspect
import socket
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import uvicorn
from fastapi import FastAPI

from taskyard_api.console.routes import make_router as console_router
from taskyard_api.gc_tuning import tune_for_serving
from taskyard_api.http.body_limit import BodyLimitMiddleware
from taskyard_api.http.errors import InternalErrorMiddleware, exception_handlers
from taskyard_api.http.metrics import HttpMetricsMiddleware
from taskyard_api.http.openapi import install_openapi
from taskyard_api.http.problems import problem_responses
from taskyard_api.http.request_id import RequestIdLogFilter, RequestIdMiddleware
from taskyard_api.lifespan import make_lifespan, stop_watching
from taskyard_api.routes import (
    budgets,
    dead_letters,
    events,
    health,
    limits,
    schedules,
    specialists,
    task_deletion,
    task_groups,
    tasks,
    tenants,
    usage,
    webhooks,
)
from taskyard_api.settings import ServiceSettings, get_settings
from taskyard_api.tenancy.body_auth import AuthBeforeBodyMiddleware
from taskyard_common.service import EXIT_UNAVAILABLE, run_service

SERVICE = "taskyard-api"

DESCRIPTION = """\
Submit long-running AI agent tasks and follow them to their result.

A task is accepted with **202** once it is stored and queued; follow it with `GET /v1/tasks/{task_id}`
(long-poll it with `?wait=` and `If-None-Match`) or its events, `GET /v1/tasks/{task_id}/events` (a page, or a
Server-Sent Events stream with `Accept: text/event-stream`), until it is `completed` or `failed`. Every error
is an RFC 9457 problem document (`application/problem+json`).
A **503** on submission means the task was *not* stored: retry after `Retry-After` seconds.

A task may be followed by more steps (`then`: each step's input is the previous step's output), and
`POST /v1/task-groups` submits up to 1000 tasks at once, with an optional `reduce` step run once on their
outcomes. A task's document links its chain, its parent, the tasks it delegated to and its group.

A task submitted with a `not_before` stays `scheduled` until then. `POST /v1/schedules` creates a task at
each occurrence of a cron expression (five fields, in an IANA time zone).

A task submitted with a `webhook` has its terminal status POSTed there, signed (Standard Webhooks);
`GET /v1/tasks/{task_id}/webhook-deliveries` lists what was sent. `POST /v1/tasks/{task_id}/cancel` stops a
task; the `dead-letters` routes let an operator replay or discard
the tasks whose message the broker gave up on (admin only), and `/v1/tenants/{tenant}/limits` caps how many
of the tenant's tasks run at once (admin only).

Every `/v1` route needs an API key (`Authorization: Bearer tyk_<id>_<secret>`, made with `taskyard-admin`):
401 without a valid one, 403 when its role (`reader`, `submitter`, `admin`) may not do it; a key sees only its
tenant's tasks. Submissions are rate limited per tenant (429 with `Retry-After` and `RateLimit` headers) and
accept an `Idempotency-Key` header, so a retry never creates a second task.
"""

TAGS = [
    {"name": "tasks", "description": "Submit tasks (and chains of steps), follow them, cancel them"},
    {
        "name": "task-groups",
        "description": "Submit many tasks at once, with a reduce step run once on their outcomes",
    },
    {"name": "webhooks", "description": "A task's webhook deliveries: their attempts, and sending one again"},
    {"name": "schedules", "description": "Cron schedules: a task at each occurrence; pause, resume, delete"},
    {
        "name": "dead-letters",
        "description": "Replay or discard dead-lettered tasks (admin only)",
    },
    {
        "name": "tenants",
        "description": "A tenant's limits: how many of its tasks may run at once (admin only)",
    },
    {
        "name": "usage",
        "description": "LLM spend: tasks, tokens and cost (USD) per specialist, model or day; tenant budgets",
    },
    {"name": "specialists", "description": "What a task may be routed to"},
    {"name": "health", "description": "Probes and metrics"},
]


def _version() -> str:
    try:
        return version("taskyard-api")
    except PackageNotFoundError:
        return "0.0.0"


def _without_native_telemetry() -> dict[str, Any]:
    """FastAPI's own OpenTelemetry switched off where this FastAPI has it: taskyard configures no OTel
    provider (its metrics are Prometheus), yet the check for one reads the environment on every request."""
    if "telemetry" not in inspect.signature(FastAPI.__init__).parameters:
        return {}
    return {"telemetry": {"tracing": False, "metrics": False, "logs": False}}


def create_app(settings: ServiceSettings) -> FastAPI:
    app = FastAPI(
        **_without_native_telemetry(),
        title="taskyard",
        version=_version(),
        description=DESCRIPTION,
        lifespan=make_lifespan(settings),
        # Any route can fail unexpectedly; the answer is then a 500 problem with a request id.
        responses=problem_responses(500),
        redoc_url=None,
        openapi_tags=TAGS,
        exception_handlers=exception_handlers(settings.retry_after_seconds),
    )
    app.include_router(tasks.router)
    app.include_router(task_deletion.router)
    app.include_router(task_groups.router)
    app.include_router(webhooks.router)
    app.include_router(events.router)
    app.include_router(schedules.router)
    app.include_router(dead_letters.router)
    app.include_router(tenants.router)
    app.include_router(usage.router)
    app.include_router(budgets.router)
    app.include_router(limits.router)
    app.include_router(specialists.router)
    app.include_router(health.router)
    # The web console (static, outside the OpenAPI document): it calls the /v1 routes like any client.
    app.include_router(console_router())
    # Added innermost first: metrics see every answer, including 413s and last-resort 500s, and the request
    # id (outermost) is set before anything logs and stamped on every answer.
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.api.max_body_bytes)
    # Outside the body limit and the routes: a request without a valid key is refused before its body is read.
    app.add_middleware(AuthBeforeBodyMiddleware)
    app.add_middleware(InternalErrorMiddleware)
    app.add_middleware(HttpMetricsMiddleware)
    app.add_middleware(RequestIdMiddleware)
    install_openapi(app)
    return app


def _port(text: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {port}")
    return port


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=SERVICE,
        description="Serve taskyard's REST API: submit tasks, read their status and results.",
        epilog="Configured by TASKYARD_API_*, TASKYARD_AMQP_*, TASKYARD_DB_*, TASKYARD_CATALOG_PATH and "
        "TASKYARD_LOG_* environment variables (see docs/api.md). Run taskyard-migrate first.",
    )
    parser.add_argument("--host", help="address to listen on (default: TASKYARD_API_HOST, 127.0.0.1)")
    parser.add_argument("--port", type=_port, help="port to listen on (default: TASKYARD_API_PORT, 8000)")
    return parser


def _settings(host: str | None, port: int | None) -> ServiceSettings:
    settings = get_settings()
    overrides = {key: value for key, value in (("host", host), ("port", port)) if value is not None}
    if overrides:
        settings = settings.model_copy(update={"api": settings.api.model_copy(update=overrides)})
    return settings


class _Server(uvicorn.Server):
    """uvicorn's server, with the garbage collector set for serving once started (see ``gc_tuning``), and
    ending the event streams and long-polls first when it stops: it waits for every open request before the
    lifespan's shutdown, and a stream would keep it waiting forever."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        tune_for_serving()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        stop_watching(self._app)
        await super().shutdown(sockets)


def serve(settings: ServiceSettings) -> None:
    """Serve until SIGTERM or SIGINT. A failed start raises its cause (a broken catalog, the database
    away), which ``run_service`` turns into the exit code."""
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.api.host,
        port=settings.api.port,
        log_config=None,  # keep configure_logging's handlers
        server_header=False,
        lifespan="on",
    )
    try:
        _Server(config, app).run()
    except SystemExit:
        # uvicorn logged the failed start and exits 3; the shared exit codes say why instead.
        start_error = getattr(app.state, "start_error", None)
        if isinstance(start_error, Exception):
            raise start_error from None
        sys.exit(EXIT_UNAVAILABLE)  # it could not listen


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    run_service(
        SERVICE,
        load_settings=lambda: _settings(args.host, args.port),
        log_settings=lambda settings: settings.log,
        run=serve,
        log_filters=[RequestIdLogFilter()],
    )

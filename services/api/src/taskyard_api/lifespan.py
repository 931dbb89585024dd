"""The application's lifespan: the resources open while it serves, reachable through ``deps``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

from fastapi import FastAPI

from taskyard_api.resources import Resources
from taskyard_api.settings import ServiceSettings
from taskyard_api.submission.submit import REJECT_REASONS
from taskyard_common.health import HealthServer
from taskyard_common.metrics import SUBMIT_REJECTED
from taskyard_common.settings import HealthSettings

log = logging.getLogger(__name__)


def stop_watching(app: FastAPI) -> None:
    """End every event stream and long-poll (the server is stopping): they never end by themselves, and
    uvicorn waits for open requests before it runs the lifespan's shutdown."""
    resources: Resources | None = getattr(app.state, "resources", None)
    if resources is not None:
        resources.watcher.drain()


async def _connected(resources: Resources) -> bool:
    return resources.bus.connected


def make_lifespan(settings: ServiceSettings) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        for reason in REJECT_REASONS:
            SUBMIT_REJECTED.labels(reason)
        async with AsyncExitStack() as stack:
            try:
                resources = await stack.enter_async_context(Resources.open(settings))
            except Exception as exc:
                # The server only logs a failed start; ``main`` turns its cause into the exit code.
                app.state.start_error = exc
                raise
            app.state.resources = resources
            if settings.api.metrics_port is not None:
                # Probes stay on the API's own port; this listener is for Prometheus.
                metrics_server = HealthServer(
                    HealthSettings(host=settings.api.host, port=settings.api.metrics_port),
                    ready=lambda: _connected(resources),
                )
                await metrics_server.start()
                stack.push_async_callback(metrics_server.close)
            if not settings.api.auth_enabled:
                log.warning(
                    "authentication is DISABLED (TASKYARD_API_AUTH_ENABLED=false): every request acts as an "
                    "admin of tenant 'default'. Never run like this outside local development."
                )
            log.info("taskyard-api started with %d specialists", len(resources.catalog.names))
            try:
                yield
            finally:
                del app.state.resources

    return lifespan

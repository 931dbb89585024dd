"""Probes and metrics, outside ``/v1``: they describe this process, not the API's resources."""

from __future__ import annotations

import asyncio
import logging
from typing import Literal

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from taskyard_api.deps import ResourcesDep, SettingsDep
from taskyard_api.http.problems import NOT_FOUND, NOT_READY, ProblemException, problem_responses

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    status: Literal["ready"] = "ready"


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> Health:
    return Health()


@router.get(
    "/readyz",
    summary="Readiness: the database answers and the broker is connected",
    responses=problem_responses(503),
)
async def readyz(resources: ResourcesDep) -> Readiness:
    unavailable = []
    try:
        async with asyncio.timeout(resources.settings.api.readiness_timeout_seconds):
            await resources.store.ping()
    except Exception as exc:
        # A probe must answer, whatever the failure; the log gets the kind, never the URL.
        log.warning("readiness: database check failed: %s", type(exc).__name__)
        unavailable.append("database")
    if not resources.bus.connected:
        unavailable.append("broker")
    if unavailable:
        raise ProblemException(NOT_READY(f"Unavailable: {', '.join(unavailable)}.", unavailable=unavailable))
    return Readiness()


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {"description": "Prometheus text format", "content": {"text/plain": {}}},
        **problem_responses(404, descriptions={404: "Served on TASKYARD_API_METRICS_PORT instead"}),
    },
)
async def metrics(settings: SettingsDep) -> Response:
    if settings.api.metrics_port is not None:
        # Served on TASKYARD_API_METRICS_PORT instead, out of reach of whatever exposes this port.
        raise ProblemException(NOT_FOUND("Metrics are served on the metrics port."))
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)

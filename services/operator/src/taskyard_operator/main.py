"""``taskyard-operator``: watch the Specialists of one namespace and keep their workers, queues and status."""

from __future__ import annotations

import argparse
import asyncio
import threading

import kopf

from taskyard_common.logging import configure_logging
from taskyard_operator.handlers import build_registry
from taskyard_operator.settings import Settings, get_settings


async def run(
    settings: Settings,
    *,
    stop_flag: asyncio.Event | threading.Event | None = None,
    ready_flag: asyncio.Event | threading.Event | None = None,
    liveness_endpoint: str | None = None,
) -> None:
    """The operator until ``stop_flag`` (or SIGINT/SIGTERM in the main thread). The tests run this too."""
    await kopf.operator(
        registry=build_registry(settings.operator.status_interval_seconds),
        memo=kopf.Memo(settings=settings),
        namespaces=[settings.operator.namespace],
        clusterwide=False,
        standalone=True,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
        liveness_endpoint=liveness_endpoint,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="taskyard-operator",
        description=(
            "Reconcile taskyard Specialist resources (specialists.taskyard.dev) in one namespace: their queues, "
            "worker Deployment or ScaledJob, ScaledObject and status. Settings: TASKYARD_OPERATOR_* (the "
            "namespace, the worker template the chart renders), TASKYARD_AMQP_*, TASKYARD_DB_*, TASKYARD_LOG_*."
        ),
    )
    parser.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="kopf's liveness endpoint (default: %(default)s; empty: none)",
    )
    args = parser.parse_args(argv)
    settings = get_settings()
    configure_logging(settings.log, "operator")
    asyncio.run(run(settings, liveness_endpoint=args.liveness or None))

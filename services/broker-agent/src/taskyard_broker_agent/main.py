"""``taskyard-broker-agent``: the process users run. Settings, logging and exit codes come from
``taskyard_common.service.run_service``: an invalid setting or a bad catalog exits 2, a broker or database
that cannot be reached (or a conflicting queue) exits 1, SIGTERM or SIGINT exits 0 after a graceful stop."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

from taskyard_broker_agent.agent import BrokerAgent
from taskyard_broker_agent.resources import SERVICE
from taskyard_broker_agent.settings import ServiceSettings, get_settings
from taskyard_common.service import run_service
from taskyard_common.settings import HealthSettings

log = logging.getLogger(__name__)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=SERVICE,
        description="Route new taskyard tasks from the intake queue to specialist queues "
        "(explicit request, else the LLM, else the rules router). Configured by TASKYARD_* variables.",
    )
    parser.add_argument("--health-port", type=int, help="port of /healthz, /readyz, /metrics (0: off)")
    return parser.parse_args(argv)


def load_settings(health_port: int | None) -> ServiceSettings:
    """The environment's settings, with ``--health-port`` (validated like the variable) when given."""
    settings = get_settings()
    if health_port is None:
        return settings
    health = HealthSettings(host=settings.health.host, port=health_port)
    return settings.model_copy(update={"health": health})


async def serve(settings: ServiceSettings) -> None:
    """Run until SIGTERM or SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with BrokerAgent(settings):
        await stop.wait()
        log.info("stopping: consumer cancelled, finishing messages in flight")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    run_service(
        SERVICE,
        load_settings=lambda: load_settings(args.health_port),
        log_settings=lambda settings: settings.log,
        run=lambda settings: asyncio.run(serve(settings)),
    )


if __name__ == "__main__":
    main()

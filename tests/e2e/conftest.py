"""The whole system as real processes, started from the console scripts users run."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from taskyard_common.catalog import Catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from tests.support.devllm import DevLlm
from tests.support.processes import Service, free_port, wait_http_ok


@dataclass
class System:
    api_url: str
    broker_metrics_url: str
    worker_metrics_urls: dict[str, str]
    services: list[Service] = field(default_factory=list)
    routing_model: str = ""

    def logs(self) -> str:
        return "\n\n".join(f"--- {s.name} ---\n{s.log_tail(40)}" for s in self.services)


def service_env(
    amqp: AmqpSettings, db: DbSettings, catalog_path: Path, devllm: DevLlm, model: str
) -> dict[str, str]:
    return {
        "TASKYARD_AMQP_URL": amqp.url.get_secret_value(),
        "TASKYARD_AMQP_PREFIX": amqp.prefix,
        "TASKYARD_AMQP_DELIVERY_LIMIT": str(amqp.delivery_limit),
        "TASKYARD_AMQP_MAX_LENGTH": str(amqp.max_length),
        "TASKYARD_DB_URL": db.url.get_secret_value(),
        "TASKYARD_DB_SCHEMA": db.db_schema,
        "TASKYARD_CATALOG_PATH": str(catalog_path),
        "TASKYARD_LLM_BASE_URL": devllm.base_url,
        "TASKYARD_LLM_MODEL": model,
        "TASKYARD_LOG_LEVEL": "INFO",
    }


@pytest.fixture
async def system(
    amqp_settings: AmqpSettings,
    db_settings: DbSettings,
    catalog: Catalog,
    catalog_path: Path,
    devllm: DevLlm,
    tmp_path: Path,
) -> AsyncIterator[System]:
    model = devllm.new_model()
    env = service_env(amqp_settings, db_settings, catalog_path, devllm, model)
    api_port, broker_port = free_port(), free_port()
    worker_ports = {name: free_port() for name in catalog.names}
    system = System(
        api_url=f"http://127.0.0.1:{api_port}",
        broker_metrics_url=f"http://127.0.0.1:{broker_port}/metrics",
        worker_metrics_urls={n: f"http://127.0.0.1:{p}/metrics" for n, p in worker_ports.items()},
        routing_model=model,
    )
    try:
        system.services.append(Service("api", ["taskyard-api", "--port", str(api_port)], env, tmp_path))
        system.services.append(
            Service(
                "broker-agent",
                ["taskyard-broker-agent"],
                {**env, "TASKYARD_HEALTH_PORT": str(broker_port)},
                tmp_path,
            )
        )
        for name, port in worker_ports.items():
            system.services.append(
                Service(
                    f"worker-{name}",
                    ["taskyard-worker", "--specialist", name],
                    {**env, "TASKYARD_HEALTH_PORT": str(port)},
                    tmp_path,
                )
            )
        await wait_http_ok(f"{system.api_url}/readyz", system.services[0], timeout=60)
        for service, port in zip(system.services[1:], [broker_port, *worker_ports.values()], strict=True):
            await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service, timeout=60)
        yield system
    finally:
        codes = {s.name: s.stop() for s in system.services}
        # uvicorn re-raises SIGTERM after its graceful shutdown, so the API's clean exit reads -15.
        unclean = {name: code for name, code in codes.items() if code not in (0, None, -signal.SIGTERM)}
        if unclean:
            print(system.logs())
        assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum a metric's samples whose labels include ``labels`` (Prometheus text format)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        series, value = line.rsplit(" ", 1)
        if all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total


async def fetch_text(client: httpx.AsyncClient, url: str) -> str:
    response = await client.get(url)
    response.raise_for_status()
    return response.text

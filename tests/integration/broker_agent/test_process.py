"""The broker agent as users run it: the ``taskyard-broker-agent`` console script in its own process."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingMethod
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok
from taskyard_devkit.service_env import service_env
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

SECRET_INPUT = "Please summarize this confidential board memo about project nightingale"


async def test_service_routes_reports_metrics_and_stops_on_sigterm(
    amqp_settings: AmqpSettings,
    db_settings: DbSettings,
    catalog_path: Path,
    devllm,
    bus,
    new_task,
    store,
    service_logs: Path,
    test_id: str,
):
    port = free_port()
    env = {
        **service_env(amqp_settings, db_settings, catalog_path),
        "TASKYARD_LLM_BASE_URL": devllm.base_url,
        "TASKYARD_LLM_MODEL": devllm.new_model(),
        "TASKYARD_HEALTH_PORT": str(port),
        "TASKYARD_LOG_LEVEL": "INFO",
    }
    service = Service(f"broker-agent-{test_id}", ["taskyard-broker-agent"], env, service_logs)
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        message = await new_task(SECRET_INPUT)
        await bus.send(message)
        work = await bus.wait_work("summarizer")
        assert work.task_id == message.task_id
        assert work.routing.method is RoutingMethod.LLM
        assert (await store.get(message.task_id)).status is TaskStatus.QUEUED

        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            sample = 'taskyard_routing_decisions_total{method="llm",specialist="summarizer"} 1.0'

            async def counted() -> bool:
                return sample in (await client.get("/metrics")).text

            await eventually(counted, timeout=10, what="the routing decision in /metrics")
            metrics = (await client.get("/metrics")).text
            # Label sets are pre-initialised: a dashboard shows zeros, not gaps.
            assert 'taskyard_routing_decisions_total{method="rules",specialist="researcher"} 0.0' in metrics
            assert 'taskyard_routing_fallbacks_total{reason="llm_error"} 0.0' in metrics
            for reason in ("delivery_limit", "rejected", "expired", "maxlen", "unknown"):
                assert f'taskyard_dead_letters_total{{reason="{reason}"}} 0.0' in metrics
            assert 'taskyard_leases_reclaimed_total{outcome="dead_lettered"} 0.0' in metrics
            assert "taskyard_intake_retries_total 0.0" in metrics
            assert (await client.get("/healthz")).status_code == 200
    finally:
        returncode = service.stop()
    log = service.log_path.read_text()
    assert returncode == 0, service.log_tail()
    assert f"routed task {message.task_id}: method=llm specialist=summarizer" in log
    assert "nightingale" not in log  # never the task's input

"""The broker agent as users run it: the ``taskyard-broker-agent`` console script in its own process."""

from __future__ import annotations

import socket
import subprocess
import sys
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
BIN = Path(sys.executable).parent


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


def run_to_exit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The console script with only ``env`` (and PATH), run until it exits by itself."""
    return subprocess.run(
        [str(BIN / "taskyard-broker-agent"), *args],
        env={"PATH": str(BIN), "TASKYARD_HEALTH_PORT": "0", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def closed_port() -> int:
    """A port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_invalid_setting_exits_2_naming_the_setting_not_its_value(catalog_path: Path):
    result = run_to_exit(
        {"TASKYARD_CATALOG_PATH": str(catalog_path), "TASKYARD_BROKER_MIN_CONFIDENCE": "hunter2"}
    )
    assert result.returncode == 2, result.stderr
    assert "invalid configuration" in result.stderr and "min_confidence" in result.stderr
    assert "hunter2" not in result.stderr + result.stdout
    assert run_to_exit({"TASKYARD_CATALOG_PATH": str(catalog_path)}, "--health-port", "70000").returncode == 2


def test_unreadable_catalog_exits_2(tmp_path: Path):
    result = run_to_exit({"TASKYARD_CATALOG_PATH": str(tmp_path / "missing.yaml")})
    assert result.returncode == 2, result.stderr
    assert "cannot read specialist catalog" in result.stderr + result.stdout


def test_unreachable_database_or_broker_exits_1(
    catalog_path: Path, amqp_settings: AmqpSettings, db_settings: DbSettings
):
    base = service_env(amqp_settings, db_settings, catalog_path)
    no_database = {
        **base,
        "TASKYARD_DB_URL": f"postgresql://taskyard:s3cret-pw@127.0.0.1:{closed_port()}/taskyard",
    }
    result = run_to_exit(no_database)
    assert result.returncode == 1, result.stderr
    assert (
        "StoreUnavailable" in result.stderr + result.stdout
        and "s3cret-pw" not in result.stderr + result.stdout
    )
    no_broker = {**base, "TASKYARD_AMQP_URL": f"amqp://guest:s3cret-pw@127.0.0.1:{closed_port()}/"}
    result = run_to_exit(no_broker)
    assert result.returncode == 1, result.stderr
    assert (
        "BrokerUnavailable" in result.stderr + result.stdout
        and "s3cret-pw" not in result.stderr + result.stdout
    )

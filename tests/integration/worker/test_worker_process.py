"""``taskyard-worker`` as a real process, started from its console script as the chart starts it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import BIN, Service
from taskyard_devkit.readiness import wait_http_ok
from taskyard_devkit.service_env import service_env
from tests.integration.worker.helpers import Harness
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def worker_env(
    amqp: AmqpSettings, db: DbSettings, catalog_path: Path, llm_base_url: str, model: str, port: int
):
    return {
        **service_env(amqp, db, catalog_path),
        "TASKYARD_LLM_BASE_URL": llm_base_url,
        "TASKYARD_LLM_MODEL": model,
        "TASKYARD_HEALTH_PORT": str(port),
    }


async def test_worker_process_serves_health_runs_a_task_and_exits_cleanly(
    harness: Harness, catalog_path: Path, service_logs: Path
) -> None:
    port = free_port()
    settings = harness.settings
    env = worker_env(settings.amqp, settings.db, catalog_path, harness.devllm.base_url, harness.model, port)
    service = Service("worker-general", ["taskyard-worker", "--specialist", "general"], env, service_logs)
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        message = await harness.submit("What is 12 * (3 + 4)?")
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED)
        assert record.result is not None and "84" in record.result["output"]
        async with httpx.AsyncClient() as client:
            metrics = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
            assert (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200
        assert 'taskyard_tasks_finished_total{specialist="general",status="completed"} 1.0' in metrics
        assert 'taskyard_tasks_finished_total{specialist="general",status="failed"} 0.0' in metrics
        assert 'taskyard_tasks_finished_total{specialist="general",status="cancelled"} 0.0' in metrics
        for reason in ("transient", "rate_limited", "timeout"):
            assert f'taskyard_task_retries_total{{reason="{reason}",specialist="general"}} 0.0' in metrics
        assert 'taskyard_messages_quarantined_total{specialist="general"} 0.0' in metrics
        assert 'taskyard_llm_tokens_total{kind="prompt",specialist="general"}' in metrics
        assert 'taskyard_task_duration_seconds_count{specialist="general"} 1.0' in metrics
    finally:
        code = await asyncio.to_thread(service.stop)
    assert code == 0, service.log_tail()
    log = service.log_tail(200)
    assert "stop signal received" in log
    # One line per task start and finish, and never the task's text.
    assert f"task {message.task_id}: started" in log and f"task {message.task_id}: completed" in log
    assert "12 * (3 + 4)" not in log


def test_unknown_specialist_exits_with_a_clear_error(catalog_path: Path) -> None:
    result = subprocess.run(
        [str(BIN / "taskyard-worker"), "--specialist", "nope"],
        env={"TASKYARD_CATALOG_PATH": str(catalog_path), "PATH": str(Path(sys.executable).parent)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "unknown specialist 'nope'" in result.stderr and "general" in result.stderr


async def test_exit_when_idle_exits_zero_after_the_idle_period(
    harness: Harness, catalog_path: Path, service_logs: Path
) -> None:
    """Job mode (a KEDA ScaledJob's pod): with nothing to do, the worker stops by itself and exits 0."""
    port = free_port()
    settings = harness.settings
    env = worker_env(settings.amqp, settings.db, catalog_path, harness.devllm.base_url, harness.model, port)
    argv = ["taskyard-worker", "--specialist", "general", "--exit-when-idle", "0.5"]
    service = Service("worker-idle", argv, env, service_logs)
    try:

        async def exited() -> bool:
            return service.proc.poll() is not None

        await eventually(exited, timeout=60, what="the idle worker to exit")
    finally:
        code = await asyncio.to_thread(service.stop)
    assert code == 0, service.log_tail()
    assert "--exit-when-idle" in service.log_tail(200)


async def test_exit_when_idle_finishes_a_task_delivered_meanwhile(
    harness: Harness, catalog_path: Path, service_logs: Path
) -> None:
    """A task that arrives during the idle period runs to completion (longer than the idle period itself),
    and only then does the worker exit, cleanly."""
    await harness.script([{"delay_seconds": 4, "content": "finished after a while"}])
    port = free_port()
    settings = harness.settings
    env = worker_env(settings.amqp, settings.db, catalog_path, harness.devllm.base_url, harness.model, port)
    env["TASKYARD_WORKER_EXIT_WHEN_IDLE_SECONDS"] = "3"
    service = Service("worker-idle-task", ["taskyard-worker", "--specialist", "general"], env, service_logs)
    try:
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service)
        message = await harness.submit("Take your time with this one.")
        record = await harness.wait(message.task_id, TaskStatus.COMPLETED, within=60)
        assert record.result is not None and record.result["output"] == "finished after a while"

        async def exited() -> bool:
            return service.proc.poll() is not None

        await eventually(exited, timeout=60, what="the worker to exit once idle again")
    finally:
        code = await asyncio.to_thread(service.stop)
    log = service.log_tail(200)
    assert code == 0, log
    assert log.index(f"task {message.task_id}: completed") < log.index("--exit-when-idle")

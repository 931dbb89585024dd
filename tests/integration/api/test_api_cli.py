"""The console scripts users run: ``taskyard-migrate`` and ``taskyard-api``, as real subprocesses."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import asyncpg
import httpx

from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import BIN, Service
from taskyard_devkit.readiness import wait_http_ok
from taskyard_devkit.service_env import service_env


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / argv[0]), *argv[1:]], env={**os.environ, **env}, capture_output=True, text=True, timeout=60
    )


def test_both_scripts_explain_themselves():
    for script in ("taskyard-api", "taskyard-migrate"):
        done = run([script, "--help"], {})
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"usage: {script}")


async def test_migrate_applies_once_and_reports_an_unreachable_database(database_url: str, test_id: str):
    schema = f"{test_id}_cli"
    env = {"TASKYARD_DB_URL": database_url, "TASKYARD_DB_SCHEMA": schema}
    try:
        first = run(["taskyard-migrate"], env)
        assert first.returncode == 0, first.stderr
        assert f"applied 0001_tasks.sql to schema {schema}" in first.stdout
        again = run(["taskyard-migrate"], env)
        assert again.returncode == 0 and "up to date" in again.stdout
    finally:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    secret = "s3cr3t-pw"
    unreachable = run(
        ["taskyard-migrate"],
        {"TASKYARD_DB_URL": f"postgresql://taskyard:{secret}@127.0.0.1:{free_port()}/db"},
    )
    assert unreachable.returncode == 1
    assert "cannot reach PostgreSQL" in unreachable.stderr
    output = unreachable.stdout + unreachable.stderr
    assert secret not in output and "Traceback" not in output and "postgresql://" not in output


async def test_the_api_serves_from_its_console_script(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path, tmp_path: Path
):
    port = free_port()
    env = {
        **service_env(amqp_settings, db_settings, catalog_path),
        "TASKYARD_API_PORT": "1",  # overridden by --port
        "TASKYARD_API_AUTH_ENABLED": "false",
    }
    service = Service("taskyard-api", ["taskyard-api", "--port", str(port)], env, tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        await wait_http_ok(f"{base}/readyz", service)
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            response = await client.post("/v1/tasks", json={"input": "from a real server"})
            assert response.status_code == 202, response.text
            assert "server" not in response.headers
    finally:
        code = service.stop()
    # uvicorn shuts down gracefully, then re-raises SIGTERM so the exit status still says why it stopped.
    assert code in (0, -signal.SIGTERM), service.log_tail()
    log = service.log_tail(200)
    assert "Application shutdown complete" in log and "Traceback" not in log


def test_the_api_exits_2_on_bad_configuration_and_1_without_its_database(catalog_path: Path, tmp_path: Path):
    secret = "s3cr3t-pw"
    unreachable = f"postgresql://taskyard:{secret}@127.0.0.1:{free_port()}/db"
    port = str(free_port())

    invalid = run(["taskyard-api"], {"TASKYARD_API_PORT": "not-a-port", "TASKYARD_DB_URL": unreachable})
    assert invalid.returncode == 2
    assert "invalid configuration" in invalid.stderr and "port" in invalid.stderr

    broken = run(
        ["taskyard-api", "--port", port],
        {"TASKYARD_CATALOG_PATH": str(tmp_path / "missing.yaml"), "TASKYARD_DB_URL": unreachable},
    )
    assert broken.returncode == 2, broken.stderr
    assert "cannot start" in broken.stderr and "missing.yaml" in broken.stderr

    no_database = run(
        ["taskyard-api", "--port", port],
        {"TASKYARD_CATALOG_PATH": str(catalog_path), "TASKYARD_DB_URL": unreachable},
    )
    assert no_database.returncode == 1, no_database.stderr
    assert "StoreUnavailable" in no_database.stderr
    for done in (invalid, broken, no_database):
        output = done.stdout + done.stderr
        assert secret not in output and "postgresql://" not in output

"""The local runner behind `make up`: starts everything, restarts what dies, stops cleanly on Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import aio_pika
import httpx
import pytest
import yaml

from taskyard_common.catalog import Catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.topology import Topology
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.ports import free_port
from taskyard_devkit.readiness import wait_http_ok
from taskyard_devkit.service_env import service_env
from tests.support.api_client import submit, wait_for_status
from tests.support.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NEW = "translator"


async def test_up_supervises_every_service(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog: Catalog, devllm: DevLlm, tmp_path: Path
):
    api_port, health_base = free_port(), free_port()
    # The runner gives the broker agent health_base and the workers the ports after it.
    health_ports = [health_base + i for i in range(len(catalog.names) + 1)]
    catalog_path = tmp_path / "specialists.yaml"
    document = catalog.model_dump(mode="json", by_alias=True)
    catalog_path.write_text(yaml.safe_dump(document), encoding="utf-8")
    env = {
        **os.environ,
        **service_env(amqp_settings, db_settings, catalog_path),
        "TASKYARD_LLM_BASE_URL": devllm.base_url,
        "TASKYARD_LLM_MODEL": devllm.new_model(),
        "PYTHONUNBUFFERED": "1",
    }
    log_path = tmp_path / "up.log"
    with log_path.open("wb") as log:
        runner = subprocess.Popen(  # noqa: ASYNC220 - started once; the test awaits it in a thread
            [
                sys.executable,
                str(ROOT / "scripts" / "up.py"),
                "--port",
                str(api_port),
                "--health-base-port",
                str(health_base),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
        try:
            base = f"http://127.0.0.1:{api_port}"
            await wait_http_ok(f"{base}/readyz", timeout=90)
            for port in health_ports:
                await wait_http_ok(f"http://127.0.0.1:{port}/readyz", timeout=60)

            # A worker dies as a pod would: the runner starts it again and says so.
            worker_port = health_ports[-1]
            pid = _pid_listening_on(worker_port)
            os.kill(pid, signal.SIGKILL)

            async def restarted() -> bool:
                text = log_path.read_text(errors="replace")
                return "restart #1" in text and _pid_listening_on(worker_port, required=False) not in (
                    None,
                    pid,
                )

            await eventually(restarted, timeout=60, what="the killed worker to be restarted")
            await wait_http_ok(f"http://127.0.0.1:{worker_port}/readyz", timeout=60)

            async with httpx.AsyncClient(base_url=base, timeout=30) as client:
                submitted = await submit(client, {"input": "Summarize: the runner works."})
                task = await wait_for_status(client, submitted["id"], {"completed", "failed"})
                assert task["status"] == "completed"

            # A specialist added to the catalog while it runs gets a worker on the next port; deleted, the
            # worker is stopped.
            added = {"name": NEW, "description": "Translates texts.", "instructions": "Translate."}
            _replace(catalog_path, {**document, "specialists": [*document["specialists"], added]})
            new_port = health_ports[-1] + 1
            await wait_http_ok(f"http://127.0.0.1:{new_port}/readyz", timeout=60)
            _replace(catalog_path, document)

            async def stopped() -> bool:
                said = f"specialist {NEW} deleted: worker-{NEW} stopped" in log_path.read_text(
                    errors="replace"
                )
                return said and _pid_listening_on(new_port, required=False) is None

            await eventually(stopped, timeout=30, what=f"the worker of the deleted {NEW} to stop")
        finally:
            runner.send_signal(signal.SIGINT)
            try:
                code = await asyncio.to_thread(runner.wait, 60)
            except subprocess.TimeoutExpired:
                runner.kill()
                raise
    await _delete_queues(amqp_settings, NEW)
    output = log_path.read_text(errors="replace")
    assert code == 0, output[-3000:]
    assert "stopped" in output
    # The banner names the default tenant's webhook secret and shows a submission with a webhook.
    assert "tenant default signs with whsec_" in output and '"webhook": {"url": "http://127.0.0.1:' in output
    # And a command line example, and the console.
    assert f"TASKYARD_URL=http://127.0.0.1:{api_port} uv run taskyard submit" in output
    assert f"http://127.0.0.1:{api_port}/console/" in output
    for port in [api_port, *health_ports]:
        assert _pid_listening_on(port, required=False) is None, f"something still listens on {port}"


async def _delete_queues(amqp: AmqpSettings, specialist: str) -> None:
    """The added specialist's queues: not in the shared catalog, so the prefix's clean-up misses them."""
    topology = Topology(amqp.prefix)
    connection = await aio_pika.connect(amqp.url.get_secret_value())
    try:
        channel = await connection.channel()
        for queue in (topology.specialist_queue(specialist), topology.quarantine_queue(specialist)):
            await channel.queue_delete(queue)
    finally:
        await connection.close()


def _replace(path: Path, document: dict) -> None:
    """Write the catalog file as an editor's save-and-rename does (never half-written)."""
    staged = path.with_suffix(".tmp")
    staged.write_text(yaml.safe_dump(document), encoding="utf-8")
    os.replace(staged, path)


def _pid_listening_on(port: int, *, required: bool = True) -> int | None:
    """The pid of the process listening on ``port`` (from /proc, no extra tools)."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inode = fields[9]
    if inode is None:
        if required:
            raise AssertionError(f"nothing listens on port {port}")
        return None
    target = f"socket:[{inode}]"
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) == target:
                    return int(proc.name)
        except OSError:
            continue
    return None

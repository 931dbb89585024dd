"""taskyard as real processes: the API, the broker agent and workers of one test or benchmark scenario,
started, killed and restarted at will, all in that caller's queue prefix and database schema."""

from __future__ import annotations

import itertools
import signal
from pathlib import Path

import httpx

from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.devllm import DevLlm
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok
from taskyard_devkit.service_env import service_env

# uvicorn re-raises SIGTERM after its graceful shutdown, so the API's clean exit reads -15.
CLEAN_EXITS = (0, None, -signal.SIGTERM)


class Cluster:
    """The API, the broker agent and workers sharing one queue prefix and schema, and one dev LLM model."""

    def __init__(
        self, amqp: AmqpSettings, db: DbSettings, catalog_path: Path, devllm: DevLlm, log_dir: Path
    ) -> None:
        self.model = devllm.new_model()
        self.env = {
            **service_env(amqp, db, catalog_path),
            "TASKYARD_LLM_BASE_URL": devllm.base_url,
            "TASKYARD_LLM_MODEL": self.model,
            "TASKYARD_LOG_LEVEL": "INFO",
            "TASKYARD_API_AUTH_ENABLED": "false",  # the e2e tests are about the flow; auth has its own tests
        }
        self.log_dir = log_dir
        self.services: list[Service] = []
        self.health_urls: dict[str, str] = {}
        self.api_url = ""
        # How long a started service may take to answer /readyz (a busy machine may need longer).
        self.ready_timeout = 60.0
        self._numbers = itertools.count(1)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> Service:
        service = Service(f"{name}-{next(self._numbers)}", argv, {**self.env, **env}, self.log_dir)
        self.services.append(service)
        return service

    async def start_api(self, **env: str) -> Service:
        port = free_port()
        service = self._spawn("api", ["taskyard-api", "--port", str(port)], env)
        self.api_url = f"http://127.0.0.1:{port}"
        await wait_http_ok(f"{self.api_url}/readyz", service, timeout=self.ready_timeout)
        return service

    async def start_broker_agent(self, **env: str) -> Service:
        return await self._start_with_health("broker-agent", ["taskyard-broker-agent"], env)

    async def start_worker(self, specialist: str, **env: str) -> Service:
        return await self._start_with_health(
            f"worker-{specialist}", ["taskyard-worker", "--specialist", specialist], env
        )

    async def _start_with_health(self, name: str, argv: list[str], env: dict[str, str]) -> Service:
        port = free_port()
        service = self._spawn(name, argv, {**env, "TASKYARD_HEALTH_PORT": str(port)})
        self.health_urls[service.name] = f"http://127.0.0.1:{port}"
        await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service, timeout=self.ready_timeout)
        return service

    async def metrics(self, service: Service) -> str:
        url = (
            f"{self.api_url}/metrics"
            if service.name.startswith("api")
            else f"{self.health_urls[service.name]}/metrics"
        )
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.get(url)
            response.raise_for_status()
            return response.text

    def kill(self, service: Service) -> None:
        service.proc.kill()
        service.proc.wait(10)

    def logs(self) -> str:
        return "\n\n".join(f"--- {s.name} ---\n{s.log_tail(40)}" for s in self.services)

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM everything still running; returns the exit codes that were not clean."""
        unclean: dict[str, int | None] = {}
        for service in self.services:
            was_running = service.proc.poll() is None
            code = service.stop()
            if was_running and code not in CLEAN_EXITS:
                unclean[service.name] = code
        return unclean

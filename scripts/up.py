"""Run the whole of taskyard locally: migrations, then the API, the broker agent and one worker per specialist.

Like Kubernetes would, it restarts a service process that dies (with backoff) and logs each restart.
Ctrl-C (or SIGTERM) stops everything cleanly. With no LLM endpoint configured it starts the bundled
development model server, which answers deterministically and is NOT a real LLM.

Run through ``make up``, which first makes sure uv, RabbitMQ and PostgreSQL are there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
COLORS = ["36", "32", "33", "35", "34", "96", "92", "93", "95", "94"]
MAX_BACKOFF = 30.0
STABLE_AFTER = 60.0  # a process that ran this long starts again from the smallest backoff


def say(message: str) -> None:
    print(f"\033[1mtaskyard up:\033[0m {message}", flush=True)


def load_local_env(path: Path) -> None:
    """Values from .taskyard/local.env (written by bootstrap) unless the environment already has them."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            os.environ.setdefault(key.strip(), value.strip())


def port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class Service:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    color: str = "0"
    process: asyncio.subprocess.Process | None = None
    restarts: int = 0


class Supervisor:
    def __init__(self) -> None:
        self.services: list[Service] = []
        self.stopping = asyncio.Event()
        self.width = 12

    def add(self, name: str, argv: list[str], **env: str) -> None:
        self.services.append(Service(name, argv, env, COLORS[len(self.services) % len(COLORS)]))
        self.width = max(self.width, len(name))

    async def _pipe(self, service: Service, stream: asyncio.StreamReader) -> None:
        prefix = f"\033[{service.color}m{service.name:<{self.width}}\033[0m | "
        while line := await stream.readline():
            sys.stdout.write(prefix + line.decode(errors="replace"))
            sys.stdout.flush()

    async def supervise(self, service: Service) -> None:
        backoff = 1.0
        while not self.stopping.is_set():
            started = time.monotonic()
            service.process = await asyncio.create_subprocess_exec(
                str(BIN / service.argv[0]),
                *service.argv[1:],
                env={**os.environ, **service.env, "PYTHONUNBUFFERED": "1"},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us only; we stop the children in order
            )
            assert service.process.stdout is not None
            await self._pipe(service, service.process.stdout)
            code = await service.process.wait()
            if self.stopping.is_set():
                return
            if time.monotonic() - started > STABLE_AFTER:
                backoff = 1.0
            service.restarts += 1
            say(f"{service.name} exited with code {code}; restart #{service.restarts} in {backoff:.0f} s")
            try:
                await asyncio.wait_for(self.stopping.wait(), backoff)
                return
            except TimeoutError:
                backoff = min(backoff * 2, MAX_BACKOFF)

    async def stop(self, grace: float = 20.0) -> None:
        self.stopping.set()
        running = [s.process for s in self.services if s.process and s.process.returncode is None]
        for process in running:
            process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), grace)
        except TimeoutError:
            for process in running:
                if process.returncode is None:
                    process.kill()


async def run_once(argv: list[str]) -> int:
    process = await asyncio.create_subprocess_exec(str(BIN / argv[0]), *argv[1:])
    return await process.wait()


def _answers_200(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


async def wait_ready(url: str, timeout: float, stop: asyncio.Event) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set():
        if await asyncio.to_thread(_answers_200, url):
            return True
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass
    return False


def llm_configured() -> bool:
    names = ("TASKYARD_LLM_BASE_URL", "OPENAI_BASE_URL", "TASKYARD_LLM_API_KEY", "OPENAI_API_KEY")
    return any(os.environ.get(n) for n in names)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("TASKYARD_API_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("TASKYARD_API_PORT", "8000")))
    parser.add_argument(
        "--devllm-port", type=int, default=int(os.environ.get("TASKYARD_DEVLLM_PORT", "8100"))
    )
    parser.add_argument(
        "--health-base-port",
        type=int,
        default=9100,
        help="broker agent on this port, workers on the following ones",
    )
    args = parser.parse_args()

    load_local_env(ROOT / ".taskyard" / "local.env")
    os.environ.setdefault("TASKYARD_CATALOG_PATH", str(ROOT / "specialists.yaml"))
    # Local development: no API keys unless asked for (TASKYARD_API_AUTH_ENABLED=true and taskyard-admin).
    os.environ.setdefault("TASKYARD_API_AUTH_ENABLED", "false")
    if os.environ["TASKYARD_API_AUTH_ENABLED"].strip().lower() in ("false", "0", "no", "off"):
        say("WARNING: API authentication is disabled (TASKYARD_API_AUTH_ENABLED=false): local use only")
    from taskyard_common.catalog import CatalogError, load_catalog

    try:
        catalog = load_catalog(Path(os.environ["TASKYARD_CATALOG_PATH"]))
    except CatalogError as exc:
        say(str(exc))
        return 2
    if not port_free(args.host, args.port):
        say(f"port {args.port} on {args.host} is in use: stop what uses it or pass --port")
        return 2

    say("applying database migrations")
    if await run_once(["taskyard-migrate"]) != 0:
        say("migrations failed: see the message above")
        return 1

    supervisor = Supervisor()
    if not llm_configured():
        say(
            "no LLM endpoint configured (OPENAI_API_KEY / OPENAI_BASE_URL / TASKYARD_LLM_*): starting the "
            "bundled development model server. Its replies are deterministic and NOT from a real LLM."
        )
        supervisor.add("devllm", ["taskyard-devllm", "--port", str(args.devllm_port)])
        os.environ["TASKYARD_LLM_BASE_URL"] = f"http://127.0.0.1:{args.devllm_port}/v1"
        os.environ.setdefault("TASKYARD_LLM_MODEL", "taskyard-dev")
    supervisor.add("api", ["taskyard-api", "--host", args.host, "--port", str(args.port)])
    supervisor.add("broker-agent", ["taskyard-broker-agent"], TASKYARD_HEALTH_PORT=str(args.health_base_port))
    for i, name in enumerate(catalog.names, start=1):
        supervisor.add(
            f"worker-{name}",
            ["taskyard-worker", "--specialist", name],
            TASKYARD_HEALTH_PORT=str(args.health_base_port + i),
        )

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)
    tasks = [asyncio.create_task(supervisor.supervise(s)) for s in supervisor.services]

    base = f"http://{args.host}:{args.port}"
    if await wait_ready(f"{base}/readyz", 60, stop_requested):
        print(
            f"""
  taskyard is up. Ctrl-C stops everything.

    API        {base}/v1/tasks       (OpenAPI: {base}/docs)
    health     {base}/readyz   metrics: {base}/metrics
    broker     http://127.0.0.1:{args.health_base_port}/metrics
    workers    {", ".join(f"{n}: :{args.health_base_port + i}" for i, n in enumerate(catalog.names, 1))}

  Try it:
    curl -s -X POST {base}/v1/tasks -H 'Content-Type: application/json' \\
         -d '{{"input": "Summarize: taskyard runs long AI agent tasks asynchronously."}}'
    curl -s {base}/v1/tasks/<id>
""",
            flush=True,
        )
    elif not stop_requested.is_set():
        say("the API did not become ready within 60 s; the logs above say why (services keep retrying)")

    await stop_requested.wait()
    say("stopping")
    await supervisor.stop()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

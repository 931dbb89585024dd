"""Run the whole of taskyard locally: migrations, then the API, the broker agent and one worker per specialist.

Like Kubernetes would, it restarts a service process that dies (with backoff) and logs each restart.
Ctrl-C (or SIGTERM) stops everything cleanly. With no LLM endpoint configured it runs a real small model on
this machine (``--llm local``, the default: scripts/local_model.py builds and fetches it once), or the
bundled development model server (``--llm dev``), which answers deterministically and is NOT a real LLM;
it falls back to the latter, saying why, when the local model cannot be prepared.

Run through ``make up`` (``make up LLM=dev``), which first makes sure uv, RabbitMQ and PostgreSQL are there.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from taskyard_devkit.local_model.layout import Layout, configured_model_path
from taskyard_devkit.local_model.serving import MEMORY_NEEDED, MODEL_ALIAS, memory_available, server_command
from taskyard_devkit.local_model.weights import MODEL_NAME

if TYPE_CHECKING:
    from taskyard_common.catalog import Catalog

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
    started: bool = False
    retired: bool = False  # stopped for good while the others run on
    stop_last: bool = False  # a model server: the others' calls in flight may still need it while they stop


class Supervisor:
    def __init__(self) -> None:
        self.services: list[Service] = []
        self.stopping = asyncio.Event()
        self.width = 12
        self.tasks: list[asyncio.Task[None]] = []

    def add(self, name: str, argv: list[str], *, stop_last: bool = False, **env: str) -> Service:
        service = Service(name, argv, env, COLORS[len(self.services) % len(COLORS)], stop_last=stop_last)
        self.services.append(service)
        self.width = max(self.width, len(name))
        return service

    def start(self, service: Service) -> None:
        service.started = True
        self.tasks.append(asyncio.create_task(self.supervise(service)))

    def start_all(self) -> None:
        """Start every service not started yet (a model server may have been started, and waited for,
        before the others)."""
        for service in self.services:
            if not service.started:
                self.start(service)

    async def retire(self, service: Service, grace: float = 10.0) -> None:
        """Stop one service for good (no restart) while the others keep running."""
        service.retired = True
        process = service.process
        if process is not None and process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), grace)
            except TimeoutError:
                process.kill()

    async def _pipe(self, service: Service, stream: asyncio.StreamReader) -> None:
        prefix = f"\033[{service.color}m{service.name:<{self.width}}\033[0m | "
        while line := await stream.readline():
            sys.stdout.write(prefix + line.decode(errors="replace"))
            sys.stdout.flush()

    async def supervise(self, service: Service) -> None:
        backoff = 1.0
        while not self.stopping.is_set() and not service.retired:
            started = time.monotonic()
            service.process = await asyncio.create_subprocess_exec(
                str(BIN / service.argv[0]),  # an absolute argv[0] (the model server's python) stays as is
                *service.argv[1:],
                env={**os.environ, **service.env, "PYTHONUNBUFFERED": "1"},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches us only; we stop the children in order
            )
            assert service.process.stdout is not None
            await self._pipe(service, service.process.stdout)
            code = await service.process.wait()
            if self.stopping.is_set() or service.retired:
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
        await self._stop([s for s in self.services if not s.stop_last], grace)
        await self._stop([s for s in self.services if s.stop_last], grace)

    async def _stop(self, services: list[Service], grace: float) -> None:
        running = [s.process for s in services if s.process and s.process.returncode is None]
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


async def wait_ready(
    url: str, timeout: float, stop: asyncio.Event, failed: Callable[[], bool] = lambda: False
) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop.is_set() and not failed():
        if await asyncio.to_thread(_answers_200, url):
            return True
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass
    return False


ENDPOINT_VARIABLES = ("TASKYARD_LLM_BASE_URL", "OPENAI_BASE_URL", "TASKYARD_LLM_API_KEY", "OPENAI_API_KEY")


def llm_configured() -> bool:
    return any(os.environ.get(n) for n in ENDPOINT_VARIABLES)


def _cannot_run_local_model(why: str) -> None:
    say(
        f"WARNING: the local model cannot run: {why}. Falling back to the development model server. "
        "Fix that and run `make up` again (finished steps are kept), or `make up LLM=dev` to skip it."
    )


async def _until_done_or_stopped(process: asyncio.subprocess.Process, stop: asyncio.Event) -> int | None:
    """The process's exit code, or None once a stop was asked for (the process is then terminated)."""
    stopped = asyncio.create_task(stop.wait())
    exited = asyncio.create_task(process.wait())
    await asyncio.wait({stopped, exited}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if exited.done():
        return exited.result()
    process.terminate()
    await process.wait()
    return None


async def start_local_model(supervisor: Supervisor, port: int, stop: asyncio.Event) -> str | None:
    """Prepare (the first time: build the runtime, fetch the weights) and start the local model server.

    Returns the banner's line for it, or None when it cannot run (after saying why): the caller then falls
    back to the development model server.
    """
    say(
        f"no LLM endpoint configured ({' / '.join(ENDPOINT_VARIABLES)}): running a real model on this "
        f"machine's CPU, {MODEL_NAME}. `make up LLM=dev` runs the fast scripted development "
        "server instead."
    )
    memory = memory_available()
    if memory is not None and memory < MEMORY_NEEDED:
        _cannot_run_local_model(f"{memory / 1e9:.1f} GB of memory is available, the model needs about 2.4 GB")
        return None
    if not port_free("127.0.0.1", port):
        _cannot_run_local_model(f"port {port} is in use (TASKYARD_LOCAL_MODEL_PORT or --local-model-port)")
        return None
    # A child process: it prints its own progress, and Ctrl-C stops it cleanly (a later run resumes).
    prepare = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "scripts" / "local_model.py"), "prepare"
    )
    code = await _until_done_or_stopped(prepare, stop)
    if code is None:
        return None
    if code != 0:
        _cannot_run_local_model("it could not be prepared (the message above says why)")
        return None

    model = configured_model_path() or Layout().model
    service = supervisor.add("llm", server_command(model, port), stop_last=True)
    supervisor.start(service)
    say(f"loading {model.name} (about 10 s)")
    started = time.monotonic()
    base_url = f"http://127.0.0.1:{port}/v1"
    if not await wait_ready(f"{base_url}/models", 300, stop, failed=lambda: service.restarts > 0):
        await supervisor.retire(service)
        if not stop.is_set():
            _cannot_run_local_model("its server did not start (its log lines above say why)")
        return None
    say(f"model loaded in {time.monotonic() - started:.0f} s")
    os.environ["TASKYARD_LLM_BASE_URL"] = base_url
    os.environ["TASKYARD_LLM_MODEL"] = MODEL_ALIAS
    # One CPU model answers every call in turn, so a routing call may wait behind a worker's answer: longer
    # limits than a hosted endpoint needs (the environment's own values win).
    os.environ.setdefault("TASKYARD_LLM_ROUTING_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("TASKYARD_LLM_TIMEOUT_SECONDS", "300")
    return f"{MODEL_NAME}, local on {base_url} (CPU: expect seconds per call)"


async def warm_up(base_url: str, model: str, catalog: Catalog) -> None:
    """One routing call before the first task: the server keeps the last prompt evaluated and reuses its
    longest common prefix, so the first task's routing then finds the catalog prompt done (cold: ~12 s on
    2 cores; warm: a second or two). Best effort: the services work without it."""
    try:
        import openai

        from taskyard_broker_agent.catalog import RoutingPrompt

        prompt = RoutingPrompt.from_catalog(catalog)
        started = time.monotonic()
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key="unused", timeout=600, max_retries=0
        ) as client:
            await client.chat.completions.create(
                model=model,
                messages=prompt.messages("warm-up"),  # type: ignore[arg-type]
                tools=[prompt.tool],  # type: ignore[list-item]
                tool_choice=prompt.tool_choice,  # type: ignore[arg-type]
                temperature=0,
                max_tokens=1,  # the prompt is the slow part; the answer is thrown away
            )
    except Exception as exc:
        say(f"model warm-up skipped ({type(exc).__name__}): the first routing call will take longer")
        return
    say(f"model warmed up with the routing prompt in {time.monotonic() - started:.0f} s")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default=os.environ.get("TASKYARD_API_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("TASKYARD_API_PORT", "8000")))
    parser.add_argument(
        "--llm",
        choices=("local", "dev"),
        default=os.environ.get("TASKYARD_UP_LLM", "local"),
        help="with no LLM endpoint configured: a real local model, or the scripted development server "
        "(fast, NOT a real LLM)",
    )
    parser.add_argument(
        "--local-model-port", type=int, default=int(os.environ.get("TASKYARD_LOCAL_MODEL_PORT", "8200"))
    )
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

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)

    supervisor = Supervisor()
    background: list[asyncio.Task[None]] = []
    llm_line = f"the configured endpoint ({os.environ.get('TASKYARD_LLM_MODEL', 'gpt-4o-mini')})"
    if not llm_configured():
        local = None
        if args.llm == "local":
            local = await start_local_model(supervisor, args.local_model_port, stop_requested)
            if local is not None:
                llm_line = local
                background.append(
                    asyncio.create_task(warm_up(os.environ["TASKYARD_LLM_BASE_URL"], MODEL_ALIAS, catalog))
                )
            elif stop_requested.is_set():
                await supervisor.stop()
                say("stopped")
                return 130
        if local is None:
            why = (
                "no LLM endpoint configured (OPENAI_API_KEY / OPENAI_BASE_URL / TASKYARD_LLM_*)"
                if args.llm == "dev"
                else "instead of the local model"
            )
            say(
                f"{why}: starting the bundled development model server. Its replies are deterministic and "
                "NOT from a real LLM."
            )
            supervisor.add("devllm", ["taskyard-devllm", "--port", str(args.devllm_port)], stop_last=True)
            os.environ["TASKYARD_LLM_BASE_URL"] = f"http://127.0.0.1:{args.devllm_port}/v1"
            os.environ.setdefault("TASKYARD_LLM_MODEL", "taskyard-dev")
            llm_line = f"development model server on :{args.devllm_port} (deterministic, NOT a real LLM)"
    supervisor.add("api", ["taskyard-api", "--host", args.host, "--port", str(args.port)])
    supervisor.add("broker-agent", ["taskyard-broker-agent"], TASKYARD_HEALTH_PORT=str(args.health_base_port))
    for i, name in enumerate(catalog.names, start=1):
        supervisor.add(
            f"worker-{name}",
            ["taskyard-worker", "--specialist", name],
            TASKYARD_HEALTH_PORT=str(args.health_base_port + i),
        )
    supervisor.start_all()

    base = f"http://{args.host}:{args.port}"
    if await wait_ready(f"{base}/readyz", 60, stop_requested):
        print(
            f"""
  taskyard is up. Ctrl-C stops everything.

    API        {base}/v1/tasks       (OpenAPI: {base}/docs)
    health     {base}/readyz   metrics: {base}/metrics
    broker     http://127.0.0.1:{args.health_base_port}/metrics
    workers    {", ".join(f"{n}: :{args.health_base_port + i}" for i, n in enumerate(catalog.names, 1))}
    LLM        {llm_line}

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
    tasks = [*supervisor.tasks, *background]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    say("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

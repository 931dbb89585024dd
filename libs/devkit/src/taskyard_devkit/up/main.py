"""Run the whole of taskyard locally: migrations, then the API, the broker agent and one worker per specialist.

Like Kubernetes would, it restarts a service process that dies (with backoff) and logs each restart. It
follows the catalog (``TASKYARD_CATALOG_SOURCE``, the file by default) while it runs: a specialist added
gets a worker process, a deleted one's worker is stopped (``up.workers``).
Ctrl-C (or SIGTERM) stops everything cleanly. With no LLM endpoint configured it runs a real small model on
this machine (``--llm local``, the default: taskyard_devkit.local_model builds and fetches it once), or the
bundled development model server (``--llm dev``), which answers deterministically and is NOT a real LLM;
it falls back to the latter, saying why, when the local model cannot be prepared.

Run through ``make up`` (``make up LLM=dev``), which first makes sure uv, RabbitMQ and PostgreSQL are there.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from taskyard_devkit.checkout import ROOT, load_local_env
from taskyard_devkit.ports import port_free
from taskyard_devkit.process import BIN
from taskyard_devkit.readiness import wait_ready
from taskyard_devkit.supervisor import Supervisor
from taskyard_devkit.up.llm import choose_llm
from taskyard_devkit.up.say import say
from taskyard_devkit.up.workers import Workers

if TYPE_CHECKING:
    from taskyard_common.catalog import Catalog


def parse_args() -> argparse.Namespace:
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
    return parser.parse_args()


def load_settings() -> Catalog | None:
    """The environment the services get (bootstrap's local.env, local defaults) and the catalog they
    serve; None, after saying why, when the catalog is unusable."""
    load_local_env()
    os.environ.setdefault("TASKYARD_CATALOG_PATH", str(ROOT / "specialists.yaml"))
    # Local development: no API keys unless asked for (TASKYARD_API_AUTH_ENABLED=true and taskyard-admin).
    os.environ.setdefault("TASKYARD_API_AUTH_ENABLED", "false")
    # A webhook receiver on this machine (127.0.0.1) must work; everywhere else loopback is refused.
    os.environ.setdefault("TASKYARD_WEBHOOK_ALLOW_LOOPBACK", "true")
    if os.environ["TASKYARD_API_AUTH_ENABLED"].strip().lower() in ("false", "0", "no", "off"):
        say("WARNING: API authentication is disabled (TASKYARD_API_AUTH_ENABLED=false): local use only")
    from taskyard_common.catalog import CatalogError, load_catalog

    try:
        return load_catalog(Path(os.environ["TASKYARD_CATALOG_PATH"]))
    except CatalogError as exc:
        say(str(exc))
        return None


async def run_once(argv: list[str]) -> int:
    process = await asyncio.create_subprocess_exec(str(BIN / argv[0]), *argv[1:])
    return await process.wait()


async def webhook_secret(tenant: str = "default") -> str | None:
    """The tenant's webhook signing secret (``taskyard-admin webhooks secret``, which creates it), or None
    when it cannot be read (its error went to the terminal)."""
    process = await asyncio.create_subprocess_exec(
        str(BIN / "taskyard-admin"), "webhooks", "secret", "--tenant", tenant, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return out.decode().strip() if process.returncode == 0 else None


def add_services(supervisor: Supervisor, args: argparse.Namespace, catalog: Catalog) -> Workers:
    """The API, the broker agent and one worker per specialist, each with its own health port."""
    supervisor.add("api", ["taskyard-api", "--host", args.host, "--port", str(args.port)])
    supervisor.add("broker-agent", ["taskyard-broker-agent"], TASKYARD_HEALTH_PORT=str(args.health_base_port))
    workers = Workers(supervisor, args.health_base_port)
    for name in catalog.names:
        workers.add(name)
    return workers


def banner(args: argparse.Namespace, workers: Workers, llm_line: str, secret: str | None = None) -> str:
    base = f"http://{args.host}:{args.port}"
    loopback = os.environ.get("TASKYARD_WEBHOOK_ALLOW_LOOPBACK", "").strip().lower() in (
        "true",
        "1",
        "yes",
        "on",
    )
    where = "loopback receivers allowed here" if loopback else "TASKYARD_WEBHOOK_ALLOW_LOOPBACK is off"
    hooks = (
        f"""
  Webhooks ({where}): tenant default signs with {secret}
    curl -s -X POST {base}/v1/tasks -H 'Content-Type: application/json' -d '{{"input": "Summarize: webhooks work.", "webhook": {{"url": "http://127.0.0.1:9999/hook"}}}}'
"""
        if secret
        else ""
    )
    # The command line comes with the dev environment (clients/python); it reads the URL from TASKYARD_URL.
    cli = "uv run taskyard" if base == "http://127.0.0.1:8000" else f"TASKYARD_URL={base} uv run taskyard"
    return f"""
  taskyard is up. Ctrl-C stops everything.

    API        {base}/v1/tasks       (OpenAPI: {base}/docs)
    console    {base}/console/
    health     {base}/readyz   metrics: {base}/metrics
    broker     http://127.0.0.1:{args.health_base_port}/metrics
    workers    {", ".join(f"{n}: :{port}" for n, port in workers.ports.items())}
    LLM        {llm_line}

  Try it:
    {cli} submit "Summarize: taskyard runs long AI agent tasks asynchronously." --wait
    {cli} list     (also: status, result, watch, cancel, dead-letters, specialists; --help)
    curl -s -X POST {base}/v1/tasks -H 'Content-Type: application/json' \\
         -d '{{"input": "Summarize: taskyard runs long AI agent tasks asynchronously."}}'
    curl -s {base}/v1/tasks/<id>
{hooks}"""


async def main() -> int:
    args = parse_args()
    catalog = load_settings()
    if catalog is None:
        return 2
    if not port_free(args.host, args.port):
        say(f"port {args.port} on {args.host} is in use: stop what uses it or pass --port")
        return 2

    say("applying database migrations")
    if await run_once(["taskyard-migrate"]) != 0:
        say("migrations failed: see the message above")
        return 1
    secret = await webhook_secret()

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop_requested.set)

    supervisor = Supervisor(say)
    stack = AsyncExitStack()
    background: list[asyncio.Task[None]] = []
    llm_line = await choose_llm(
        args.llm,
        local_model_port=args.local_model_port,
        devllm_port=args.devllm_port,
        supervisor=supervisor,
        stop=stop_requested,
        catalog=catalog,
        background=background,
    )
    if llm_line is None:  # Ctrl-C while the local model was being prepared or loaded
        await supervisor.stop()
        say("stopped")
        return 130
    from taskyard_common.catalog import CatalogError
    from taskyard_common.catalog_sources import CatalogUnavailable, open_live_catalog
    from taskyard_common.settings import CatalogSettings, DbSettings

    try:
        # The settings the services read (from the environment load_settings prepared).
        live = await stack.enter_async_context(open_live_catalog(CatalogSettings(), DbSettings()))
    except (CatalogError, CatalogUnavailable) as exc:
        say(f"cannot read the catalog: {exc}")
        await supervisor.stop()
        return 2
    workers = add_services(supervisor, args, live.catalog)
    live.on_change(workers.follow)
    supervisor.start_all()

    if await wait_ready(f"http://{args.host}:{args.port}/readyz", 60, stop_requested):
        print(banner(args, workers, llm_line, secret), flush=True)
    elif not stop_requested.is_set():
        say("the API did not become ready within 60 s; the logs above say why (services keep retrying)")

    await stop_requested.wait()
    await stack.aclose()  # stop following the catalog first: no worker starts while the others stop
    say("stopping")
    await supervisor.stop()
    tasks = [*supervisor.tasks, *background]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    say("stopped")
    return 0

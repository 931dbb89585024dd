"""taskyard as real processes for the evaluation: the API, the broker agent and one worker per specialist
(``taskyard_devkit.cluster``, as the tests and benchmarks start them) in a queue prefix and database schema
of their own, talking to the chosen OpenAI-compatible endpoint, with the fixture site allowed to the workers.

The model: any endpoint (``endpoint``: base URL and model; the key from ``TASKYARD_LLM_API_KEY`` or
``OPENAI_API_KEY`` in the environment, never on the command line), the local model ``make up`` runs
(``local``: started here, as `make test-local-model` starts it), or the scripted development model server
(``dev``: proves the harness; its answers are not a model's and its figures mean nothing).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.infra import delete_amqp
from evals.agent.site import FixtureSite
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store.migrate import migrate
from taskyard_common.topology import Topology
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm, start_devllm
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok

LLM_MODES = ("endpoint", "local", "dev")


@dataclass(frozen=True)
class Llm:
    mode: str
    base_url: str
    model: str
    devllm: DevLlm | None = None  # the dev server (mode dev), to script it

    def env(self, timeout_s: float) -> dict[str, str]:
        """The services' model settings; the key stays in the inherited environment."""
        return {
            "TASKYARD_LLM_BASE_URL": self.base_url,
            "TASKYARD_LLM_MODEL": self.model,
            "TASKYARD_LLM_TIMEOUT_SECONDS": str(timeout_s),
            "TASKYARD_LLM_ROUTING_TIMEOUT_SECONDS": str(timeout_s),
        }


@asynccontextmanager
async def model_server(
    mode: str, log_dir: Path, *, base_url: str | None = None, model: str | None = None
) -> AsyncIterator[Llm]:
    """The model the services will call, started here unless it is an ``endpoint``."""
    if mode == "endpoint":
        if not base_url:
            raise SystemExit("--llm endpoint needs --base-url (or TASKYARD_LLM_BASE_URL)")
        yield Llm(mode, base_url, model or os.environ.get("TASKYARD_LLM_MODEL") or "gpt-4o-mini")
    elif mode == "dev":
        service, devllm = start_devllm(log_dir)
        try:
            await wait_http_ok(devllm.health_url, service, timeout=30)
            yield Llm(mode, devllm.base_url, model or devllm.new_model(), devllm)
        finally:
            service.stop()
    elif mode == "local":
        with _local_model(log_dir) as (url, alias):
            yield Llm(mode, url, alias)
    else:
        raise ValueError(f"unknown LLM mode {mode!r}")


@contextmanager
def _local_model(log_dir: Path) -> Iterator[tuple[str, str]]:
    """The local model server as `make up` runs it; fails plainly when the model is not prepared."""
    from taskyard_devkit.local_model import runtime, serving, weights
    from taskyard_devkit.local_model.layout import Layout, configured_model_path
    from taskyard_devkit.readiness import wait_http_ok_sync

    layout = Layout()
    if not runtime.runtime_ready(layout) or (
        configured_model_path() is None and not weights.model_verified(layout)
    ):
        raise SystemExit("the local model is not prepared: run `make local-model` first")
    port = free_port()
    service = Service(
        "local-model", serving.server_command(configured_model_path() or layout.model, port), {}, log_dir
    )
    try:
        started = time.monotonic()
        wait_http_ok_sync(f"http://127.0.0.1:{port}/v1/models", service, timeout=300)
        print(f"local model loaded in {time.monotonic() - started:.0f} s")
        yield f"http://127.0.0.1:{port}/v1", serving.MODEL_ALIAS
    finally:
        service.stop()


@asynccontextmanager
async def namespace(
    amqp_url: str, db_url: str, specialists: list[str]
) -> AsyncIterator[tuple[AmqpSettings, DbSettings]]:
    """A queue prefix and a migrated schema of the run's own, both removed afterwards."""
    run = uuid.uuid4().hex[:8]
    amqp = AmqpSettings(url=amqp_url, prefix=f"evalagent{run}", delivery_limit=5, max_length=100_000)
    schema = f"evalagent_{run}"
    conn = await asyncpg.connect(db_url)
    try:
        await migrate(conn, schema)
    finally:
        await conn.close()
    try:
        yield amqp, DbSettings(url=db_url, db_schema=schema)
    finally:
        topology = Topology(amqp.prefix)
        await delete_amqp(amqp_url, topology.all_queue_names(specialists), topology.all_exchange_names())
        conn = await asyncpg.connect(db_url)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()


async def start_services(
    cluster: Cluster, llm: Llm, site: FixtureSite, specialists: list[str], *, timeout_s: float
) -> None:
    """The API, the broker agent and a worker per specialist, on ``llm``, the workers allowed the site."""
    cluster.env.update(llm.env(timeout_s))
    # The harness measures the work, not the API's limits.
    cluster.env.update(
        {
            "TASKYARD_API_RATE_LIMIT_PER_SECOND": "0",
            "TASKYARD_API_RATE_LIMIT_BURST": "0",
            "TASKYARD_API_READ_RATE_LIMIT_PER_SECOND": "0",
        }
    )
    # Started together: each spends its start-up importing and connecting, not waiting on the others (on a
    # crowded machine that is slower for each, hence the longer readiness limit).
    cluster.ready_timeout = max(cluster.ready_timeout, 180.0)
    await asyncio.gather(
        cluster.start_api(),
        cluster.start_broker_agent(),
        *(cluster.start_worker(name, **site.worker_env()) for name in specialists),
    )


@asynccontextmanager
async def running_taskyard(
    llm: Llm, site: FixtureSite, catalog_path: Path, specialists: list[str], log_dir: Path,
    *, amqp_url: str, db_url: str, timeout_s: float,
) -> AsyncIterator[Cluster]:  # fmt: skip
    """Everything of one run, started; stopped and removed at the end (logs kept in ``log_dir``)."""
    async with AsyncExitStack() as stack:
        amqp, db = await stack.enter_async_context(namespace(amqp_url, db_url, specialists))
        # The cluster is built around a dev model server; its model settings are replaced by ``llm``'s.
        cluster = Cluster(amqp, db, catalog_path, llm.devllm or DevLlm(llm.base_url), log_dir)
        stack.callback(cluster.stop_all)
        await start_services(cluster, llm, site, specialists, timeout_s=timeout_s)
        yield cluster

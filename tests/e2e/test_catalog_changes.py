"""End to end: a specialist added while everything runs, through each catalog source (the file, the
database through ``PUT /v1/specialists/{name}``, Specialist resources on kmock's emulated API server).

Each test starts the API, the broker agent and the fallback's worker, adds a specialist, and checks that it
is listed by ``GET /v1/specialists`` within 5 s, that a request like its examples is LLM-routed to it (the
development model picks by word overlap with the routing prompt, which must now describe it), that an
explicit task completes on its worker, and that changed ``instructions`` show in the next task's answer (the
development model echoes the start of the system prompt), while no process was restarted (same pids, all
running).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aio_pika
import httpx
import kmock as kmock_lib
import pytest
import yaml

from taskyard_common.catalog import Catalog
from taskyard_common.settings import AmqpSettings
from taskyard_common.topology import Topology
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.process import Service
from tests.support.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(120)]

NEW = "translator"
ENTRY: dict[str, Any] = {
    "description": "Translates texts from one language into another: English, German, French, Spanish.",
    "keywords": ["translate", "translation", "german", "french"],
    "examples": ["Translate this paragraph into German", "Translate the menu into French"],
    "instructions": "Marker-one. You translate the user's text faithfully.",
    "max_steps": 2,
    "concurrency": 2,
}
ROUTED = "Please translate this short paragraph into German: the weather is nice today."
NS = "ns1"
SPECIALISTS = "taskyard.dev/v1alpha1/specialists"
URL = f"/apis/taskyard.dev/v1alpha1/namespaces/{NS}/specialists"

Change = Callable[[dict[str, Any]], Awaitable[None]]


@pytest.fixture
async def new_queues(amqp_settings: AmqpSettings) -> AsyncIterator[None]:
    """The new specialist's queues are not in the shared catalog: the prefix's clean-up misses them."""
    yield
    topology = Topology(amqp_settings.prefix)
    connection = await aio_pika.connect(amqp_settings.url.get_secret_value())
    try:
        channel = await connection.channel()
        for queue in (topology.specialist_queue(NEW), topology.quarantine_queue(NEW)):
            await channel.queue_delete(queue)
    finally:
        await connection.close()


async def _task(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/tasks", json=body)
    assert response.status_code == 202, response.text
    task_id = response.json()["id"]
    document: dict[str, Any] = {}

    async def finished() -> bool:
        nonlocal document
        document = (await client.get(f"/v1/tasks/{task_id}")).json()
        return document["status"] in ("completed", "failed", "dead_lettered", "cancelled")

    await eventually(finished, timeout=30, what=f"task {task_id} to finish")
    assert document["status"] == "completed", document
    return document


def _ready_count(worker: Service) -> int:
    """The main child's starts (a supervisor's quarantine children log "ready" too): the lines of the owner
    id with the main child's pid (``<host>:<pid>:<hex>``)."""
    text = worker.log_path.read_text(errors="replace")
    main = re.search(r"main worker child started: pid (\d+)", text)
    owner = f":{main.group(1)}:" if main else ""
    return sum(1 for line in text.splitlines() if f"for {NEW!r} ready" in line and owner in line)


async def exercise(cluster: Cluster, put: Change, env: dict[str, str]) -> None:
    """Add ``NEW`` with ``put``, use it, change its instructions with ``put``; nothing restarts."""
    # Started together (their starts are independent): the e2e budget is mostly process start-up.
    _, broker, general = await asyncio.gather(
        cluster.start_api(**env), cluster.start_broker_agent(**env), cluster.start_worker("general", **env)
    )
    before = {s.name: s.proc.pid for s in cluster.services}
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:

        async def listed() -> bool:
            items = (await client.get("/v1/specialists")).json()["items"]
            return NEW in {item["name"] for item in items}

        assert not await listed()
        await put(ENTRY)
        await eventually(listed, timeout=5, what=f"{NEW} in GET /v1/specialists")
        worker = await cluster.start_worker(NEW, **env)

        routed = await _task(client, {"input": ROUTED})
        assert (routed["routing"]["method"], routed["specialist"]) == ("llm", NEW), routed["routing"]
        explicit = await _task(client, {"input": "Good morning, everyone.", "specialist": NEW})
        assert "Marker-one" in explicit["result"]["output"]

        await put({**ENTRY, "instructions": "Marker-two. You translate the user's text into plain English."})

        async def reopened() -> bool:
            return _ready_count(worker) >= 2

        await eventually(reopened, timeout=15, what=f"the {NEW} worker consuming with its new spec")
        again = await _task(client, {"input": "Good evening, everyone.", "specialist": NEW})
        assert "Marker-two" in again["result"]["output"], again["result"]

    for service in (broker, general, worker, *(s for s in cluster.services if s.name.startswith("api"))):
        assert service.proc.poll() is None, f"{service.name} exited\n{cluster.logs()}"
    assert {s.name: s.proc.pid for s in cluster.services if s.name in before} == before
    assert "catalog changed" in broker.log_path.read_text(errors="replace")


async def test_a_specialist_added_to_the_file(new_queues, cluster: Cluster, catalog: Catalog, tmp_path: Path):
    path = tmp_path / "specialists.yaml"
    document = catalog.model_dump(mode="json", by_alias=True)
    path.write_text(yaml.safe_dump(document), encoding="utf-8")

    async def put(entry: dict[str, Any]) -> None:
        changed = {**document, "specialists": [*document["specialists"], {"name": NEW, **entry}]}
        # Atomically, as a ConfigMap volume or an editor's save-and-rename does.
        staged = tmp_path / f".specialists-{uuid.uuid4().hex[:6]}.yaml"
        staged.write_text(yaml.safe_dump(changed), encoding="utf-8")
        os.replace(staged, path)

    await exercise(cluster, put, {"TASKYARD_CATALOG_PATH": str(path)})


async def test_a_specialist_put_through_the_api(new_queues, cluster: Cluster):
    async def put(entry: dict[str, Any]) -> None:
        async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
            response = await client.put(f"/v1/specialists/{NEW}", json=entry)
            assert response.status_code in (200, 201), response.text

    await exercise(cluster, put, {"TASKYARD_CATALOG_SOURCE": "database"})
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        # The fallback cannot go (the catalog would not be valid); the new one can.
        fallback = await client.delete("/v1/specialists/general")
        assert fallback.status_code == 409 and fallback.json()["type"].endswith("/catalog-conflict")
        assert (await client.delete(f"/v1/specialists/{NEW}")).status_code == 204
        assert (await client.delete(f"/v1/specialists/{NEW}")).status_code == 404


@pytest.fixture
async def k8s(kmock: kmock_lib.KubernetesEmulator, catalog: Catalog) -> kmock_lib.KubernetesEmulator:
    kmock.resources[SPECIALISTS] = {
        "kind": "Specialist",
        "singular": "specialist",
        "verbs": {"get", "list", "watch", "create", "patch", "update", "delete"},
        "namespaced": True,
    }
    for spec in catalog.specialists:
        resource = _resource(spec.name, spec.model_dump(mode="json", exclude={"name"}))
        assert (await kmock.post(URL, json=resource)).status < 300
    return kmock


def _resource(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "taskyard.dev/v1alpha1",
        "kind": "Specialist",
        "metadata": {"name": name, "namespace": NS, "uid": str(uuid.uuid4())},
        # The operator's part of the spec: the catalog sources leave it out.
        "spec": {**entry, "scaling": {"maxReplicaCount": 3}},
    }


async def test_a_specialist_resource_created(new_queues, k8s, cluster: Cluster):
    async def put(entry: dict[str, Any]) -> None:
        exists = (kmock_lib.resource(SPECIALISTS), NS, NEW) in k8s.objects
        if not exists:
            response = await k8s.post(URL, json=_resource(NEW, entry))
        else:
            response = await k8s.patch(f"{URL}/{NEW}", json={"spec": {"instructions": entry["instructions"]}})
        assert response.status < 300, json.dumps(await response.json())

    env = {
        "TASKYARD_CATALOG_SOURCE": "kubernetes",
        "TASKYARD_CATALOG_KUBERNETES_URL": str(k8s.url),
        "TASKYARD_CATALOG_KUBERNETES_NAMESPACE": NS,
        "TASKYARD_CATALOG_FALLBACK": "general",
    }
    await exercise(cluster, put, env)

"""The operator in-process (the same ``run`` as ``taskyard-operator``) against kmock's Kubernetes API
emulator, the real RabbitMQ (a prefix per test) and the real PostgreSQL (a schema per test).

kmock stores and serves objects; it is no Kubernetes: no garbage collector (children whose owner goes stay,
so the tests check their owner references instead), no generation bookkeeping (the tests bump
``metadata.generation`` with each spec change, as the API server would), no server-side apply (the operator
falls back to create on its 404), and no KEDA (a test writes the ScaledObject's Ready condition as KEDA
would).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aio_pika
import aiormq
import asyncpg
import kmock as kmock_lib
import pytest

from taskyard_common.settings import AmqpSettings, DbSettings, LogSettings
from taskyard_common.topology import Topology
from taskyard_operator.main import run
from taskyard_operator.settings import OperatorSettings, Settings, WorkerTemplate
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(90)]

NS = "ns1"
NAME = "translator"
SPECIALISTS = "taskyard.dev/v1alpha1/specialists"
DEPLOYMENTS = "apps/v1/deployments"
SCALED_OBJECTS = "keda.sh/v1alpha1/scaledobjects"
SCALED_JOBS = "keda.sh/v1alpha1/scaledjobs"
WORKER = f"taskyard-worker-{NAME}"
URL = f"/apis/taskyard.dev/v1alpha1/namespaces/{NS}/specialists"


def _declare_resources(k8s: kmock_lib.KubernetesEmulator) -> None:
    verbs = {"get", "list", "watch", "create", "patch", "update", "delete"}
    for resource, kind in [
        (SPECIALISTS, "Specialist"),
        (DEPLOYMENTS, "Deployment"),
        (SCALED_OBJECTS, "ScaledObject"),
        (SCALED_JOBS, "ScaledJob"),
        ("v1/events", "Event"),
    ]:
        plural = resource.rsplit("/", 1)[1]
        k8s.resources[resource] = {
            "kind": kind,
            "singular": plural[:-1],
            "verbs": verbs,
            "namespaced": True,
            "subresources": {"status"} if kind == "Specialist" else set(),
        }
    # kopf's backbone: it waits for namespaces and CRDs to be discoverable (it neither lists nor watches
    # them here: scanning is off and the namespace is given).
    for resource, kind in [
        ("v1/namespaces", "Namespace"),
        ("apiextensions.k8s.io/v1/customresourcedefinitions", "CustomResourceDefinition"),
    ]:
        plural = resource.rsplit("/", 1)[1]
        k8s.resources[resource] = {"kind": kind, "singular": plural[:-1], "verbs": verbs, "namespaced": False}


@pytest.fixture
async def k8s(kmock: kmock_lib.KubernetesEmulator) -> kmock_lib.KubernetesEmulator:
    _declare_resources(kmock)
    return kmock


@pytest.fixture
def settings(k8s, amqp_settings: AmqpSettings, db_settings: DbSettings) -> Settings:
    env = {
        "TASKYARD_AMQP_PREFIX": {"value": amqp_settings.prefix},
        "TASKYARD_AMQP_DELIVERY_LIMIT": {"value": str(amqp_settings.delivery_limit)},
        "TASKYARD_AMQP_MAX_LENGTH": {"value": str(amqp_settings.max_length)},
        "TASKYARD_DB_SCHEMA": {"value": db_settings.db_schema},
        "TASKYARD_LLM_TIMEOUT_SECONDS": {"value": "60"},
        "TASKYARD_WORKER_HTTP_TIMEOUT_SECONDS": {"value": "10"},
        "TASKYARD_HEALTH_PORT": {"value": "9000"},
    }
    worker = WorkerTemplate(
        env=env,
        selector_labels={"app.kubernetes.io/component": "worker"},
        labels={"app.kubernetes.io/managed-by": "taskyard-operator"},
    )
    return Settings(
        operator=OperatorSettings(
            namespace=NS, kube_api_url=str(k8s.url), status_interval_seconds=0.3, worker=worker
        ),
        amqp=amqp_settings,
        db=db_settings,
        log=LogSettings(),
    )


@pytest.fixture
async def broker(amqp_settings: AmqpSettings) -> AsyncIterator[aio_pika.abc.AbstractConnection]:
    connection = await aio_pika.connect(amqp_settings.url.get_secret_value())
    try:
        yield connection
    finally:
        channel = await connection.channel()
        topology = Topology(amqp_settings.prefix)
        for queue in (topology.specialist_queue(NAME), topology.quarantine_queue(NAME)):
            await channel.queue_delete(queue)
        await connection.close()


@contextlib.asynccontextmanager
async def running_operator(settings: Settings) -> AsyncIterator[None]:
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run(settings, stop_flag=stop, ready_flag=ready))
    try:
        await asyncio.wait_for(ready.wait(), timeout=20)
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=20)


def _specialist(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "taskyard.dev/v1alpha1",
        "kind": "Specialist",
        "metadata": {
            "name": NAME,
            "namespace": NS,
            "uid": str(uuid.uuid4()),
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": {"description": "Translates texts.", "instructions": "Translate.", "concurrency": 4, **spec},
    }


def _object(k8s, resource: str, name: str = WORKER) -> dict[str, Any] | None:
    key = (kmock_lib.resource(resource), NS, name)
    if key not in k8s.objects or k8s.objects[key].deleted:
        return None
    return json.loads(json.dumps(k8s.objects[key].raw))


async def _ready_messages(connection, queue: str) -> int | None:
    channel = await connection.channel()
    try:
        declared = await channel.declare_queue(queue, passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        return None
    result = declared.declaration_result.message_count
    await channel.close()
    return result


def _condition(obj: dict[str, Any] | None, kind: str) -> str | None:
    for c in (obj or {}).get("status", {}).get("conditions") or ():
        if c["type"] == kind:
            return c["status"]
    return None


async def test_create_update_and_delete(k8s, settings, broker, amqp_settings, db_settings):
    topology = Topology(amqp_settings.prefix)
    resp = await k8s.post(URL, json=_specialist())
    assert resp.status < 300
    uid = _object(k8s, SPECIALISTS, NAME)["metadata"]["uid"]

    async with running_operator(settings):
        # Create: the queues (real broker), the Deployment and ScaledObject owned by the Specialist, a status.
        async def created() -> bool:
            return bool(_object(k8s, DEPLOYMENTS) and _object(k8s, SCALED_OBJECTS))

        await eventually(created, timeout=30, what="the worker Deployment and ScaledObject")
        assert await _ready_messages(broker, topology.specialist_queue(NAME)) == 0
        assert await _ready_messages(broker, topology.quarantine_queue(NAME)) == 0
        for resource in (DEPLOYMENTS, SCALED_OBJECTS):
            (owner,) = _object(k8s, resource)["metadata"]["ownerReferences"]
            assert owner == {"apiVersion": "taskyard.dev/v1alpha1", "kind": "Specialist", "name": NAME,
                             "uid": uid, "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        assert _object(k8s, SCALED_OBJECTS)["spec"]["maxReplicaCount"] == 10

        async def queue_ready() -> bool:
            return _condition(_object(k8s, SPECIALISTS, NAME), "QueueReady") == "True"

        await eventually(queue_ready, timeout=15, what="status QueueReady")
        status = _object(k8s, SPECIALISTS, NAME)["status"]
        assert status["observedGeneration"] == 1 and status["queued"] == 0
        assert _condition(_object(k8s, SPECIALISTS, NAME), "ScalerReady") == "Unknown"  # no KEDA here

        # The counts: a ready message, a running task and a dead letter; KEDA reports the scaler ready.
        channel = await broker.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(topology.tasks_exchange)
        await exchange.publish(aio_pika.Message(b"{}"), routing_key=NAME)
        await _insert_tasks(db_settings)
        k8s.objects[SCALED_OBJECTS, NS, WORKER].patch(
            {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "ScaledObjectReady"}]}}
        )

        async def counted() -> bool:
            s = (_object(k8s, SPECIALISTS, NAME) or {}).get("status", {})
            return (s.get("queued"), s.get("running"), s.get("deadLetters")) == (1, 1, 1) and _condition(
                _object(k8s, SPECIALISTS, NAME), "Ready"
            ) == "True"

        await eventually(counted, timeout=15, what="queued 1, running 1, dead letters 1 and Ready")

        # Update: the children are patched in place, never created twice.
        await k8s.patch(
            f"{URL}/{NAME}", json={"metadata": {"generation": 2}, "spec": {"scaling": {"maxReplicaCount": 7}}}
        )

        async def patched() -> bool:
            so = _object(k8s, SCALED_OBJECTS)
            return bool(so and so["spec"]["maxReplicaCount"] == 7)

        await eventually(patched, timeout=15, what="the ScaledObject patched to maxReplicaCount 7")
        for resource in (DEPLOYMENTS, SCALED_OBJECTS):
            assert None not in k8s.objects[resource, NS, WORKER].history, "deleted and created again"

        async def observed_2() -> bool:
            return (_object(k8s, SPECIALISTS, NAME) or {}).get("status", {}).get("observedGeneration") == 2

        await eventually(observed_2, timeout=15, what="observedGeneration 2")

        # A mode change: a ScaledJob instead, and the Deployment and ScaledObject it owned are removed.
        await k8s.patch(
            f"{URL}/{NAME}", json={"metadata": {"generation": 3}, "spec": {"scaling": {"mode": "job"}}}
        )

        async def switched() -> bool:
            return (
                bool(_object(k8s, SCALED_JOBS))
                and not _object(k8s, DEPLOYMENTS)
                and not _object(k8s, SCALED_OBJECTS)
            )

        await eventually(switched, timeout=15, what="a ScaledJob in place of the Deployment and ScaledObject")

        # Delete with a message in the queue and no annotation: the queue stays, the Specialist goes.
        await k8s.delete(f"{URL}/{NAME}")

        async def gone() -> bool:
            return _object(k8s, SPECIALISTS, NAME) is None

        await eventually(gone, timeout=15, what="the Specialist deleted (finalizer released)")
        assert await _ready_messages(broker, topology.specialist_queue(NAME)) == 1

        # Created again, annotated, deleted: now the queues go although one holds a message.
        again = _specialist()
        again["metadata"]["annotations"] = {"taskyard.dev/delete-queues": "true"}
        assert (await k8s.post(URL, json=again)).status < 300

        async def recreated() -> bool:
            return _condition(_object(k8s, SPECIALISTS, NAME), "QueueReady") == "True"

        await eventually(recreated, timeout=15, what="the Specialist reconciled again")
        await k8s.delete(f"{URL}/{NAME}")
        await eventually(gone, timeout=15, what="the annotated Specialist deleted")
        assert await _ready_messages(broker, topology.specialist_queue(NAME)) is None
        assert await _ready_messages(broker, topology.quarantine_queue(NAME)) is None


async def test_empty_queues_go_with_the_specialist_and_an_invalid_spec_fails_permanently(
    k8s, settings, broker, amqp_settings
):
    topology = Topology(amqp_settings.prefix)
    invalid = _specialist(timeout_seconds=5000)  # over max_timeout_seconds: the CRD's CEL would refuse it
    invalid["metadata"]["name"] = "broken"
    assert (await k8s.post(URL, json=invalid)).status < 300
    assert (await k8s.post(URL, json=_specialist())).status < 300
    async with running_operator(settings):

        async def created() -> bool:
            return bool(_object(k8s, DEPLOYMENTS))

        await eventually(created, timeout=30, what="the valid Specialist's worker")
        assert _object(k8s, DEPLOYMENTS, "taskyard-worker-broken") is None
        assert await _ready_messages(broker, topology.specialist_queue("broken")) is None
        await k8s.delete(f"{URL}/{NAME}")

        async def gone() -> bool:
            return _object(k8s, SPECIALISTS, NAME) is None

        await eventually(gone, timeout=15, what="the Specialist deleted")
        assert await _ready_messages(broker, topology.specialist_queue(NAME)) is None


async def _insert_tasks(db: DbSettings) -> None:
    conn = await asyncpg.connect(db.url.get_secret_value())
    try:
        running, dead = uuid.uuid4(), uuid.uuid4()
        schema = db.db_schema
        await conn.execute(
            f"INSERT INTO {schema}.tasks (id, status, input, specialist) VALUES ($1, 'running', '{{}}', $3), "
            f"($2, 'dead_lettered', '{{}}', $3)",
            running, dead, NAME,
        )  # fmt: skip
        await conn.execute(
            f"INSERT INTO {schema}.dead_letters (task_id, specialist, reason, queue, message) "
            "VALUES ($1, $2, 'delivery_limit', 'q', '{}')",
            dead, NAME,
        )  # fmt: skip
    finally:
        await conn.close()

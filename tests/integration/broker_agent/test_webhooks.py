"""The webhook dispatcher against a real local receiver: signed deliveries, retries with the same id, the
address rules at delivery, several dispatchers at once, a dispatcher stopped mid-delivery."""

from __future__ import annotations

import ipaddress
import json
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import REGISTRY

from taskyard_broker_agent.webhooks.dispatcher import Dispatcher
from taskyard_broker_agent.webhooks.outbox import Outbox
from taskyard_broker_agent.webhooks.sender import Resolver, Sender
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, PostgresTaskStore
from taskyard_common.store.webhook_secrets import WebhookSecretStore
from taskyard_common.webhooks import IPAddress, WebhookSettings
from tests.support.polling import eventually
from tests.support.webhook_receiver import Received, verifies, webhook_receiver

pytestmark = pytest.mark.integration

DECISION = RoutingDecision(method=RoutingMethod.RULES, specialist="general", reason="r", confidence=0.5)
# Fast retries, a local receiver allowed: what a test needs, not the defaults.
FAST = WebhookSettings(
    allow_loopback=True,
    poll_seconds=0.05,
    backoff_base_seconds=0.05,
    backoff_max_seconds=0.2,
    timeout_seconds=5,
)


async def completed_task(store: PostgresTaskStore, url: str, *, events: list[str] | None = None) -> uuid.UUID:
    """A task with a webhook, run to completion as a worker would: its delivery is in the outbox."""
    webhook = {"url": url, "events": events or ["completed", "failed", "cancelled", "dead_lettered"]}
    task = await store.create(NewTask(id=uuid.uuid4(), input="x", metadata={"k": "v"}, webhook=webhook))
    assert await store.route(task.id, DECISION)
    await store.start(task.id, owner="w", lease_seconds=30, attempt=1)
    assert await store.complete(task.id, {"output": "done"}, Usage(total_tokens=3), owner="w")
    return task.id


async def deliveries(store: PostgresTaskStore, task_id: uuid.UUID) -> list[dict[str, Any]]:
    rows = await store.pool.fetch("SELECT * FROM webhook_deliveries WHERE task_id = $1", task_id)
    return [dict(r) for r in rows]


def status_of(store: PostgresTaskStore, task_id: uuid.UUID, status: str) -> Callable[[], Any]:
    async def check() -> bool:
        rows = await deliveries(store, task_id)
        return len(rows) == 1 and rows[0]["status"] == status

    return check


def counted(outcome: str) -> float:
    return REGISTRY.get_sample_value("taskyard_webhook_deliveries_total", {"outcome": outcome}) or 0.0


@pytest.fixture
def dispatcher(store: PostgresTaskStore) -> Callable[..., Any]:
    """``async with dispatcher(settings, resolver=..., claim_seconds=...)``: one dispatcher on this test's
    outbox, stopped (grace 0 unless ``grace`` says otherwise) at the end of the block."""

    @asynccontextmanager
    async def run(
        settings: WebhookSettings = FAST, *, grace: float = 0.0, **kwargs: Any
    ) -> AsyncIterator[Dispatcher]:
        running = Dispatcher(Outbox(store.pool), WebhookSecretStore(store.pool), settings, **kwargs)
        running.start()
        try:
            yield running
        finally:
            await running.stop(grace)

    return run


async def test_the_broker_agent_delivers_one_signed_completed_event_per_task(run_agent, store):
    async with webhook_receiver() as receiver:
        async with run_agent(webhook=FAST):
            task_id = await completed_task(store, receiver.url)
            await eventually(status_of(store, task_id, "delivered"), timeout=20, what="the delivery")
        (row,) = await deliveries(store, task_id)
    (request,) = receiver.requests
    secret = await WebhookSecretStore(store.pool).secret("default")
    assert request.method == "POST" and request.path == "/hooks"
    assert request.webhook_id == row["id"] == f"msg_{task_id.hex}_{row['id'].rsplit('_', 1)[1]}"
    assert request.headers["content-type"] == "application/json"
    assert verifies(secret, request), "the signature verifies with the documented algorithm"
    payload = json.loads(request.body)
    assert payload["type"] == "task.completed" and payload["timestamp"]
    assert payload["data"]["task_id"] == str(task_id) and payload["data"]["status"] == "completed"
    assert payload["data"]["result"] == {"output": "done"} and payload["data"]["metadata"] == {"k": "v"}
    assert row["attempts"] == 1 and row["delivered_at"] is not None
    (entry,) = row["attempt_log"]
    assert entry["status_code"] == 200 and entry["error"] is None and entry["duration_ms"] >= 0


async def test_a_receiver_that_answers_500_three_times_gets_a_fourth_attempt(store, dispatcher):
    before = (counted("failed_attempt"), counted("delivered"))
    async with webhook_receiver(500, 500, 500) as receiver, dispatcher():
        task_id = await completed_task(store, receiver.url)
        await eventually(status_of(store, task_id, "delivered"), timeout=20, what="the fourth attempt")
    (row,) = await deliveries(store, task_id)
    assert len(receiver.requests) == 4
    assert {r.webhook_id for r in receiver.requests} == {row["id"]}, "every attempt carries the same id"
    assert [e["status_code"] for e in row["attempt_log"]] == [500, 500, 500, 200]
    assert row["attempts"] == 4
    assert (counted("failed_attempt") - before[0], counted("delivered") - before[1]) == (3, 1)


async def test_a_timeout_is_retried_with_the_same_id(store, dispatcher):
    settings = FAST.model_copy(update={"timeout_seconds": 0.3})
    async with webhook_receiver() as receiver, dispatcher(settings):
        receiver.hang_seconds = 30
        task_id = await completed_task(store, receiver.url)

        async def timed_out() -> bool:
            rows = await deliveries(store, task_id)
            return bool(rows and rows[0]["attempt_log"])

        await eventually(timed_out, timeout=20, what="a timed-out attempt")
        receiver.hang_seconds = 0
        await eventually(status_of(store, task_id, "delivered"), timeout=20, what="the retry")
    (row,) = await deliveries(store, task_id)
    assert row["attempt_log"][0]["status_code"] is None and "timed out" in row["attempt_log"][0]["error"]
    assert {r.webhook_id for r in receiver.requests} == {row["id"]}


def resolving(names: dict[str, list[str]]) -> Resolver:
    """A resolver that knows only ``names`` (host → addresses), as a DNS server under test control."""

    async def resolve(host: str, port: int) -> list[IPAddress]:
        return [ipaddress.ip_address(a) for a in names[host]]

    return resolve


async def test_a_host_name_resolving_to_a_private_address_is_refused_at_delivery(store, dispatcher):
    before = counted("refused")
    resolver = resolving(
        {"hooks.example.test": ["10.0.0.7"], "mixed.example.test": ["93.184.215.14", "10.1.2.3"]}
    )
    async with dispatcher(resolver=resolver):
        private = await completed_task(store, "http://hooks.example.test/x")
        mixed = await completed_task(store, "https://mixed.example.test/x")

        async def refused() -> bool:
            rows = [*(await deliveries(store, private)), *(await deliveries(store, mixed))]
            return len(rows) == 2 and all(r["attempt_log"] for r in rows)

        await eventually(refused, timeout=20, what="both deliveries refused")
    for task_id, address in ((private, "10.0.0.7"), (mixed, "10.1.2.3")):
        (row,) = await deliveries(store, task_id)
        assert row["status"] == "pending", "refused now, retried later (DNS may change)"
        entry = row["attempt_log"][0]
        assert entry["status_code"] is None
        assert entry["error"].startswith("refused:") and f"{address} is a private address" in entry["error"]
    assert counted("refused") - before >= 2


async def test_the_connection_goes_to_the_address_that_was_checked(store, dispatcher):
    """``receiver.test`` exists only in the test's resolver: the request arrives because the dispatcher
    connected to the address it checked, with the name kept in the Host header."""
    async with webhook_receiver() as receiver:
        async with dispatcher(resolver=resolving({"receiver.test": ["127.0.0.1"]})):
            task_id = await completed_task(store, f"http://receiver.test:{receiver.port}/hooks")
            await eventually(status_of(store, task_id, "delivered"), timeout=20, what="the delivery")
    (request,) = receiver.requests
    assert request.headers["host"] == f"receiver.test:{receiver.port}"


async def test_loopback_is_refused_under_the_default_settings(store, dispatcher):
    defaults = WebhookSettings(allow_loopback=False, allow_private=False, poll_seconds=0.05)
    async with webhook_receiver() as receiver:
        async with dispatcher(defaults):
            by_name = await completed_task(store, f"http://localhost:{receiver.port}/hooks")
            by_address = await completed_task(store, receiver.url)

            async def refused() -> bool:
                rows = [*(await deliveries(store, by_name)), *(await deliveries(store, by_address))]
                return len(rows) == 2 and all(r["attempt_log"] for r in rows)

            await eventually(refused, timeout=20, what="both deliveries refused")
        assert receiver.requests == []
    (row,) = await deliveries(store, by_name)
    assert "loopback" in row["attempt_log"][0]["error"]


async def test_a_delivery_is_given_up_when_its_retry_window_is_over(store, dispatcher):
    before = counted("gave_up")
    settings = FAST.model_copy(update={"retry_hours": 0.5 / 3600})  # half a second
    async with webhook_receiver(*[503] * 1000) as receiver, dispatcher(settings):
        task_id = await completed_task(store, receiver.url)
        await eventually(status_of(store, task_id, "failed"), timeout=20, what="the delivery to give up")
    (row,) = await deliveries(store, task_id)
    assert row["attempts"] == len(receiver.requests) >= 2
    assert all(e["status_code"] == 503 for e in row["attempt_log"])
    assert counted("gave_up") - before == 1


async def test_two_dispatchers_never_send_the_same_attempt_at_once(store, dispatcher):
    async with webhook_receiver() as receiver:
        async with dispatcher(), dispatcher():
            tasks = [await completed_task(store, receiver.url) for _ in range(20)]

            async def all_delivered() -> bool:
                rows = await store.pool.fetch(
                    "SELECT count(*) AS n FROM webhook_deliveries WHERE status = 'delivered'"
                )
                return rows[0]["n"] == len(tasks)

            await eventually(all_delivered, timeout=30, what="every delivery")
    ids = [r.webhook_id for r in receiver.requests]
    assert len(ids) == len(set(ids)) == len(tasks), "each delivery sent once"


async def test_a_delivery_cut_short_by_a_stopped_dispatcher_is_sent_again_with_the_same_id(store, dispatcher):
    """The dispatcher dies mid-delivery (stopped with no grace: the attempt is cancelled, nothing is
    recorded); once its claim lapses another dispatcher sends the delivery again, same id."""
    async with webhook_receiver() as receiver:
        receiver.hang_seconds = 30
        async with dispatcher(claim_seconds=0.5):
            task_id = await completed_task(store, receiver.url)
            await eventually(lambda: _received(receiver.requests, 1), timeout=20, what="the first attempt")
        (row,) = await deliveries(store, task_id)
        assert row["status"] == "pending" and row["attempts"] == 0, "the cut attempt was not recorded"
        receiver.hang_seconds = 0
        async with dispatcher():
            await eventually(status_of(store, task_id, "delivered"), timeout=20, what="the delivery again")
    assert len(receiver.requests) >= 2 and {r.webhook_id for r in receiver.requests} == {row["id"]}
    (row,) = await deliveries(store, task_id)
    assert row["attempts"] == 1, "only the attempt that finished is recorded"


async def _received(requests: list[Received], count: int) -> bool:
    return len(requests) >= count


@pytest.fixture
def certificate(tmp_path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context) for a self-signed certificate of ``receiver.test`` only."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=receiver.test",
         "-addext", "subjectAltName=DNS:receiver.test", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    return server, ssl.create_default_context(cafile=str(cert))


async def test_https_to_the_checked_address_verifies_the_certificate_against_the_host_name(certificate):
    """Connecting to the address (not the name) keeps TLS honest: the server name sent (SNI) and checked
    against the certificate is the URL's host."""
    server_tls, client_tls = certificate
    names = resolving({"receiver.test": ["127.0.0.1"], "impostor.test": ["127.0.0.1"]})
    sender = Sender(FAST, resolver=names, verify=client_tls)
    try:
        async with webhook_receiver(tls=server_tls) as receiver:
            sent = await sender.post(
                f"https://receiver.test:{receiver.port}/hooks", b"{}", {"webhook-id": "msg_t"}
            )
            assert sent.ok, sent.error
            wrong = await sender.post(
                f"https://impostor.test:{receiver.port}/hooks", b"{}", {"webhook-id": "msg_u"}
            )
        assert not wrong.ok and wrong.error is not None and "certificate" in wrong.error.lower()
        (request,) = receiver.requests
        assert request.headers["host"] == f"receiver.test:{receiver.port}"
    finally:
        await sender.close()

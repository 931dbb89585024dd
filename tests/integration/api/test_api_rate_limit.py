"""The per-tenant submission rate limit: a token bucket in PostgreSQL, shared by every API replica."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

import httpx

from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store.keys import KeyStore, Role
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok
from taskyard_devkit.service_env import service_env
from tests.integration.api.conftest import MakeSettings, assert_problem, serve

RATE_LIMIT = re.compile(r'^"submit";r=(\d+);t=(\d+)$')


async def test_a_burst_then_429_with_retry_after_and_ratelimit_headers(
    make_settings: MakeSettings, db_settings: DbSettings
):
    keys = await KeyStore.open(db_settings)
    try:
        acme = {"Authorization": f"Bearer {(await keys.create(tenant='acme', role=Role.SUBMITTER))[1]}"}
        globex = {"Authorization": f"Bearer {(await keys.create(tenant='globex', role=Role.SUBMITTER))[1]}"}
    finally:
        await keys.close()
    # One token per 100 s: nothing refills while the test runs, however slow the machine.
    settings = make_settings(auth_enabled=True, rate_limit_per_second=0.01, rate_limit_burst=3)
    async with serve(settings) as client:
        remaining = []
        for _ in range(3):
            accepted = await client.post("/v1/tasks", json={"input": "x"}, headers=acme)
            assert accepted.status_code == 202, accepted.text
            assert accepted.headers["ratelimit-policy"] == '"submit";q=3;w=300'
            match = RATE_LIMIT.match(accepted.headers["ratelimit"])
            assert match, accepted.headers["ratelimit"]
            remaining.append(int(match.group(1)))
        assert remaining == [2, 1, 0]

        refused = await client.post("/v1/tasks", json={"input": "x"}, headers=acme)
        body = assert_problem(refused, 429, "rate-limited")
        assert "Nothing was stored" in body["detail"]
        retry_after = int(refused.headers["retry-after"])
        assert 1 <= retry_after <= 100
        match = RATE_LIMIT.match(refused.headers["ratelimit"])
        assert match and match.group(1) == "0" and int(match.group(2)) >= 1
        assert refused.headers["ratelimit-policy"] == '"submit";q=3;w=300'
        assert len((await client.get("/v1/tasks", headers=acme)).json()["items"]) == 3
        # Reads draw on their own budget, and another tenant has its own bucket.
        assert (await client.get("/v1/tasks", headers=acme)).status_code == 200
        assert (await client.post("/v1/tasks", json={"input": "x"}, headers=globex)).status_code == 202


async def test_concurrent_submissions_share_batched_takes_without_exceeding_the_burst(
    make_settings: MakeSettings, db_settings: DbSettings
):
    # Requests arriving together take their tokens in batches (token_batches.py): never more than the burst.
    keys = await KeyStore.open(db_settings)
    try:
        acme = {"Authorization": f"Bearer {(await keys.create(tenant='acme', role=Role.SUBMITTER))[1]}"}
    finally:
        await keys.close()
    burst, attempts = 40, 70
    settings = make_settings(auth_enabled=True, rate_limit_per_second=0.01, rate_limit_burst=burst)
    async with serve(settings) as client:
        responses = await asyncio.gather(
            *(client.post("/v1/tasks", json={"input": "x"}, headers=acme) for _ in range(attempts))
        )
        codes = sorted(r.status_code for r in responses)
        assert codes == [202] * burst + [429] * (attempts - burst), codes
        remaining = sorted(
            int(RATE_LIMIT.match(r.headers["ratelimit"]).group(1))  # type: ignore[union-attr]
            for r in responses
            if r.status_code == 202
        )
        assert remaining[0] == 0 and remaining[-1] <= burst - 1
        assert (
            len((await client.get("/v1/tasks", headers=acme, params={"limit": 100})).json()["items"]) == burst
        )


async def test_zero_disables_the_limit(make_settings: MakeSettings):
    async with serve(make_settings(rate_limit_burst=0)) as client:
        for _ in range(3):
            accepted = await client.post("/v1/tasks", json={"input": "x"})
            assert accepted.status_code == 202 and "ratelimit" not in accepted.headers


async def test_two_api_processes_share_one_limit(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path, tmp_path: Path
):
    rate, burst, attempts = 1.0, 10, 40
    env = {
        **service_env(amqp_settings, db_settings, catalog_path),
        "TASKYARD_API_AUTH_ENABLED": "false",
        "TASKYARD_API_RATE_LIMIT_PER_SECOND": str(rate),
        "TASKYARD_API_RATE_LIMIT_BURST": str(burst),
    }
    ports = [free_port(), free_port()]
    services = [
        Service(f"api-{i}", ["taskyard-api", "--port", str(port)], env, tmp_path)
        for i, port in enumerate(ports)
    ]
    try:
        for service, port in zip(services, ports, strict=True):
            await wait_http_ok(f"http://127.0.0.1:{port}/readyz", service, timeout=60)
        clients = [httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) for port in ports]
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            responses = await asyncio.gather(
                *(clients[i % 2].post("/v1/tasks", json={"input": f"task {i}"}) for i in range(attempts))
            )
            elapsed = loop.time() - started
        finally:
            for client in clients:
                await client.aclose()
        statuses = [r.status_code for r in responses]
        assert set(statuses) <= {202, 429}, [r.text for r in responses if r.status_code not in (202, 429)]
        accepted = statuses.count(202)
        # Each process alone would accept a whole burst; together they accept one burst, plus what refilled
        # while the requests ran.
        assert burst <= accepted <= burst + math.ceil(elapsed * rate) + 1, (accepted, elapsed)
        assert 429 in statuses
    finally:
        for service in services:
            service.stop()


async def test_reads_are_rate_limited_per_tenant(make_settings: MakeSettings, db_settings: DbSettings):
    """Every GET under /v1 takes a token of the tenant's read bucket (in this API process): past the burst a
    429 ``read-rate-limited`` with Retry-After, while another tenant reads and submissions go on."""
    keys = await KeyStore.open(db_settings)
    try:
        acme = {"Authorization": f"Bearer {(await keys.create(tenant='acme', role=Role.SUBMITTER))[1]}"}
        globex = {"Authorization": f"Bearer {(await keys.create(tenant='globex', role=Role.READER))[1]}"}
    finally:
        await keys.close()
    # One token per 100 s: nothing refills while the test runs.
    settings = make_settings(auth_enabled=True, read_rate_limit_per_second=0.01, read_rate_limit_burst=3)
    async with serve(settings) as client:
        for path in ("/v1/tasks", "/v1/specialists", "/v1/tasks"):
            assert (await client.get(path, headers=acme)).status_code == 200
        refused = await client.get("/v1/tasks", headers=acme)
        body = assert_problem(refused, 429, "read-rate-limited")
        assert "retry after" in body["detail"]
        assert 1 <= int(refused.headers["retry-after"]) <= 100
        assert refused.headers["ratelimit-policy"] == '"read";q=3;w=300'
        assert refused.headers["ratelimit"].startswith('"read";r=0;')
        assert (await client.get("/v1/tasks", headers=globex)).status_code == 200
        assert (await client.post("/v1/tasks", json={"input": "x"}, headers=acme)).status_code == 202
        document = (await client.get("/openapi.json")).json()
        assert "429" in document["paths"]["/v1/tasks/{task_id}"]["get"]["responses"]

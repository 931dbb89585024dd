"""End to end, real processes: tenant A queues 200 tasks, then tenant B 10. A never runs more than its
max_running, and B's tasks are not starved behind A's backlog: their p95 queue wait stays under two slot
turnovers (a turnover: how long one task holds a slot). Both figures come from the task rows (the database's
clock), as a ratio of the run's own times, never against a fixed wall-clock bound. The full size (A 2,000,
B 20) is the ``fairness`` scenario of ``make bench``.

One worker with 20 slots, A capped at 12: each tenant submits its tasks as one group, B right after A. A's
backlog waits parked in the store (its lane holds no more than the room under its cap), not in the
specialist's queue, so B's messages are not behind it: B takes the 8 free slots and, as A's tasks end, the
rest of its fair share (10). All of B starts within about one turnover, and most of A's backlog starts
after B's last task.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import asyncpg
import httpx
import pytest

from taskyard_common.catalog import Catalog
from taskyard_common.settings import DbSettings
from taskyard_common.store.keys import KeyStore, Role
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.catalogs import write_catalog
from tests.support.polling import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SPECIALIST = "summarizer"
A_TASKS, B_TASKS, SLOTS, A_CAP = 200, 10, 20, 12
# One LLM call per task: a slot turns over about this often.
LLM_SECONDS = 2.5


async def admin_key(db: DbSettings, tenant: str) -> dict[str, str]:
    keys = await KeyStore.open(db)
    try:
        _, key = await keys.create(tenant=tenant, role=Role.ADMIN, name="fairness")
    finally:
        await keys.close()
    return {"Authorization": f"Bearer {key}"}


async def submit(client: httpx.AsyncClient, headers: dict[str, str], name: str, count: int) -> None:
    """``count`` tasks in one group (one request: what the test measures is the workers' side)."""
    tasks = [{"input": f"Summarize: {name}'s item {i}.", "specialist": SPECIALIST} for i in range(count)]
    response = await client.post("/v1/task-groups", json={"tasks": tasks}, headers=headers)
    assert response.status_code == 202, response.text


def peak_running(rows: list[asyncpg.Record], now: float) -> int:
    """The most of ``rows`` running at one instant, from their start and finish times."""
    events = []
    for row in rows:
        if row["started_at"] is not None:
            finished = row["finished_at"].timestamp() if row["finished_at"] else now
            events += [(row["started_at"].timestamp(), 1), (finished, -1)]
    peak = current = 0
    for _, delta in sorted(events):  # an end sorts before a start at the same instant
        current += delta
        peak = max(peak, current)
    return peak


async def test_a_tenants_backlog_neither_passes_its_cap_nor_starves_another(
    cluster: Cluster, devllm: DevLlm, catalog: Catalog, db_settings: DbSettings, tmp_path: Path
):
    await devllm.script(cluster.model, [{"delay_seconds": LLM_SECONDS, "content": "ok"}], repeat_last=True)
    await cluster.start_api(
        TASKYARD_API_AUTH_ENABLED="true",
        TASKYARD_API_RATE_LIMIT_PER_SECOND="0",
        TASKYARD_API_RATE_LIMIT_BURST="0",
    )
    await cluster.start_broker_agent()
    worker_catalog = write_catalog(catalog, tmp_path, SPECIALIST, concurrency=SLOTS)
    await cluster.start_worker(SPECIALIST, TASKYARD_CATALOG_PATH=str(worker_catalog))
    a, b = await admin_key(db_settings, "tenant-a"), await admin_key(db_settings, "tenant-b")
    conn = await asyncpg.connect(db_settings.url.get_secret_value())
    await conn.execute(f'SET search_path TO "{db_settings.db_schema}"')
    sampled: list[int] = []
    try:
        async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
            capped = await client.put("/v1/tenants/tenant-a/limits", json={"max_running": A_CAP}, headers=a)
            assert capped.status_code == 200, capped.text
            await submit(client, a, "A", A_TASKS)

            async def count(tenant: str, statuses: tuple[str, ...]) -> int:
                return int(
                    await conn.fetchval(
                        "SELECT count(*) FROM tasks WHERE tenant = $1 AND status = ANY($2)", tenant, statuses
                    )
                )

            await submit(client, b, "B", B_TASKS)

            async def b_done() -> bool:
                sampled.append(await count("tenant-a", ("running",)))
                return await count("tenant-b", ("completed",)) == B_TASKS

            await eventually(b_done, timeout=120, what="B's tasks to complete")
            refused_id = await a_refused(conn)
            history = None
            if refused_id is not None:
                history = (await client.get(f"/v1/tasks/{refused_id}", headers=a)).json()
            parked = await conn.fetchval(
                "SELECT count(*) FROM task_events e JOIN tasks t ON t.id = e.task_id WHERE t.tenant = 'tenant-a'"
                " AND e.type = 'routed' AND e.data->>'parked' = 'true'"
            )
        rows = await conn.fetch(
            "SELECT tenant, routed_at, started_at, finished_at FROM tasks WHERE tenant IN ('tenant-a', 'tenant-b')"
        )
        now = float(await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())"))
    finally:
        await conn.close()
    a_rows = [r for r in rows if r["tenant"] == "tenant-a"]
    b_rows = [r for r in rows if r["tenant"] == "tenant-b"]
    assert max(sampled) <= A_CAP and peak_running(a_rows, now) <= A_CAP
    turnover = statistics.median(
        (r["finished_at"] - r["started_at"]).total_seconds() for r in rows if r["finished_at"] is not None
    )
    waits = sorted((r["started_at"] - r["routed_at"]).total_seconds() for r in b_rows)
    p95 = waits[-1] if len(waits) < 20 else statistics.quantiles(waits, n=20)[-1]
    print(f"B's queue waits {[round(w, 2) for w in waits]}; turnover {turnover:.2f}s; A peak {max(sampled)}")
    assert p95 < 2 * turnover, (waits, turnover)
    # A's backlog was parked at routing (its lane held no more than the room under its cap), and most of it
    # started after B's last task.
    assert parked > A_TASKS // 2, parked
    b_last = max(r["started_at"] for r in b_rows)
    assert sum(1 for r in a_rows if r["started_at"] is not None and r["started_at"] < b_last) < A_TASKS // 2
    if history is not None:
        # A refused start (the routings in flight may overshoot a lane) is in the attempt history, uncharged.
        refused = [e for e in history["attempt_history"] if e.get("event") == "start_deferred"]
        assert refused and refused[0]["reason"] in ("tenant_max_running", "fair_share"), history
        assert history["attempts"] <= 1


async def a_refused(conn: asyncpg.Connection) -> str | None:
    """A task of tenant A whose start was refused at least once (None: none was)."""
    task_id = await conn.fetchval(
        "SELECT id FROM tasks WHERE tenant = 'tenant-a' AND attempt_log @> '[{\"event\": \"start_deferred\"}]'"
        " LIMIT 1"
    )
    return None if task_id is None else str(task_id)

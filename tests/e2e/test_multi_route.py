"""multi_route end to end, every service a real process: a submission of two jobs is split by the LLM router
into two parts that two workers run, then the task itself combines their outputs in a third worker and
completes; its document, its group and the combining agent's prompt show how."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from taskyard_common.catalog import load_catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import submit, wait_for_status

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TERMINAL = {"completed", "failed", "dead_lettered", "cancelled"}


@pytest.fixture
def split_cluster(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path, devllm: DevLlm, tmp_path: Path
) -> Iterator[Cluster]:
    """A cluster on a copy of the catalog with multi_route on; the router asks the cluster's model, the
    agents another one (so the router's script never answers an agent)."""
    path = tmp_path / "specialists.yaml"
    cluster = Cluster(amqp_settings, db_settings, path, devllm, tmp_path)
    data = yaml.safe_load(catalog_path.read_text())
    data["multi_route"] = True
    for spec in data["specialists"]:
        spec["model"] = f"{cluster.model}-agents"
    path.write_text(yaml.safe_dump(data))
    load_catalog(path)  # still valid
    yield cluster
    unclean = cluster.stop_all()
    print(cluster.logs())
    assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"


async def test_a_request_of_two_jobs_runs_as_two_parts_and_is_combined(
    split_cluster: Cluster, devllm: DevLlm
):
    cluster = split_cluster
    parts = [
        {"specialist": "summarizer", "job": "summarize the report"},
        {"specialist": "researcher", "job": "find sources on Raft"},
    ]
    arguments = {
        "reason": "a summary and a search",
        "specialist": "summarizer",
        "confidence": 0.9,
        "parts": parts,
    }
    await devllm.script(cluster.model, [{"tool_calls": [{"name": "route_task", "arguments": arguments}]}])
    # Started together (each waits for its own readiness): the API and the broker agent, then the workers.
    await asyncio.gather(cluster.start_api(), cluster.start_broker_agent())
    await asyncio.gather(*(cluster.start_worker(name) for name in ("summarizer", "researcher", "general")))
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        created = await submit(client, {"input": "Summarize the report, and find sources on Raft."})
        done = await wait_for_status(client, created["id"], TERMINAL, timeout=90)
        assert done["status"] == "completed", done
        assert done["specialist"] == "general" and done["group"]["role"] == "reduce"
        assert done["routing"]["reason"] == "a summary and a search" and done["routing"]["parts"] == parts
        group = (await client.get(f"/v1/task-groups/{done['group']['id']}")).json()
        children = [(await client.get(f"/v1/tasks/{c['id']}")).json() for c in group["children"]["items"]]
        events = [e["type"] for e in (await client.get(f"/v1/tasks/{created['id']}/events")).json()["items"]]
    assert group["status"] == "completed" and group["reduce_task_id"] == created["id"]
    assert group["total"] == 2 and group["counts"]["completed"] == 2
    assert {c["specialist"] for c in children} == {"summarizer", "researcher"}
    assert all(c["input"] == created["input"] and c["status"] == "completed" for c in children)
    assert events[:2] == ["accepted", "routed"] and "parts_finished" in events and events[-1] == "completed"
    # Three agent runs (the development model answers each by default): the two parts, each told its job,
    # then the combine step, whose instructions hold both parts' outputs.
    assert {c["instructions"].rsplit(": ", 1)[1] for c in children} == {json.dumps(p["job"]) for p in parts}
    requests = await devllm.requests(f"{cluster.model}-agents")
    systems = [r["messages"][0]["content"] for r in requests]
    assert len(systems) == 3
    [combine] = [s for s in systems if "The request was split into parts" in s]
    for child in children:
        assert json.dumps(child["result"]["output"])[1:-1] in combine
        assert any(s.endswith(child["instructions"]) for s in systems if s != combine)

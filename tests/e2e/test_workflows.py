"""Workflows end to end, every service a real process: a chain whose second step reads the first one's
output, a group of 500 whose reduce step runs exactly once although its worker is SIGKILLed twice, and a
parent that delegates, waits holding no worker slot, and is cancelled with its child.

The development model server plays every agent "by turn", each script keyed by the first user message of
its conversation, and its request log shows what each step was sent.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from taskyard_common.catalog import load_catalog
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import submit, task, wait_for_status
from tests.support.polling import eventually
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TERMINAL = {"completed", "failed", "dead_lettered", "cancelled"}
# Short leases: a killed worker's tasks are taken over quickly.
WORKER_ENV = {"TASKYARD_WORKER_LEASE_SECONDS": "2", "TASKYARD_WORKER_SHUTDOWN_GRACE_SECONDS": "10"}

MakeCluster = Callable[..., Cluster]


@pytest.fixture
async def make_cluster(
    amqp_settings: AmqpSettings, db_settings: DbSettings, catalog_path: Path, devllm: DevLlm, tmp_path: Path
) -> AsyncIterator[MakeCluster]:
    """``make_cluster(changes, **amqp)``: a cluster on a copy of the catalog with ``changes`` per specialist
    (``{model}`` in a value is the cluster's dev LLM model name), stopped afterwards like ``cluster``."""
    made: list[Cluster] = []

    def make(changes: dict[str, dict[str, Any]], **amqp: Any) -> Cluster:
        path = tmp_path / f"specialists-{len(made)}.yaml"
        cluster = Cluster(amqp_settings.model_copy(update=amqp), db_settings, path, devllm, tmp_path)
        data = yaml.safe_load(catalog_path.read_text())
        for spec in data["specialists"]:
            for key, value in changes.get(spec["name"], {}).items():
                spec[key] = value.format(model=cluster.model) if isinstance(value, str) else value
        path.write_text(yaml.safe_dump(data))
        load_catalog(path)  # still valid
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        unclean = cluster.stop_all()
        print(cluster.logs())
        assert not unclean, f"services did not stop cleanly on SIGTERM: {unclean}"


def first_user(request: dict[str, Any]) -> str:
    return next((str(m.get("content")) for m in request["messages"] if m.get("role") == "user"), "")


# --- chains ----------------------------------------------------------------------------------------------


async def test_a_researcher_then_summarizer_chain_hands_the_output_on(cluster: Cluster, devllm: DevLlm):
    marker = uuid.uuid4().hex[:8]
    findings = f"FINDINGS-{marker}: quorum queues replicate their log with Raft."
    await devllm.script(cluster.model, [{"content": findings}], by_turn=True, when=f"research {marker}")
    await devllm.script(cluster.model, [{"content": "Raft, in one line."}], by_turn=True, when=findings)
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("researcher")
    await cluster.start_worker("summarizer")
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        first = await submit(
            client,
            {
                "input": f"research {marker}: how do quorum queues replicate?",
                "specialist": "researcher",
                "then": [{"specialist": "summarizer", "instructions": "Answer in one line."}],
            },
        )

        async def second_step_done() -> bool:
            document = await task(client, first["id"])
            assert document["status"] not in TERMINAL - {"completed"}, document
            if document["next"] is None:
                return False
            return (await task(client, document["next"]))["status"] in TERMINAL

        await eventually(second_step_done, timeout=90, what="both steps of the chain to finish")
        done = await task(client, first["id"])
        second = await task(client, done["next"])
    assert done["result"]["output"] == findings
    assert second["status"] == "completed" and second["result"]["output"] == "Raft, in one line."
    assert second["input"] == findings and second["parent"] == first["id"]
    assert second["specialist"] == "summarizer" and second["instructions"] == "Answer in one line."
    assert [(s["index"], s["status"]) for s in done["chain"]] == [(0, "completed"), (1, "completed")]
    # The summarizer was sent the researcher's output, with the step's instructions after its own.
    [request] = [r for r in await devllm.requests(cluster.model) if first_user(r) == findings]
    system = request["messages"][0]["content"]
    assert request["messages"][0]["role"] == "system" and system.endswith("Answer in one line.")


async def test_a_failing_first_step_fails_the_chain_and_creates_no_second(cluster: Cluster, devllm: DevLlm):
    marker = uuid.uuid4().hex[:8]
    refusal = {"status": 400, "error_message": "context too long"}
    await devllm.script(cluster.model, [refusal], by_turn=True, when=f"doomed {marker}")
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("researcher")
    await cluster.start_worker("summarizer")
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        first = await submit(
            client,
            {"input": f"doomed {marker}", "specialist": "researcher", "then": [{"specialist": "summarizer"}]},
        )
        failed = await wait_for_status(client, first["id"], TERMINAL, timeout=90)
        assert failed["status"] == "failed" and failed["error"]["message"].startswith("LLM answered HTTP 400")
        assert failed["next"] is None and [s["id"] for s in failed["chain"]] == [first["id"]]
        assert [t["id"] for t in (await client.get("/v1/tasks")).json()["items"]] == [first["id"]]


# --- groups ----------------------------------------------------------------------------------------------


# Deliveries a worker sent round again because a crash returned them (crashes.py).
CRASH_RERUNS = "taskyard_task_start_deferrals_total"
IN_FLIGHT = "taskyard_tasks_in_flight"


async def test_a_group_of_500_reduces_exactly_once_although_its_worker_is_killed_twice(
    make_cluster: MakeCluster, devllm: DevLlm
):
    # The reduce step runs on the summarizer, whose model name is its own: the dev LLM counts its calls.
    # A delivery limit above the kills: a message in flight at both kills must not be dead-lettered (that
    # is the poison-message guard, tested elsewhere).
    cluster = make_cluster({"summarizer": {"model": "{model}-reduce"}}, delivery_limit=20)
    reduce_model = f"{cluster.model}-reduce"
    # Long enough that a kill finds children running: a child's message reaches the queue only when the
    # broker agent's feeder releases it into its lane (every 0.25 s), so with very short calls the worker is
    # often between two releases, holding nothing.
    await devllm.script(cluster.model, [{"delay_seconds": 0.3, "content": "child done"}], by_turn=True)
    await cluster.start_api(TASKYARD_API_RATE_LIMIT_BURST="0")
    await cluster.start_broker_agent(TASKYARD_BROKER_REAPER_INTERVAL_SECONDS="1")
    await cluster.start_worker("summarizer", **WORKER_ENV)
    worker = await cluster.start_worker("general", **WORKER_ENV)
    body = {
        "tasks": [{"input": f"item {i}", "specialist": "general"} for i in range(500)],
        "reduce": {"specialist": "summarizer", "instructions": "Count the items."},
    }
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=60) as client:
        accepted = await client.post("/v1/task-groups", json=body)
        assert accepted.status_code == 202, accepted.text
        group_id = accepted.json()["id"]
        assert len(accepted.json()["children"]["items"]) == 500

        async def group() -> dict[str, Any]:
            response = await client.get(f"/v1/task-groups/{group_id}", params={"limit": 1})
            assert response.status_code == 200, response.text
            return response.json()

        # SIGKILL the children's worker twice while they run, restarting it each time. Each kill catches a
        # full prefetch of deliveries: the next worker gets them back redelivered and runs them again (after
        # one crash, through a delay tier; a delivery in flight at both kills goes to quarantine).
        killed = 0
        for threshold in (150, 300):

            async def reached(threshold: int = threshold) -> bool:
                return (await group())["counts"]["completed"] >= threshold

            await eventually(reached, timeout=120, what=f"{threshold} children completed")
            assert (await group())["counts"]["completed"] < 500, "the run ended before the kill"
            if killed:
                rerun = metric_sum(await cluster.metrics(worker), CRASH_RERUNS, reason="crashed")
                assert rerun > 0, "the first kill caught no delivery in flight"

            async def running(worker: Any = worker) -> bool:
                return metric_sum(await cluster.metrics(worker), IN_FLIGHT) > 0

            await eventually(running, timeout=60, what="children in flight on the worker")
            cluster.kill(worker)
            killed += 1
            worker = await cluster.start_worker("general", **WORKER_ENV)

        async def finished() -> bool:
            return (await group())["status"] != "running"

        await eventually(finished, timeout=240, what="the group to finish")
        document = await group()
        assert document["status"] == "completed", document
        assert document["counts"]["completed"] == 500 and document["total"] == 500
        reduce = await task(client, document["reduce_task_id"])
        assert reduce["status"] == "completed" and reduce["group"] == {"id": group_id, "role": "reduce"}
        assert len(reduce["input"]["children"]) == 500
        assert {c["status"] for c in reduce["input"]["children"]} == {"completed"}
        # Exactly one reduce task, and exactly one reduce run.
        roles: list[str] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"limit": 200, **({"cursor": cursor} if cursor else {})}
            page = (await client.get("/v1/tasks", params=params)).json()
            roles += [item["group"]["role"] for item in page["items"] if item["group"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert roles.count("child") == 500 and roles.count("reduce") == 1
    assert len(await devllm.requests(reduce_model)) == 1
    assert metric_sum(await cluster.metrics(worker), CRASH_RERUNS, reason="crashed") > 0, (
        "the second kill caught no delivery in flight"
    )


# --- delegation ------------------------------------------------------------------------------------------


def delegating(child_task: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "delegate", "arguments": {"task": child_task, "specialist": "general"}}]}


async def test_a_delegating_parent_waits_without_a_slot_and_is_cancelled_with_its_child(
    make_cluster: MakeCluster, devllm: DevLlm
):
    # One general worker at concurrency 1: the child can only run if the waiting parent holds no slot.
    cluster = make_cluster({"general": {"tools": ["calculator", "delegate"], "concurrency": 1}})
    alpha, beta = f"alpha {uuid.uuid4().hex[:8]}", f"beta {uuid.uuid4().hex[:8]}"
    await devllm.script(
        cluster.model,
        [delegating(f"{alpha} child: count to three"), {"content": "parent done"}],
        by_turn=True,
        when=f"{alpha} parent",
    )
    await devllm.script(
        cluster.model,
        [{"delay_seconds": 2, "content": "one two three"}],
        by_turn=True,
        when=f"{alpha} child",
    )
    await devllm.script(
        cluster.model, [delegating(f"{beta} child: take forever")], by_turn=True, when=f"{beta} parent"
    )
    await devllm.script(
        cluster.model, [{"delay_seconds": 120, "content": "never"}], by_turn=True, when=f"{beta} child"
    )
    await cluster.start_api()
    await cluster.start_broker_agent()
    await cluster.start_worker("general", **WORKER_ENV)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        parent = await submit(client, {"input": f"{alpha} parent: delegate it", "specialist": "general"})

        async def child_runs_while_parent_waits() -> bool:
            document = await task(client, parent["id"])
            assert document["status"] not in TERMINAL, document
            children = document["children"] or []
            return document["status"] == "waiting" and [c["status"] for c in children] == ["running"]

        await eventually(
            child_runs_while_parent_waits, timeout=60, what="the child running, its parent waiting"
        )
        done = await wait_for_status(client, parent["id"], TERMINAL, timeout=60)
        assert done["status"] == "completed" and done["result"]["output"] == "parent done", done
        assert [c["name"] for c in done["result"]["tool_calls"]] == ["delegate"]
        [child] = done["children"]
        assert child["status"] == "completed" and child["specialist"] == "general"
        child_document = await task(client, child["id"])
        assert (
            child_document["parent"] == parent["id"] and child_document["result"]["output"] == "one two three"
        )
        # The parent's next call carried the child's answer as the delegate call's result.
        resumed = [
            r
            for r in await devllm.requests(cluster.model)
            if first_user(r).startswith(f"{alpha} parent")
            and any(m.get("role") == "tool" for m in r["messages"])
        ]
        assert resumed and [m["content"] for m in resumed[-1]["messages"] if m.get("role") == "tool"] == [
            "one two three"
        ]

        # Cancelling a waiting parent cancels its running child: its worker stops it.
        waiting = await submit(client, {"input": f"{beta} parent: delegate it", "specialist": "general"})

        async def child_running() -> bool:
            document = await task(client, waiting["id"])
            return document["status"] == "waiting" and [c["status"] for c in document["children"] or []] == [
                "running"
            ]

        await eventually(child_running, timeout=60, what="the second parent waiting on its running child")
        cancelled = await client.post(f"/v1/tasks/{waiting['id']}/cancel")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
        [child] = cancelled.json()["children"]
        stopped = await wait_for_status(client, child["id"], TERMINAL, timeout=30)
        assert stopped["status"] == "cancelled"
        assert (await task(client, waiting["id"]))["status"] == "cancelled"

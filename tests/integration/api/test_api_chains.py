"""Chains (``then``) and the links of a task's document: its chain, its parent, what it delegated, its group;
cancelling a parent cancels what it delegated."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import httpx

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.store import NewTask, PostgresTaskStore, TaskRecord
from taskyard_common.task_errors import TaskErrorType, task_error
from tests.integration.api.conftest import Bus, IntakeReader, assert_problem, running

CHAIN = {
    "input": "Research how quorum queues replicate.",
    "specialist": "researcher",
    "then": [{"specialist": "summarizer", "instructions": "Three bullet points."}, {}],
}


async def run_to_completion(
    store: PostgresTaskStore, task_id, output: str, specialist: str = "general"
) -> None:
    decision = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist=specialist, reason="t", confidence=1)
    assert await store.route(task_id, decision)
    assert (await store.start(task_id, owner="w", lease_seconds=30, attempt=1)).record is not None
    assert await store.complete(task_id, {"output": output}, Usage(), owner="w")


async def test_a_chain_is_submitted_whole_and_its_steps_link_each_other(
    client: httpx.AsyncClient, store: PostgresTaskStore, intake: Callable[[], Awaitable[IntakeReader]]
):
    reader = await intake()
    accepted = await client.post("/v1/tasks", json=CHAIN)
    assert accepted.status_code == 202, accepted.text
    first = accepted.json()
    assert [(s["id"], s["index"], s["status"]) for s in first["chain"]] == [(first["id"], 0, "pending")]
    assert first["next"] is None and first["children"] == [] and first["parent"] is None
    assert first["group"] is None and first["instructions"] is None
    [(message, _)] = await reader.take(1)
    assert str(message.task_id) == first["id"] and message.requested_specialist == "researcher"
    record = await store.get(first["id"])
    assert record.chain_rest == [{"specialist": "summarizer", "instructions": "Three bullet points."}, {}]

    # The first step completes: the second exists at once, its input the output (the store's statement).
    await run_to_completion(store, record.id, "replication uses Raft", "researcher")
    done = (await client.get(f"/v1/tasks/{first['id']}")).json()
    assert done["status"] == "completed" and done["next"] is not None
    second = (await client.get(f"/v1/tasks/{done['next']}")).json()
    assert second["input"] == "replication uses Raft" and second["parent"] == first["id"]
    assert second["requested_specialist"] == "summarizer" and second["instructions"] == "Three bullet points."
    assert [(s["index"], s["status"], s["specialist"]) for s in second["chain"]] == [
        (0, "completed", "researcher"),
        (1, "pending", "summarizer"),
    ]
    assert second["next"] is None
    # The list stays lean: no links read for it.
    listed = (await client.get("/v1/tasks")).json()["items"]
    assert {item["id"] for item in listed} == {first["id"], second["id"]}
    assert all(item["chain"] is None and item["children"] is None for item in listed)
    assert all(item["parent"] == first["id"] for item in listed if item["id"] == second["id"])

    # The last step is routed (no specialist asked) and ends the chain.
    await run_to_completion(store, second["id"], "- Raft\n- quorum\n- leader", "summarizer")
    last_id = (await client.get(f"/v1/tasks/{second['id']}")).json()["next"]
    last = (await client.get(f"/v1/tasks/{last_id}")).json()
    assert last["requested_specialist"] is None and last["instructions"] is None
    await run_to_completion(store, last_id, "final")
    chain = (await client.get(f"/v1/tasks/{first['id']}")).json()["chain"]
    assert [(s["index"], s["status"]) for s in chain] == [
        (0, "completed"),
        (1, "completed"),
        (2, "completed"),
    ]
    assert (await client.get(f"/v1/tasks/{last_id}")).json()["next"] is None


async def test_a_failed_step_ends_the_chain(client: httpx.AsyncClient, store: PostgresTaskStore):
    first = (await client.post("/v1/tasks", json=CHAIN)).json()
    decision = RoutingDecision(
        method=RoutingMethod.EXPLICIT, specialist="researcher", reason="t", confidence=1
    )
    assert await store.route(first["id"], decision)
    await store.start(first["id"], owner="w", lease_seconds=30, attempt=1)
    assert await store.fail(
        first["id"], task_error(TaskErrorType.AGENT_ERROR, "no sources"), Usage(), owner="w"
    )
    document = (await client.get(f"/v1/tasks/{first['id']}")).json()
    assert document["status"] == "failed" and document["error"]["message"] == "no sources"
    assert document["next"] is None and [s["id"] for s in document["chain"]] == [first["id"]]
    assert len((await client.get("/v1/tasks")).json()["items"]) == 1, "no second step was created"


async def test_chain_steps_are_validated(client: httpx.AsyncClient):
    bad_bodies = [
        {"input": "x", "then": []},
        {"input": "x", "then": [{}] * 21},
        {"input": "x", "then": [{"instructions": "i" * 4001}]},
        {"input": "x", "then": [{"instructions": ""}]},
        {"input": "x", "then": [{"instructions": "a\x00b"}]},
        {"input": "x", "then": [{"specialist": ""}]},
        {"input": "x", "then": [{"model": "gpt"}]},
        {"input": "x", "then": {"specialist": "summarizer"}},
    ]
    for body in bad_bodies:
        assert_problem(await client.post("/v1/tasks", json=body), 422, "validation-error")
    unknown = await client.post("/v1/tasks", json={"input": "x", "then": [{}, {"specialist": "poet"}]})
    problem = assert_problem(unknown, 422, "unknown-specialist")
    assert "then[1].specialist" in problem["detail"] and "summarizer" in problem["known_specialists"]
    assert (await client.get("/v1/tasks")).json()["items"] == [], "nothing stored"
    longest = await client.post("/v1/tasks", json={"input": "x", "then": [{"instructions": "i" * 4000}] * 20})
    assert longest.status_code == 202, longest.text


async def test_then_is_part_of_the_idempotency_hash_only_when_given(client: httpx.AsyncClient):
    plain = {"input": "Summarize: keys stay valid."}
    first = await client.post("/v1/tasks", json=plain, headers={"Idempotency-Key": "k1"})
    assert first.status_code == 202
    again = await client.post("/v1/tasks", json=plain, headers={"Idempotency-Key": "k1"})
    assert again.headers["idempotent-replayed"] == "true" and again.json()["id"] == first.json()["id"]
    chained = await client.post("/v1/tasks", json={**plain, "then": [{}]}, headers={"Idempotency-Key": "k1"})
    assert_problem(chained, 422, "idempotency-key-reused")
    with_chain = await client.post("/v1/tasks", json=CHAIN, headers={"Idempotency-Key": "k2"})
    replayed = await client.post("/v1/tasks", json=CHAIN, headers={"Idempotency-Key": "k2"})
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json()["chain"] == with_chain.json()["chain"]


def child_of(parent: TaskRecord, call_id: str) -> NewTask:
    delegation = {"parent_id": str(parent.id), "call_id": call_id, "step": 1}
    return NewTask(
        id=uuid.uuid4(),
        input=f"sub-task {call_id}",
        metadata={},
        requested_specialist="summarizer",
        parent_id=parent.id,
        delegation=delegation,
        depth=parent.depth + 1,
    )


async def test_delegation_links_and_cancelling_a_parent_cancels_what_it_delegated(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    control = await (await bus()).control()
    parent = await running(store)
    children = await store.delegate(parent.id, "w", [child_of(parent, "a"), child_of(parent, "b")])
    assert children is not None
    one, two = children
    # One child runs (and delegates in turn); the other waits in its queue.
    decision = RoutingDecision(
        method=RoutingMethod.EXPLICIT, specialist="summarizer", reason="t", confidence=1
    )
    assert await store.route(one.id, decision)
    await store.start(one.id, owner="w2", lease_seconds=30, attempt=1)
    [grandchild] = await store.delegate(one.id, "w2", [child_of(one, "g")])
    assert await store.route(grandchild.id, decision)
    await store.start(grandchild.id, owner="w3", lease_seconds=30, attempt=1)

    document = (await client.get(f"/v1/tasks/{parent.id}")).json()
    assert document["status"] == "waiting" and document["chain"] is None
    assert [(c["id"], c["status"], c["specialist"]) for c in document["children"]] == [
        (str(one.id), "waiting", "summarizer"),
        (str(two.id), "pending", "summarizer"),
    ]
    child = (await client.get(f"/v1/tasks/{one.id}")).json()
    assert child["parent"] == str(parent.id) and [c["id"] for c in child["children"]] == [str(grandchild.id)]

    cancelled = await client.post(f"/v1/tasks/{parent.id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["status"] == "cancelled"
    assert {c["status"] for c in cancelled.json()["children"]} == {"cancelled"}
    # The running grandchild is asked to stop, its worker told.
    [(message, _)] = await control.take(1)
    assert message.task_id == grandchild.id
    record = await store.get(grandchild.id)
    assert record.status is TaskStatus.RUNNING and record.cancel_requested_at is not None
    assert await store.cancel_running(grandchild.id, "w3", Usage())
    assert (await store.get(parent.id)).status is TaskStatus.CANCELLED, "never resumed"
    again = await client.post(f"/v1/tasks/{parent.id}/cancel")
    assert again.status_code == 200
    await control.assert_empty()

"""Groups: submitted whole (checked, charged, stored and announced), read with counts and paged children,
refused whole under back pressure, idempotent, cancelled; their reduce step runs on the children's outcomes."""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import httpx
from pydantic import SecretStr

from taskyard_common.lifecycle import TaskStatus
from taskyard_common.messages import RoutingDecision, RoutingMethod, Usage
from taskyard_common.settings import AmqpSettings, DbSettings
from taskyard_common.store import PostgresTaskStore
from taskyard_common.store.keys import KeyStore, Role
from taskyard_common.task_errors import TaskErrorType, task_error
from tests.integration.api.conftest import Bus, IntakeReader, MakeSettings, assert_problem, serve
from tests.support.polling import eventually

RATE_LIMIT = re.compile(r'^"submit";r=(\d+);t=(\d+)$')


def group_of(n: int, **extra) -> dict:
    return {"tasks": [{"input": f"item {i}", "metadata": {"i": str(i)}} for i in range(n)], **extra}


async def rows(db: DbSettings, table: str) -> int:
    conn = await asyncpg.connect(db.url.get_secret_value())
    try:
        return await conn.fetchval(f'SELECT count(*) FROM "{db.db_schema}".{table}')
    finally:
        await conn.close()


async def run(store: PostgresTaskStore, task_id, owner: str = "w", specialist: str = "general") -> None:
    decision = RoutingDecision(method=RoutingMethod.EXPLICIT, specialist=specialist, reason="t", confidence=1)
    assert await store.route(task_id, decision)
    assert (await store.start(task_id, owner=owner, lease_seconds=30, attempt=1)).record is not None


async def test_a_group_is_stored_and_announced_whole_and_paged(
    client: httpx.AsyncClient, store: PostgresTaskStore, intake: Callable[[], Awaitable[IntakeReader]]
):
    reader = await intake()
    body = group_of(5, reduce={"specialist": "summarizer"}, metadata={"batch": "7"})
    body["tasks"][2]["specialist"] = "researcher"
    accepted = await client.post("/v1/task-groups", json=body)
    assert accepted.status_code == 202, accepted.text
    group = accepted.json()
    assert accepted.headers["location"] == f"/v1/task-groups/{group['id']}"
    assert group["status"] == "running" and group["total"] == 5 and group["reduce_task_id"] is None
    assert group["counts"]["pending"] == 5 and group["counts"]["completed"] == 0
    assert group["reduce"] == {"specialist": "summarizer", "instructions": None}
    assert group["metadata"] == {"batch": "7"} and group["children"]["next_cursor"] is None
    ids = [c["id"] for c in group["children"]["items"]]
    assert len(ids) == 5 and group["children"]["items"][2]["specialist"] == "researcher"
    # Every child announced (confirmed) before the answer, as a submission is.
    messages = {str(m.task_id): m for m, _ in await reader.take(5)}
    assert set(messages) == set(ids)
    assert messages[ids[2]].requested_specialist == "researcher"
    for i, child_id in enumerate(ids):
        record = await store.get(child_id)
        assert record.input == f"item {i}" and record.metadata == {"i": str(i)}
        assert (record.group_id, record.group_role) == (uuid.UUID(group["id"]), "child")
    child = (await client.get(f"/v1/tasks/{ids[0]}")).json()
    assert child["group"] == {"id": group["id"], "role": "child"}

    # Paged, oldest first, with a cursor as in the task list.
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(f"/v1/task-groups/{group['id']}", params=params)).json()
        seen += [c["id"] for c in page["children"]["items"]]
        cursor = page["children"]["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    assert_problem(
        await client.get(f"/v1/task-groups/{group['id']}", params={"cursor": "nope"}), 422, "validation-error"
    )
    for unknown in (str(uuid.uuid4()), "not-a-uuid"):
        assert_problem(await client.get(f"/v1/task-groups/{unknown}"), 404, "not-found")


async def test_the_reduce_step_runs_once_on_the_childrens_outcomes(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    body = group_of(3, reduce={"specialist": "summarizer", "instructions": "Count the good ones."})
    group = (await client.post("/v1/task-groups", json=body)).json()
    ids = [c["id"] for c in group["children"]["items"]]
    for child_id in ids:
        await run(store, child_id)
    assert await store.complete(ids[0], {"output": "one"}, Usage(), owner="w")
    assert await store.fail(ids[1], task_error(TaskErrorType.AGENT_ERROR, "broken"), Usage(), owner="w")
    document = (await client.get(f"/v1/task-groups/{group['id']}")).json()
    assert document["counts"]["running"] == 1 and document["reduce_task_id"] is None
    assert await store.complete(ids[2], {"output": "three"}, Usage(), owner="w")

    document = (await client.get(f"/v1/task-groups/{group['id']}")).json()
    assert document["status"] == "running" and document["reduce_task_id"] is not None
    assert (document["counts"]["completed"], document["counts"]["failed"]) == (2, 1)
    reduce = (await client.get(f"/v1/tasks/{document['reduce_task_id']}")).json()
    assert reduce["group"] == {"id": group["id"], "role": "reduce"}
    assert reduce["instructions"] == "Count the good ones." and reduce["requested_specialist"] == "summarizer"
    outcomes = reduce["input"]["children"]
    assert [o["id"] for o in outcomes] == ids
    assert [o.get("output") for o in outcomes] == ["one", None, "three"]
    assert outcomes[1]["status"] == "failed" and outcomes[1]["error"]["message"] == "broken"
    await run(store, reduce["id"], specialist="summarizer")
    assert await store.complete(reduce["id"], {"output": "two of three"}, Usage(), owner="w")
    document = (await client.get(f"/v1/task-groups/{group['id']}")).json()
    assert document["status"] == "completed" and document["finished_at"] is not None
    assert document["links"]["reduce_task"] == f"/v1/tasks/{reduce['id']}"
    # Finished: nothing left to cancel.
    finished = assert_problem(await client.post(f"/v1/task-groups/{group['id']}/cancel"), 409)
    assert finished["type"].endswith("/group-already-finished") and finished["group_status"] == "completed"


async def test_groups_are_validated_whole_and_nothing_is_stored(
    make_settings: MakeSettings, db_settings: DbSettings
):
    async with serve(make_settings(max_input_bytes=100)) as client:
        too_big = group_of(3)
        too_big["tasks"][1]["input"] = "x" * 200
        big = assert_problem(await client.post("/v1/task-groups", json=too_big), 422, "validation-error")
        assert big["errors"][0]["loc"] == ["body", "tasks", 1, "input"]
        assert big["errors"][0]["type"] == "input_too_large"
        unknown = group_of(4)
        unknown["tasks"][3]["specialist"] = "poet"
        problem = assert_problem(
            await client.post("/v1/task-groups", json=unknown), 422, "unknown-specialist"
        )
        assert "tasks[3].specialist" in problem["detail"]
        bad_reduce = group_of(1, reduce={"specialist": "poet"})
        assert (
            "reduce.specialist"
            in assert_problem(
                await client.post("/v1/task-groups", json=bad_reduce), 422, "unknown-specialist"
            )["detail"]
        )
        slow = group_of(2)
        slow["tasks"][0].update(specialist="general", timeout_seconds=10**6)
        timeout = assert_problem(await client.post("/v1/task-groups", json=slow), 422, "validation-error")
        assert timeout["errors"][0]["loc"] == ["body", "tasks", 0, "timeout_seconds"]
        for body in (
            {"tasks": []},
            group_of(1001),
            {"tasks": [{"input": ""}]},
            {"tasks": [{"input": "x", "then": [{}]}]},
            {"tasks": [{"input": "x"}], "reduce": {"instructions": "i" * 4001}},
            {"input": "x"},
        ):
            assert_problem(await client.post("/v1/task-groups", json=body), 422, "validation-error")
        assert_problem(
            await client.post("/v1/task-groups", content="x", headers={"content-type": "text/plain"}), 415
        )
    assert await rows(db_settings, "tasks") == 0 and await rows(db_settings, "task_groups") == 0


async def test_a_retry_with_the_same_key_answers_the_original_group_uncharged(
    make_settings: MakeSettings, db_settings: DbSettings, intake: Callable[[], Awaitable[IntakeReader]]
):
    # One token per 100 s: a retry charged again would be refused.
    settings = make_settings(rate_limit_per_second=0.01, rate_limit_burst=4)
    async with serve(settings) as client:
        reader = await intake()
        key = {"Idempotency-Key": "batch-1"}
        first = await client.post("/v1/task-groups", json=group_of(3), headers=key)
        assert first.status_code == 202 and "idempotent-replayed" not in first.headers
        assert RATE_LIMIT.match(first.headers["ratelimit"]).group(1) == "1"  # type: ignore[union-attr]
        again = await client.post("/v1/task-groups", json=group_of(3), headers=key)
        assert again.status_code == 202 and again.headers["idempotent-replayed"] == "true"
        assert again.headers["location"] == first.headers["location"]
        assert again.json()["id"] == first.json()["id"]
        assert [c["id"] for c in again.json()["children"]["items"]] == [
            c["id"] for c in first.json()["children"]["items"]
        ]
        await reader.take(3)
        await reader.assert_empty()
        assert_problem(
            await client.post("/v1/task-groups", json=group_of(2), headers=key), 422, "idempotency-key-reused"
        )
        assert_problem(await client.post("/v1/task-groups", json=group_of(2)), 429, "rate-limited")
    assert await rows(db_settings, "task_groups") == 1 and await rows(db_settings, "tasks") == 3


async def test_a_group_takes_its_tokens_all_at_once_or_none(
    make_settings: MakeSettings, db_settings: DbSettings
):
    settings = make_settings(rate_limit_per_second=0.01, rate_limit_burst=10)
    async with serve(settings) as client:
        accepted = await client.post("/v1/task-groups", json=group_of(6))
        assert accepted.status_code == 202
        assert RATE_LIMIT.match(accepted.headers["ratelimit"]).group(1) == "4"  # type: ignore[union-attr]
        refused = await client.post("/v1/task-groups", json=group_of(6))
        body = assert_problem(refused, 429, "rate-limited")
        assert "Nothing was stored" in body["detail"] and "6 at once" in body["detail"]
        assert 1 <= int(refused.headers["retry-after"]) <= 200
        # Larger than the bucket can ever hold: no wait would help.
        never = assert_problem(
            await client.post("/v1/task-groups", json=group_of(11)), 422, "validation-error"
        )
        assert never["errors"][0]["loc"] == ["body", "tasks"]
        # What is left is still there for a smaller group, and for single tasks.
        assert (await client.post("/v1/task-groups", json=group_of(3))).status_code == 202
        assert (await client.post("/v1/tasks", json={"input": "x"})).status_code == 202
        assert_problem(await client.post("/v1/tasks", json={"input": "x"}), 429, "rate-limited")
    assert await rows(db_settings, "task_groups") == 2 and await rows(db_settings, "tasks") == 10


async def test_a_full_intake_queue_refuses_the_group_whole(
    make_settings: MakeSettings,
    amqp_settings: AmqpSettings,
    db_settings: DbSettings,
    bus: Callable[[], Awaitable[Bus]],
):
    # Room for one message; quorum queues enforce their length a little late, so fill it with single
    # submissions until it refuses one (reject-publish), then send the group.
    tiny = amqp_settings.model_copy(update={"max_length": 1})
    async with serve(make_settings(amqp=tiny)) as client:
        accepted = 0

        async def full() -> bool:
            nonlocal accepted
            response = await client.post("/v1/tasks", json={"input": "filler"})
            accepted += response.status_code == 202
            return response.status_code == 503

        await eventually(full, what="the intake queue to refuse a publish")
        key = {"Idempotency-Key": "refused-batch"}
        refused = await client.post("/v1/task-groups", json=group_of(20), headers=key)
        body = assert_problem(refused, 503, "queue-full")
        assert "not stored" in body["detail"] and refused.headers["retry-after"] == str(
            tiny.retry_after_seconds
        )
        assert await rows(db_settings, "tasks") == accepted, "none of the group's tasks"
        assert await rows(db_settings, "task_groups") == 0
        assert await rows(db_settings, "group_idempotency_keys") == 0
        # Once the queue drains, the same key submits the group anew. (An intake message of the group that
        # got in before the refusals names no task any more: the broker agent drops it.)
        opened = await bus()
        await (await opened.channel.get_queue(opened.topology.intake_queue)).purge()
        retried = await client.post("/v1/task-groups", json=group_of(1), headers=key)
        assert retried.status_code == 202, retried.text
        assert "idempotent-replayed" not in retried.headers


async def test_without_the_broker_a_group_is_refused_before_anything_is_stored(
    make_settings: MakeSettings, amqp_settings: AmqpSettings, db_settings: DbSettings
):
    nowhere = amqp_settings.model_copy(update={"url": SecretStr("amqp://guest:guest@127.0.0.1:1/")})
    async with serve(make_settings(amqp=nowhere), wait_ready=False) as client:
        refused = await client.post("/v1/task-groups", json=group_of(3))
        assert "not stored" in assert_problem(refused, 503, "broker-unavailable")["detail"]
        assert refused.headers["retry-after"] == str(amqp_settings.retry_after_seconds)
    assert await rows(db_settings, "tasks") == 0 and await rows(db_settings, "task_groups") == 0


async def test_cancelling_a_group_cancels_its_unfinished_tasks(
    client: httpx.AsyncClient, store: PostgresTaskStore, bus: Callable[[], Awaitable[Bus]]
):
    control = await (await bus()).control()
    group = (await client.post("/v1/task-groups", json=group_of(4, reduce={}))).json()
    ids = [c["id"] for c in group["children"]["items"]]
    await run(store, ids[0])
    assert await store.complete(ids[0], {"output": "done"}, Usage(), owner="w")
    await run(store, ids[1])

    cancelled = await client.post(f"/v1/task-groups/{group['id']}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    document = cancelled.json()
    assert document["status"] == "running" and document["cancel_requested_at"] is not None
    assert (document["counts"]["completed"], document["counts"]["cancelled"]) == (1, 2)
    assert document["counts"]["running"] == 1
    [(message, _)] = await control.take(1)
    assert str(message.task_id) == ids[1]
    # Its worker stops the running one: the group ends cancelled, without a reduce step.
    assert await store.cancel_running(ids[1], "w", Usage())
    document = (await client.get(f"/v1/task-groups/{group['id']}")).json()
    assert document["status"] == "cancelled" and document["reduce_task_id"] is None
    again = await client.post(f"/v1/task-groups/{group['id']}/cancel")
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    await control.assert_empty()
    assert (await store.get(ids[2])).status is TaskStatus.CANCELLED


async def test_a_tenant_never_sees_another_tenants_group(
    make_settings: MakeSettings, db_settings: DbSettings
):
    keys = await KeyStore.open(db_settings)
    try:
        ours = {"Authorization": f"Bearer {(await keys.create(tenant='acme', role=Role.SUBMITTER))[1]}"}
        theirs = {"Authorization": f"Bearer {(await keys.create(tenant='globex', role=Role.SUBMITTER))[1]}"}
        reader = {"Authorization": f"Bearer {(await keys.create(tenant='acme', role=Role.READER))[1]}"}
    finally:
        await keys.close()
    async with serve(make_settings(auth_enabled=True)) as client:
        group = (await client.post("/v1/task-groups", json=group_of(2), headers=ours)).json()
        assert (await client.get(f"/v1/task-groups/{group['id']}", headers=reader)).status_code == 200
        assert_problem(
            await client.post("/v1/task-groups", json=group_of(1), headers=reader), 403, "forbidden"
        )
        assert_problem(await client.post(f"/v1/task-groups/{group['id']}/cancel", headers=reader), 403)
        assert_problem(await client.get(f"/v1/task-groups/{group['id']}", headers=theirs), 404, "not-found")
        assert_problem(await client.post(f"/v1/task-groups/{group['id']}/cancel", headers=theirs), 404)
        # The same Idempotency-Key is another tenant's own.
        key = {"Idempotency-Key": "k"}
        mine = (await client.post("/v1/task-groups", json=group_of(1), headers={**ours, **key})).json()
        other = (await client.post("/v1/task-groups", json=group_of(1), headers={**theirs, **key})).json()
        assert mine["id"] != other["id"]


async def test_the_sweeper_forgets_expired_group_keys(make_settings: MakeSettings, db_settings: DbSettings):
    settings = make_settings(idempotency_retention_seconds=0.001, sweeper_interval_seconds=0.1)
    async with serve(settings) as client:
        first = await client.post("/v1/task-groups", json=group_of(1), headers={"Idempotency-Key": "old"})
        assert first.status_code == 202

        async def forgotten() -> bool:
            return await rows(db_settings, "group_idempotency_keys") == 0

        await eventually(forgotten, what="the sweeper to delete the expired group key")
        second = await client.post("/v1/task-groups", json=group_of(1), headers={"Idempotency-Key": "old"})
        assert second.status_code == 202 and second.json()["id"] != first.json()["id"]

"""Lean reads: ``fields`` on a task's document and on lists, and list pages bounded in bytes."""

from __future__ import annotations

import httpx

from taskyard_common.messages import Usage
from taskyard_common.store import PostgresTaskStore
from tests.integration.api.conftest import MakeSettings, assert_problem, created, running, serve


async def test_fields_choose_what_a_document_and_a_list_carry(
    client: httpx.AsyncClient, store: PostgresTaskStore
):
    task = await running(store, instructions="a long instruction " * 20)
    assert await store.complete(task.id, {"output": "a long result " * 50}, Usage(), owner="w")

    whole = (await client.get(f"/v1/tasks/{task.id}")).json()
    lean = await client.get(f"/v1/tasks/{task.id}", params={"fields": "status, finished_at"})
    assert lean.status_code == 200 and lean.headers["etag"]
    assert lean.json() == {k: whole[k] for k in ("id", "status", "finished_at")}
    linked = (await client.get(f"/v1/tasks/{task.id}", params={"fields": "children,links"})).json()
    assert linked == {k: whole[k] for k in ("id", "children", "links")}

    listed = (await client.get("/v1/tasks", params={"fields": "id,status,usage,error"})).json()
    assert listed["items"] == [{k: whole[k] for k in ("id", "status", "usage", "error")}]
    full = (await client.get("/v1/tasks")).json()["items"][0]
    assert (
        (full["input"], full["result"])
        == (whole["input"], whole["result"])
        == ("do it", {"output": "a long result " * 50})
    )

    body = assert_problem(
        await client.get("/v1/tasks", params={"fields": "id,secret"}), 422, "validation-error"
    )
    assert "secret" in body["detail"]
    assert_problem(
        await client.get(f"/v1/tasks/{task.id}", params={"fields": "nope"}), 422, "validation-error"
    )


async def test_a_page_stops_at_its_byte_bound_and_its_cursor_goes_on(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    ids = {str((await created(store, instructions="x" * 400)).id) for _ in range(5)}
    async with serve(make_settings(max_page_bytes=1024)) as client:
        seen: list[str] = []
        cursor, pages = None, 0
        while True:
            params = {"limit": 10, **({"cursor": cursor} if cursor else {})}
            page = (await client.get("/v1/tasks", params=params)).json()
            pages += 1
            assert 1 <= len(page["items"]) < 5 and len(str(page["items"])) < 2048
            seen += [item["id"] for item in page["items"]]
            cursor = page["next_cursor"]
            assert page["truncated"] is (cursor is not None)
            if cursor is None:
                break
        assert len(seen) == 5 and set(seen) == ids and pages > 1
        # Without their instructions, the same tasks fit in one page.
        lean = (await client.get("/v1/tasks", params={"limit": 10, "fields": "id,status,input"})).json()
        assert (len(lean["items"]), lean["truncated"], lean["next_cursor"]) == (5, False, None)

"""Tenant budgets: set with ``taskyard-admin budget`` or ``PUT /v1/tenants/{tenant}/budget``; past the monthly
budget a submission is refused (``402 budget-exhausted``) and nothing is stored."""

from __future__ import annotations

import argparse

import httpx
import pytest

from taskyard_api.cli.admin import _usd
from taskyard_common.messages import Usage
from taskyard_common.settings import DbSettings
from taskyard_common.store import PostgresTaskStore
from tests.integration.api.conftest import MakeSettings, assert_problem, running, serve
from tests.integration.api.test_api_admin_cli import admin

pytestmark = pytest.mark.integration


async def _tasks(store: PostgresTaskStore) -> int:
    return int(await store.pool.fetchval("SELECT count(*) FROM tasks"))


async def test_past_the_monthly_budget_submissions_are_refused_and_nothing_is_stored(
    make_settings: MakeSettings, store: PostgresTaskStore
):
    async with serve(make_settings(auth_cache_seconds=0)) as api:
        put = await api.put("/v1/tenants/default/budget", json={"monthly_budget": 1.5})
        assert put.status_code == 200, put.text
        assert put.json()["monthly_budget"] == 1.5 and put.json()["max_cost_per_task"] is None
        assert (await api.post("/v1/tasks", json={"input": "under budget"})).status_code == 202
        task = await running(store)
        assert await store.complete(task.id, {"output": "ok"}, Usage(cost=1.5, model="m"), owner="w")

        before = await _tasks(store)
        refused = await api.post("/v1/tasks", json={"input": "over budget"})
        body = assert_problem(refused, 402, "budget-exhausted")
        assert "1.500000 USD" in body["detail"]
        group = await api.post("/v1/task-groups", json={"tasks": [{"input": "a"}, {"input": "b"}]})
        assert_problem(group, 402, "budget-exhausted")
        assert await _tasks(store) == before, "nothing stored"

        document = (await api.get("/v1/tenants/default/budget")).json()
        assert document["spent_this_month"] == pytest.approx(1.5)
        # Raised: accepted again.
        assert (await api.put("/v1/tenants/default/budget", json={"monthly_budget": 10})).status_code == 200
        assert (await api.post("/v1/tasks", json={"input": "budget raised"})).status_code == 202


async def test_the_budget_route_checks_its_input_and_the_tenant(client: httpx.AsyncClient):
    empty = (await client.get("/v1/tenants/default/budget")).json()
    assert empty["monthly_budget"] is None and empty["max_cost_per_task"] is None
    assert empty["spent_this_month"] == 0 and empty["updated_at"] is None
    assert_problem(await client.get("/v1/tenants/acme/budget"), 404, "not-found")
    assert_problem(await client.put("/v1/tenants/default/budget", json={"max_cost_per_task": 0}), 422)
    assert_problem(await client.put("/v1/tenants/default/budget", json={"monthly": 1}), 422)
    assert_problem(await client.get("/v1/tenants/Not%20A%20Tenant/budget"), 422)


async def test_the_admin_cli_sets_and_shows_budgets(db_settings: DbSettings, make_settings: MakeSettings):
    done = admin("budget", "set", "--tenant", "acme", "--max-cost-per-task", "0.25", db=db_settings)
    assert done.returncode == 0, done.stderr
    assert "max_cost_per_task\t0.25" in done.stdout and "monthly_budget\t-" in done.stdout
    # An option left out keeps its value.
    done = admin("budget", "set", "--tenant", "acme", "--monthly-budget", "100", db=db_settings)
    assert "max_cost_per_task\t0.25" in done.stdout and "monthly_budget\t100" in done.stdout
    listed = admin("budget", "list", db=db_settings)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].startswith("acme\t100\t0.25\t")


def test_amounts_are_usd_or_none():
    assert _usd("0.25") == 0.25 and _usd("None") is None
    for bad in ("lots", "-1", "1e13"):
        with pytest.raises(argparse.ArgumentTypeError):
            _usd(bad)

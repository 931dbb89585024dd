"""Cost end to end: priced models in the catalog, the API, the broker agent (LLM routing) and a worker as
processes; each task document's ``cost``, ``GET /v1/usage`` (SDK and ``taskyard usage``) equal to their sum."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskyard_client import AsyncClient
from taskyard_common.catalog import Catalog
from taskyard_common.model_specs import ModelSpec
from taskyard_devkit.cluster import Cluster
from tests.integration.client.test_client_cli import taskyard
from tests.support.catalogs import write_catalog
from tests.support.polling import eventually

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(120)]

# USD per million tokens: large, so that the dev model's few tokens cost a visible amount.
PROMPT_PRICE, COMPLETION_PRICE = 1000.0, 3000.0


async def test_task_costs_and_the_usage_report_agree(
    cluster: Cluster, catalog: Catalog, tmp_path: Path
) -> None:
    priced = ModelSpec(
        name=cluster.model, input_price_per_mtok=PROMPT_PRICE, output_price_per_mtok=COMPLETION_PRICE
    )
    path = str(write_catalog(catalog, tmp_path, models=(priced,)))
    await cluster.start_api(TASKYARD_CATALOG_PATH=path)
    await cluster.start_broker_agent(TASKYARD_CATALOG_PATH=path)
    await cluster.start_worker("general", TASKYARD_CATALOG_PATH=path)
    async with AsyncClient(cluster.api_url) as sdk:
        explicit = [await sdk.submit(f"What is {n} + {n}?", specialist="general") for n in (2, 3)]
        # Routed by the LLM (a priced call), wherever it goes: only its routing may have cost anything.
        routed = await sdk.submit("Tell me something about queues.")
        for task in explicit:
            done = await sdk.wait(task.id, timeout=60)
            assert done.status == "completed", done

        async def routed_by_llm() -> bool:
            return (await sdk.get(routed.id)).routing is not None

        await eventually(routed_by_llm, timeout=30, what="the third task routed")
        tasks = [t async for t in sdk.list()]
        report = await sdk.usage(group_by="specialist")
        by_model = await sdk.usage(group_by="model")

    assert len(tasks) == 3
    for task in tasks:
        # Each call priced from the catalog: prompt and completion tokens at their own prices.
        agent = (
            task.usage.prompt_tokens * PROMPT_PRICE + task.usage.completion_tokens * COMPLETION_PRICE
        ) / 1e6
        assert task.usage.cost == pytest.approx(agent)
        routing = task.routing.cost if task.routing else 0.0
        assert task.cost == pytest.approx(agent + routing)
    assert all(t.cost > 0 for t in tasks if str(t.id) != str(routed.id))
    assert next(t for t in tasks if t.id == routed.id).routing.model == cluster.model  # type: ignore[union-attr]

    total = report.total
    assert total.tasks == 3
    assert total.cost == pytest.approx(sum(t.cost for t in tasks))
    assert total.prompt_tokens == sum(t.usage.prompt_tokens for t in tasks)
    assert total.routing_tokens == sum(t.routing.tokens for t in tasks if t.routing)
    assert total.total_tokens == sum(
        t.usage.total_tokens + (t.routing.tokens if t.routing else 0) for t in tasks
    )
    assert sum(g.cost for g in report.groups) == pytest.approx(total.cost)
    general = next(g for g in report.groups if g.key == "general")
    assert general.cost == pytest.approx(sum(t.cost for t in tasks if t.specialist == "general"))
    # One model here (router and agents alike): everything is its.
    assert [g.key for g in by_model.groups] == [cluster.model]
    assert by_model.groups[0].cost == pytest.approx(total.cost)

    # The command line reads the same route.
    env = {"TASKYARD_URL": cluster.api_url, "TASKYARD_CONFIG": str(tmp_path / "none.toml")}
    shown = await taskyard("usage", "--group-by", "day", "--json", env=env)
    assert shown.code == 0, shown
    days = shown.json()
    assert days["total"]["cost"] == pytest.approx(total.cost) and days["from"] and days["group_by"] == "day"
    assert [g["tasks"] for g in days["groups"]] == [3]
    table = await taskyard("usage", env=env)
    assert table.code == 0 and "total" in table.stdout and f"{total.cost:.6f}" in table.stdout, table
    refused = await taskyard(
        "usage", "--from", "2030-01-02T00:00:00Z", "--to", "2030-01-01T00:00:00Z", env=env
    )
    assert refused.code == 1 and "422" in refused.stderr, refused

"""Every ``taskyard_*`` metric the chart's dashboards and alerts use is exported by a running service.

The deploy tests check that each name is defined in ``taskyard_common.metrics``; this one checks that the
services really export it: the API, the broker agent and one worker per specialist run as processes, a few
tasks complete and one fails, and the union of their /metrics pages must hold every name.
"""

from __future__ import annotations

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm
from tests.support.api_client import submit, wait_for_status
from tests.support.chart_metrics import family, scraped_names, used_metric_names
from tests.support.scrape import metric_sum

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


async def test_every_metric_of_the_dashboards_and_alerts_is_scraped(
    cluster: Cluster, devllm: DevLlm, catalog
):
    api = await cluster.start_api()
    broker = await cluster.start_broker_agent()
    workers = {name: await cluster.start_worker(name) for name in catalog.names}
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        done = [
            await submit(client, {"input": f"hello {name}", "specialist": name}) for name in catalog.names
        ]
        done.append(await submit(client, {"input": "Summarize this report into a short summary."}))
        for document in done:
            assert (await wait_for_status(client, document["id"], {"completed", "failed"}))["status"] == (
                "completed"
            )
        # Nothing else calls the model now: its next answer, a 400, fails the next task for good.
        await devllm.script(cluster.model, [{"status": 400, "content": "bad request"}])
        doomed = await submit(client, {"input": "this one fails", "specialist": "general"})
        assert (await wait_for_status(client, doomed["id"], {"completed", "failed"}))["status"] == "failed"

    pages = {service.name: await cluster.metrics(service) for service in (api, broker, *workers.values())}
    scraped = set().union(*(scraped_names(text) for text in pages.values()))
    used = used_metric_names()
    assert used, "no taskyard metric found in the chart"
    missing = sorted(name for name in used if name not in scraped and family(name) not in scraped)
    assert not missing, f"used by the chart but exported by no service: {missing}"

    # The new per-attempt metrics saw the tasks above.
    general = pages[workers["general"].name]
    assert metric_sum(general, "taskyard_task_queue_wait_seconds_count", specialist="general") == 2
    assert metric_sum(general, "taskyard_tasks_in_flight", specialist="general") == 0
    assert metric_sum(general, "taskyard_tasks_finished_total", specialist="general", status="failed") == 1
    routed = pages[broker.name]
    assert (
        metric_sum(routed, "taskyard_routing_duration_seconds_count", method="explicit")
        == len(catalog.names) + 1
    )
    assert metric_sum(routed, "taskyard_routing_duration_seconds_count") == len(catalog.names) + 2

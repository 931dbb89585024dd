"""The agent evaluation's harness, proven end to end: three of its cases through the real API, broker agent
and workers, on the development model server scripted to answer them (right, and once with tool-call text),
the research case fetching from the fixture site through the workers' allowlist. (The triage, extraction
and summary checks are the same functions, unit-tested in tests/unit/evals.)"""

from __future__ import annotations

import pytest

from evals.agent.cases import load_cases
from evals.agent.harness import Llm, start_services
from evals.agent.report import summarize
from evals.agent.run import run_cases
from evals.agent.site import serve_site
from taskyard_common.catalog import Catalog
from taskyard_devkit.cluster import Cluster
from taskyard_devkit.devllm import DevLlm

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CASES = ["calc-01", "research-01", "sum-01"]


async def test_three_cases_run_through_the_pipeline_and_are_graded(
    cluster: Cluster, devllm: DevLlm, catalog: Catalog
) -> None:
    cases = [c for c in load_cases(catalog) if c.id in CASES]
    with serve_site() as site:
        heron = f"{site.base_url}/products/heron.html"
        # calc-01: the dev model calls the calculator by itself for arithmetic, then repeats its result.
        await devllm.script(
            cluster.model,
            [
                {"tool_calls": [{"name": "http_fetch", "arguments": {"url": heron}}]},
                {
                    "content": f"The Heron H2's battery lasts 14 months at one reading per minute. Source: {heron}"
                },
            ],
            by_turn=True,
            when="battery life of the Heron H2",
        )
        # The summarizer has no tools, so a call written as text would be stored: the harness must say so.
        call = '{"name": "calculator", "arguments": {"expression": "12 + 4"}}'
        await devllm.script(
            cluster.model, [{"content": call}], by_turn=True, when="The city council approved"
        )

        llm = Llm("dev", devllm.base_url, cluster.model, devllm)
        await start_services(cluster, llm, site, sorted({c.specialist for c in cases}), timeout_s=30)
        outcomes = {
            o.case.id: o for o in await run_cases(cluster.api_url, cases, site.base_url, timeout_s=60)
        }
        assert site.hits == ["/products/heron.html"]

    assert all(o.status == "completed" for o in outcomes.values()), {
        k: o.as_dict() for k, o in outcomes.items()
    }
    calc, research = outcomes["calc-01"], outcomes["research-01"]
    assert calc.passed and calc.tools == {"calculator": 1} and calc.steps == 2, calc.as_dict()
    assert research.passed and research.tools == {"http_fetch": 1} and research.steps == 2, research.as_dict()
    assert calc.tokens > 0 and research.latency_s is not None and research.latency_s > 0
    stored_call = outcomes["sum-01"]
    assert not stored_call.passed and stored_call.grade.tool_call_text, stored_call.as_dict()

    summary = summarize(list(outcomes.values()))
    assert summary["overall"]["passed"] == 2 and summary["tool_call_text"] == 1
    assert summary["specialists"]["researcher"]["latency_p50_s"] > 0

"""A handful of the agent evaluation's cases (evals/agent) on the real local model, end to end.

Not in the default run (minutes of CPU): `make test-local-model` prepares the model, then runs this. Without
a prepared model it is skipped, unless TASKYARD_REQUIRE_LOCAL_MODEL=1 (what that target sets) makes it fail.
The whole set is `make eval-agent`; these are the cases the issue that started it named (a plain-text
arithmetic request the model used to answer with its tool call as text) and one of each other kind.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from evals.agent.cases import load_cases
from evals.agent.harness import Llm, model_server, start_services
from evals.agent.report import format_report, summarize
from evals.agent.run import run_cases
from evals.agent.site import serve_site
from taskyard_common.catalog import Catalog
from taskyard_devkit.cluster import Cluster

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(2400)]

CASES = ["calc-01", "calc-02", "refund-02", "triage-01", "extract-01", "sum-01", "research-01"]
CALCULATOR = {"calc-01", "calc-02"}


@pytest.fixture
async def local_model() -> AsyncIterator[Llm]:
    logs = Path(tempfile.mkdtemp(prefix="local-model-eval-"))
    try:
        async with model_server("local", logs) as llm:
            yield llm
    except SystemExit as exc:  # not prepared
        if os.environ.get("TASKYARD_REQUIRE_LOCAL_MODEL") == "1":
            pytest.fail(str(exc))
        pytest.skip(str(exc))


async def test_agent_cases_on_the_local_model(cluster: Cluster, local_model: Llm, catalog: Catalog) -> None:
    cases = [c for c in load_cases(catalog) if c.id in CASES]
    with serve_site() as site:
        await start_services(cluster, local_model, site, sorted({c.specialist for c in cases}), timeout_s=600)
        outcomes = await run_cases(cluster.api_url, cases, site.base_url, concurrency=1, timeout_s=900)
    summary = summarize(outcomes)
    print(format_report(summary, outcomes, failures=True))
    assert all(o.status == "completed" for o in outcomes), [o.as_dict() for o in outcomes]
    assert summary["tool_call_text"] == 0, [o.as_dict() for o in outcomes if o.grade.tool_call_text]
    assert all(o.passed for o in outcomes if o.case.id in CALCULATOR), [
        o.as_dict() for o in outcomes if o.case.id in CALCULATOR
    ]

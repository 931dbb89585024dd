"""The real local model end to end: its server, the broker agent routing with it, workers answering with it.

Not in the default run (minutes of CPU): `make test-local-model` prepares the model, then runs this. Without a
prepared model it is skipped, unless TASKYARD_REQUIRE_LOCAL_MODEL=1 (what that target sets) makes it fail.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_devkit.local_model import weights
from taskyard_devkit.local_model.layout import Layout, configured_model_path
from tests.local_model.conftest import not_prepared
from tests.support.polling import eventually

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]

# One request per specialist that no reasonable router could send elsewhere.
REQUESTS = {
    "summarizer": "Summarize this in two bullet points: the quarterly report shows revenue grew 12 percent "
    "while costs stayed flat, and the team will hire two engineers in the spring.",
    "support-analyst": "Customer ticket: my refund for order 4411 never arrived and I am angry.",
    "researcher": "Research what the official RabbitMQ documentation says about quorum queues and cite "
    "the pages you used.",
    "general": "Brainstorm three names for a team offsite.",
}
# Routed, but not run: the researcher's tool loop (http_fetch, up to 8 steps) would take minutes on a CPU.
ROUTE_ONLY = {"researcher"}


async def test_the_local_model_routes_and_answers_tasks(
    cluster: Cluster, local_llm_env: dict[str, str], catalog
) -> None:
    assert set(REQUESTS) <= set(catalog.names)
    llm = local_llm_env
    await cluster.start_api()
    await cluster.start_broker_agent(**llm)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        ids = {}
        started = time.monotonic()
        for name, text in REQUESTS.items():
            response = await client.post("/v1/tasks", json={"input": text})
            assert response.status_code == 202, response.text
            ids[name] = response.json()["id"]

        # Routing first, with no worker running: the routing calls then have the model to themselves.
        documents: dict[str, dict] = {}

        async def routed() -> bool:
            for name, task_id in ids.items():
                documents[name] = (await client.get(f"/v1/tasks/{task_id}")).json()
            return all(d["routing"] is not None for d in documents.values())

        await eventually(routed, timeout=900, what="every task routed")
        print(f"{len(ids)} tasks routed in {time.monotonic() - started:.1f} s")
        for name, document in documents.items():
            print(f"  {name}: {document['routing']}")
            routing = document["routing"]
            # The model was asked and its answer read. A choice without evidence in the request is overruled
            # by the rules (the evidence floor, docs/routing.md): the right place, not a dead model.
            assert routing["llm_calls"] >= 1 and routing["tokens"] > 0, routing
            assert routing["method"] == "llm" or routing["fallback"] == "no_evidence", routing
            assert document["specialist"] == name, document["routing"]

        for name in ROUTE_ONLY:
            assert (await client.post(f"/v1/tasks/{ids[name]}/cancel")).status_code == 200

        started = time.monotonic()
        for name in REQUESTS.keys() - ROUTE_ONLY:
            await cluster.start_worker(name, **llm)

        async def finished() -> bool:
            for name in REQUESTS.keys() - ROUTE_ONLY:
                documents[name] = (await client.get(f"/v1/tasks/{ids[name]}")).json()
            return all(
                documents[n]["status"] in ("completed", "failed") for n in REQUESTS.keys() - ROUTE_ONLY
            )

        await eventually(finished, timeout=1200, what="every task answered")
        print(f"answered in {time.monotonic() - started:.1f} s")
        for name in sorted(REQUESTS.keys() - ROUTE_ONLY):
            document = documents[name]
            print(f"--- {name}: {document['usage']}\n{(document['result'] or {}).get('output')}")
            assert document["status"] == "completed", document["error"]
            output = document["result"]["output"]
            assert output.strip()
            assert "not a real LLM" not in output  # the development server's marker
            assert document["usage"]["completion_tokens"] > 0


def test_the_model_file_is_the_pinned_one() -> None:
    """What `make test-local-model` prepared is the pinned file (or the one configured instead)."""
    configured = configured_model_path()
    path = configured or Layout().model
    if not path.exists():
        not_prepared(f"{path} is not there; `make test-local-model` prepares it")
    assert Path(path).read_bytes()[:4] == b"GGUF"
    if configured is None:
        assert weights.model_verified(Layout())

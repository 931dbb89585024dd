"""Issue 20's two arithmetic tasks end to end with the real local model: API -> broker agent -> worker.

Before the tool-call grammar, both ended ``completed`` with the model's calculator call (doubled braces) as
their output. Now each must be answered with the right number, through the calculator, and no reply that
looks like a tool call may be stored as the result. The worker runs the general specialist (calculator).
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest

from taskyard_devkit.cluster import Cluster
from taskyard_worker.text_tool_calls import looks_like_tool_call
from tests.support.polling import eventually

pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1800)]

# (the request as the issue sent it, the right answer). The first names its specialist, the second is routed.
TASKS: dict[str, tuple[dict[str, Any], int]] = {
    "json-question": ({"input": {"question": "What is 12 * (3 + 4)?"}, "specialist": "general"}, 84),
    "use-the-calculator": ({"input": "What is 17 * 23 + 4? Use the calculator."}, 395),
}


def numbers_in(text: str) -> set[int]:
    """Whole numbers in the text, thousands separators read ("1,234" is 1234)."""
    return {int(n.replace(",", "")) for n in re.findall(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d])|\d+", text)}


def test_numbers_in_reads_plain_and_grouped_numbers() -> None:
    assert numbers_in("12 * (3 + 4) = 84.") == {12, 3, 4, 84}
    assert numbers_in("The result is 1,234") == {1234}


async def test_the_issue_tasks_are_answered_through_the_calculator(
    cluster: Cluster, local_llm_env: dict[str, str]
) -> None:
    await cluster.start_api()
    await cluster.start_broker_agent(**local_llm_env)
    await cluster.start_worker("general", **local_llm_env)
    async with httpx.AsyncClient(base_url=cluster.api_url, timeout=30) as client:
        ids = {}
        started = time.monotonic()
        for name, (body, _) in TASKS.items():
            response = await client.post("/v1/tasks", json=body)
            assert response.status_code == 202, response.text
            ids[name] = response.json()["id"]
        documents: dict[str, dict[str, Any]] = {}

        async def finished() -> bool:
            for name, task_id in ids.items():
                documents[name] = (await client.get(f"/v1/tasks/{task_id}")).json()
            return all(d["status"] in ("completed", "failed", "dead_lettered") for d in documents.values())

        await eventually(finished, timeout=1500, what="both tasks finished")
        print(f"answered in {time.monotonic() - started:.1f} s")
        for name, (_, expected) in TASKS.items():
            document = documents[name]
            result = document["result"] or {}
            print(f"--- {name}: {document['routing']} {result.get('tool_calls')}\n{result.get('output')}")
            assert document["status"] == "completed", document["error"]
            assert document["specialist"] == "general", document["routing"]
            output = result["output"]
            assert not looks_like_tool_call(output), output
            assert "<tool_call>" not in output and "{{" not in output, output
            assert {"name": "calculator", "ok": True} in result["tool_calls"], result
            assert expected in numbers_in(output), output

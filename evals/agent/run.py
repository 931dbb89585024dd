"""Running the cases through a live taskyard: submitted over the API, followed to their end, read back.

Nothing here knows how the services were started (the harness's own processes, or a stack already
running): it needs the API's base URL. What each task did comes from the task store through the API: the
document (status, answer, usage, times) and the event log (one ``llm_call`` per model reply, one
``tool_call`` per tool result, with the tool's name and whether it succeeded).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx

from evals.agent.cases import Case, Grade, grade

TERMINAL = frozenset({"completed", "failed", "dead_lettered", "cancelled"})
# The API's longest long-poll.
WAIT_SECONDS = 30.0


@dataclass
class Outcome:
    case: Case
    grade: Grade
    status: str  # the task's last status, "timeout" when it did not end in time, "rejected" when refused
    task_id: str | None = None
    answer: str | None = None
    specialist: str | None = None  # where it ran (the routed one with --route auto)
    steps: int = 0  # model replies (llm_call events)
    tools: dict[str, int] = field(default_factory=dict)  # successful calls per tool
    tool_errors: int = 0
    tokens: int = 0
    latency_s: float | None = None  # created_at -> finished_at, as the store recorded them
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.grade.passed

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.case.id,
            "specialist": self.case.specialist,
            "ran_on": self.specialist,
            "kind": self.case.kind,
            "slices": list(self.case.slices),
            "passed": self.passed,
            "problems": self.grade.problems,
            "tool_call_text": self.grade.tool_call_text,
            "status": self.status,
            "task_id": self.task_id,
            "answer": self.answer,
            "steps": self.steps,
            "tools": self.tools,
            "tool_errors": self.tool_errors,
            "tokens": self.tokens,
            "latency_s": self.latency_s,
            "error": self.error,
        }


async def run_cases(
    api_url: str,
    cases: Sequence[Case],
    site_url: str,
    *,
    concurrency: int = 4,
    timeout_s: float = 600.0,
    route: str = "explicit",
    headers: dict[str, str] | None = None,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Every case once, at most ``concurrency`` tasks in flight; in the order of ``cases``.

    ``route``: "explicit" sends each case to its specialist (what is measured is the work, not the
    routing, which ``make eval-routing`` measures); "auto" lets the broker agent route it."""
    semaphore = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency * 2 + 2)
    async with httpx.AsyncClient(base_url=api_url, timeout=WAIT_SECONDS + 30, limits=limits) as client:
        if headers:
            client.headers.update(headers)

        async def one(case: Case) -> Outcome:
            async with semaphore:
                outcome = await run_case(client, case, site_url, timeout_s=timeout_s, route=route)
            if progress is not None:
                progress(outcome)
            return outcome

        return list(await asyncio.gather(*(one(c) for c in cases)))


async def run_case(
    client: httpx.AsyncClient, case: Case, site_url: str, *, timeout_s: float, route: str
) -> Outcome:
    body: dict[str, Any] = {"input": case.text(site_url), "metadata": {"eval_case": case.id}}
    if route == "explicit":
        body["specialist"] = case.specialist
    response = await client.post("/v1/tasks", json=body)
    if response.status_code != 202:
        text = f"submit answered {response.status_code}: {response.text[:200]}"
        return Outcome(case, Grade(False, [text]), "rejected", error=text)
    document = response.json()
    task_id = str(document["id"])
    # From the version the submission answered: a change since (even the end) answers the first poll at once.
    etag = response.headers.get("etag")
    document = await _follow(client, task_id, document, etag, time.monotonic() + timeout_s)
    status = str(document["status"])
    if status not in TERMINAL:
        await client.post(f"/v1/tasks/{task_id}/cancel")
        status = "timeout"
    answer = _answer(document) if status == "completed" else None
    steps, tools, tool_errors = await _activity(client, task_id)
    error = document.get("error")
    return Outcome(
        case=case,
        grade=grade(case, answer, tools, site_url) if status != "timeout" else Grade(False, ["timed out"]),
        status=status,
        task_id=task_id,
        answer=answer,
        specialist=document.get("specialist"),
        steps=steps,
        tools=tools,
        tool_errors=tool_errors,
        tokens=int((document.get("usage") or {}).get("total_tokens") or 0),
        latency_s=_latency(document),
        error=f"{error.get('type')}: {error.get('message')}" if isinstance(error, dict) else None,
    )


async def _follow(
    client: httpx.AsyncClient, task_id: str, document: dict[str, Any], etag: str | None, deadline: float
) -> dict[str, Any]:
    """Long-poll the task until it ends or ``deadline`` passes; its last document."""
    while str(document["status"]) not in TERMINAL:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        wait = max(1.0, min(WAIT_SECONDS, left))
        headers = {"If-None-Match": etag} if etag else {}
        try:
            response = await client.get(f"/v1/tasks/{task_id}", params={"wait": wait}, headers=headers)
        except httpx.TransportError:
            await asyncio.sleep(1)
            continue
        if response.status_code == 200:
            document, etag = response.json(), response.headers.get("etag")
        elif response.status_code != 304:
            await asyncio.sleep(1)
    return document


def _answer(document: dict[str, Any]) -> str:
    result = document.get("result") or {}
    output = result.get("output")
    return output if isinstance(output, str) else str(output)


async def _activity(client: httpx.AsyncClient, task_id: str) -> tuple[int, dict[str, int], int]:
    """(model replies, successful calls per tool, failed tool calls) from the task's event log."""
    steps, tools, errors = 0, Counter[str](), 0
    after = 0
    while True:
        response = await client.get(f"/v1/tasks/{task_id}/events", params={"after": after, "limit": 200})
        if response.status_code != 200:
            break
        page = response.json()
        for event in page["items"]:
            data = event.get("data") or {}
            if event["type"] == "llm_call":
                steps += 1
            elif event["type"] == "tool_call":
                if data.get("ok"):
                    tools[str(data.get("name"))] += 1
                else:
                    errors += 1
        if not page["items"] or page["next_after"] == after:
            break
        after = page["next_after"]
    return steps, dict(tools), errors


def _latency(document: dict[str, Any]) -> float | None:
    created, finished = document.get("created_at"), document.get("finished_at")
    if not created or not finished:
        return None
    return (datetime.fromisoformat(finished) - datetime.fromisoformat(created)).total_seconds()

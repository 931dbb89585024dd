"""The agent evaluation's labelled set is well formed; grading, the fixture site, the report and the command
line's choices work without any service."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import httpx
import pytest

from evals.agent.__main__ import parse_args, select
from evals.agent.cases import KINDS, SLICES, Case, grade, load_cases
from evals.agent.report import markdown, percentile, summarize
from evals.agent.run import Outcome
from evals.agent.site import SITE_DIR, serve_site
from taskyard_common.catalog import Catalog

SITE = "http://127.0.0.1:9"


def test_the_set_covers_every_specialist_kind_and_slice(catalog: Catalog) -> None:
    cases = load_cases(catalog)  # refuses unknown specialists, tools, kinds, slices, expectations
    assert len(cases) >= 120
    assert set(Counter(c.specialist for c in cases)) == set(catalog.names)
    kinds = Counter(c.kind for c in cases)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 15
    slices = Counter(s for c in cases for s in c.slices)
    assert set(slices) == set(SLICES) and min(slices.values()) >= 15
    assert all(c.expect["tools"].get("calculator") for c in cases if c.kind == "arithmetic")


def test_every_cited_page_exists_on_the_fixture_site(catalog: Catalog) -> None:
    pages = {"/" + p.relative_to(SITE_DIR).as_posix() for p in SITE_DIR.rglob("*.html")}
    for case in load_cases(catalog):
        for path in case.expect.get("cite") or []:
            assert path in pages, case.id
        for url in re.findall(r"\{site\}(/[\w./-]+)", case.input):
            assert url in pages, case.id


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("specialist: nobody", "not in the catalog"),
        ("kind: poetry", "unknown kind"),
        ("slices: [easy]", "unknown slice"),
        ("expect: {number: '1', tools: {http_fetch: 1}}", "has no tool"),
        ("expect: {tools: {calculator: 1}}", "arithmetic needs"),
        ("expect: {number: '1', tools: {calculator: 1}, vibes: 1}", "unknown expectations"),
    ],
)
def test_the_loader_refuses_broken_cases(catalog: Catalog, tmp_path: Path, raw: str, problem: str) -> None:
    base = {
        "id": "c1",
        "specialist": "general",
        "kind": "arithmetic",
        "slices": "[tool]",
        "input": "'What is 1 + 0?'",
        "expect": "{number: '1', tools: {calculator: 1}}",
    }
    key = raw.split(":", 1)[0]
    base[key] = raw.split(":", 1)[1].strip()
    path = tmp_path / "cases.yaml"
    path.write_text("- {" + ", ".join(f"{k}: {v}" for k, v in base.items()) + "}\n")
    with pytest.raises(ValueError, match=problem):
        load_cases(catalog, path)


def _case(**expect: object) -> Case:
    return Case("t", "general", "arithmetic", ("tool",), "What is 12 * (3 + 4)?", expect)


def test_grade_needs_a_completed_answer_and_the_tool() -> None:
    case = _case(number="84", tools={"calculator": 1})
    assert grade(case, "12 * (3 + 4) = 84", {"calculator": 1}, SITE).passed
    assert grade(case, None, {"calculator": 1}, SITE).problems == ["the task did not complete"]
    assert not grade(case, "  ", {"calculator": 1}, SITE).passed
    # Right number, but computed without the calculator: the task's events say so.
    assert grade(case, "84", {}, SITE).problems == ["calculator called 0 time(s), expected at least 1"]
    stored_call = grade(case, '{{"name": "calculator", "arguments": {"expression": "12*(3+4)"}}}', {}, SITE)
    assert not stored_call.passed and stored_call.tool_call_text


def test_research_grading_fills_in_the_site(catalog: Catalog) -> None:
    case = next(c for c in load_cases(catalog) if c.id == "research-01")
    assert "{site}" not in case.text(SITE) and SITE in case.text(SITE)
    right = f"The Heron H2 battery lasts 14 months ({SITE}/products/heron.html)."
    assert grade(case, right, {"http_fetch": 1}, SITE).passed
    assert not grade(case, "The Heron H2 battery lasts 14 months.", {"http_fetch": 1}, SITE).passed
    assert not grade(case, right.replace("14", "12"), {"http_fetch": 1}, SITE).passed


def test_the_fixture_site_serves_its_pages_with_absolute_links() -> None:
    with serve_site() as site:
        page = httpx.get(f"{site.base_url}/index.html")
        assert page.status_code == 200 and f'href="{site.base_url}/products/heron.html"' in page.text
        assert "14 months" in httpx.get(f"{site.base_url}/products/heron.html").text
        assert httpx.get(f"{site.base_url}/nowhere.html").status_code == 404
        assert site.hits == ["/index.html", "/products/heron.html", "/nowhere.html"]
        assert site.worker_env()["TASKYARD_WORKER_HTTP_ALLOWLIST"] == f"127.0.0.1:{site.port}"


def test_the_report_groups_and_prints_the_figures() -> None:
    case = _case(number="84", tools={"calculator": 1})
    outcomes = [
        Outcome(
            case, grade(case, "84", {"calculator": 1}, SITE), "completed", steps=2, tokens=100, latency_s=1.0
        ),
        Outcome(
            case, grade(case, "85", {"calculator": 1}, SITE), "completed", steps=2, tokens=300, latency_s=3.0
        ),
        Outcome(case, grade(case, '{"name": "calculator", "arguments": {}}', {}, SITE), "completed", steps=1),
    ]
    summary = summarize(outcomes)
    assert summary["overall"]["passed"] == 1 and summary["overall"]["n"] == 3
    assert summary["specialists"]["general"]["tokens_mean"] == pytest.approx(400 / 3)
    assert summary["slices"]["tool"]["latency_p95_s"] == 3.0
    assert summary["tool_call_text"] == 1
    table = markdown(summary, "### heading")
    assert "| overall | 33.3 % (1/3) |" in table and "Tool-call text stored as an answer: 1" in table
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0 and percentile([], 0.5) is None


def test_the_command_line_picks_the_model_and_the_cases(catalog: Catalog, monkeypatch) -> None:
    monkeypatch.delenv("TASKYARD_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert parse_args([]).llm == "local"
    assert parse_args(["--api-url", "http://127.0.0.1:8000"]).llm == "stack"
    assert parse_args(["--base-url", "http://llm:8000/v1"]).llm == "endpoint"
    cases = load_cases(catalog)
    chosen = select(
        cases, parse_args(["--specialist", "researcher", "--slice", "multi-step", "--limit", "3"])
    )
    assert len(chosen) == 3 and all(c.specialist == "researcher" and "multi-step" in c.slices for c in chosen)
    assert [c.id for c in select(cases, parse_args(["--case", "calc-02", "--case", "sum-01"]))] == [
        "calc-02",
        "sum-01",
    ]

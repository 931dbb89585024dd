"""The labelled agent set (``cases.yaml``): loading, checking it against the catalog, and grading one answer.

A case is a task as a user would submit it (``input``, sent to ``specialist``), the ``kind`` of work, its
``slices``, and ``expect``: what its answer must satisfy. ``{site}`` in an input stands for the fixture site's
base URL (``site.py``), filled in when the case runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from evals.agent import checks
from taskyard_common.catalog import Catalog

CASES_PATH = Path(__file__).with_name("cases.yaml")
KINDS = ("arithmetic", "triage", "extraction", "summary", "research")
SLICES = ("plain", "tool", "multi-step", "non-english", "adversarial")
URGENCIES = ("low", "medium", "high", "critical")
# What each kind's ``expect`` must hold (besides the optional keys every kind may use).
REQUIRED = {
    "arithmetic": {"number", "tools"},
    "triage": {"category", "urgency"},
    "extraction": {"fields"},
    "summary": {"facts"},
    "research": {"facts", "cite", "tools"},
}
OPTIONAL = {
    "number",
    "tools",
    "facts",
    "no_new_numbers",
    "category",
    "urgency",
    "fields",
    "cite",
    "forbid_cite",
}


@dataclass(frozen=True)
class Case:
    id: str
    specialist: str
    kind: str
    slices: tuple[str, ...]
    input: str
    expect: Mapping[str, Any] = field(default_factory=dict)

    def text(self, site: str) -> str:
        """The input as submitted: the fixture site's base URL in place of ``{site}``."""
        return self.input.replace("{site}", site)

    @property
    def tools(self) -> dict[str, int]:
        return dict(self.expect.get("tools") or {})


def load_cases(catalog: Catalog, path: Path = CASES_PATH) -> list[Case]:
    """The cases, checked: a specialist outside the catalog, a tool the specialist lacks, an unknown kind,
    slice or expectation, or a missing one is a broken case (ValueError naming it)."""
    cases = []
    seen: set[str] = set()
    for raw in yaml.safe_load(path.read_text(encoding="utf-8")):
        case = Case(
            id=raw["id"],
            specialist=raw["specialist"],
            kind=raw["kind"],
            slices=tuple(raw["slices"]),
            input=raw["input"],
            expect=raw.get("expect") or {},
        )
        problems = _problems(case, catalog, seen)
        if problems:
            raise ValueError(f"{path}: case {case.id}: {', '.join(problems)}")
        seen.add(case.id)
        cases.append(case)
    return cases


def _problems(case: Case, catalog: Catalog, seen: set[str]) -> list[str]:
    spec = catalog.get(case.specialist)
    keys = set(case.expect)
    problems = [
        case.id in seen and "duplicate id",
        spec is None and f"specialist {case.specialist!r} is not in the catalog",
        case.kind not in KINDS and f"unknown kind {case.kind!r}",
        not case.slices and "no slice",
        not set(case.slices) <= set(SLICES) and f"unknown slice in {case.slices}",
        not keys <= OPTIONAL and f"unknown expectations {sorted(keys - OPTIONAL)}",
        case.kind in REQUIRED
        and not REQUIRED[case.kind] <= keys
        and f"{case.kind} needs {REQUIRED[case.kind]}",
        ("{site}" in case.input) != (case.kind == "research") and "only research cases use {site}",
    ]
    if spec is not None:
        missing = set(case.tools) - set(spec.tools)
        problems.append(bool(missing) and f"{case.specialist} has no tool {sorted(missing)}")
    urgency = case.expect.get("urgency") or []
    problems.append(not set(urgency) <= set(URGENCIES) and f"urgency must be among {URGENCIES}")
    return [p for p in problems if p]


@dataclass(frozen=True)
class Grade:
    passed: bool
    problems: list[str]
    # The stored answer is a tool call written as text (counted apart: it must never happen).
    tool_call_text: bool = False


def grade(case: Case, answer: str | None, tools_used: Mapping[str, int], site: str) -> Grade:
    """Whether ``answer`` (None: the task did not complete) passes every check of ``case``; ``tools_used``
    holds the successful calls of each tool, as the task's events recorded them."""
    if answer is None:
        return Grade(False, ["the task did not complete"])
    if not answer.strip():
        return Grade(False, ["the answer is empty"])
    if checks.tool_call_text(answer):
        return Grade(False, ["the stored answer is tool-call text"], tool_call_text=True)
    expect = case.expect
    problems = checks.check_tools(tools_used, case.tools)
    if "number" in expect:
        problems += checks.check_number(answer, str(expect["number"]))
    if "facts" in expect:
        problems += checks.check_facts(answer, _facts(expect["facts"]))
    if expect.get("no_new_numbers"):
        problems += checks.check_no_new_numbers(answer, case.text(site))
    if "category" in expect:
        problems += checks.check_label(answer, "category", expect["category"])
    if "urgency" in expect:
        problems += checks.check_urgency(answer, expect["urgency"])
    if "fields" in expect:
        problems += checks.check_fields(answer, expect["fields"])
    if "cite" in expect or "forbid_cite" in expect:
        problems += checks.check_citations(
            answer, site, expect.get("cite") or [], expect.get("forbid_cite") or []
        )
    return Grade(not problems, problems)


def _facts(raw: Sequence[Any]) -> list[list[str]]:
    """Facts as written in the file: a string, or a list of acceptable spellings."""
    return [[str(f)] if not isinstance(f, list) else [str(o) for o in f] for f in raw]

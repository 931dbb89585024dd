"""The routing evaluation's labelled set is well formed, and the rules router keeps its figures."""

import asyncio
from collections import Counter

import pytest

from evals.routing.__main__ import main
from evals.routing.cases import (
    DEV,
    HELD_OUT,
    SLICES,
    eval_sets,
    load_cases,
    misspelt,
    sample,
    without_examples,
)
from evals.routing.score import route_all, summarize
from taskyard_broker_agent.routing.router import Router
from taskyard_common.catalog import Catalog, load_catalog


def test_the_set_covers_every_slice_and_specialist(catalog: Catalog):
    cases = load_cases(catalog)  # refuses labels outside the catalog, duplicate ids, bad injection cases
    assert len(cases) >= 150
    slices = Counter(s for c in cases for s in c.slices)
    assert set(slices) == set(SLICES) and min(slices.values()) >= 10
    assert set(Counter(c.label for c in cases)) == set(catalog.names)
    assert sum(c.injected is not None for c in cases) >= 10
    splits = Counter(c.split for c in cases)
    assert splits[HELD_OUT] >= 40 and splits[DEV] > splits[HELD_OUT]
    quick = sample(cases, 3)
    assert len(quick) == 6 * 3 + 10 and sum(c.injected is not None for c in quick) == 10


def test_the_held_out_set_is_well_formed_and_has_no_examples():
    held_out = eval_sets()["heldout"]
    catalog = load_catalog(held_out.catalog)
    assert len(catalog.specialists) == 8 and not any(s.examples for s in catalog.specialists)
    # Every label and injection target is in its own catalog (load_cases refuses anything else).
    cases = load_cases(catalog, held_out.cases, held_out=True)
    assert len(cases) >= 200 and {c.split for c in cases} == {HELD_OUT}
    assert set(Counter(c.label for c in cases)) == set(catalog.names)
    slices = Counter(s for c in cases for s in c.slices)
    assert slices["nofit"] >= 20 and slices["injection"] >= 10 and slices["distractor"] >= 20
    assert slices["multilingual"] >= 0.2 * len(cases)
    assert all(c.label == catalog.fallback for c in cases if "nofit" in c.slices)


def test_the_tuning_set_is_well_formed_has_no_examples_and_a_dev_split():
    tuning = eval_sets()["tuning"]
    catalog = load_catalog(tuning.catalog)
    assert len(catalog.specialists) == 8 and not any(s.examples for s in catalog.specialists)
    cases = load_cases(catalog, tuning.cases)
    assert len(cases) >= 120 and set(Counter(c.label for c in cases)) == set(catalog.names)
    slices = Counter(s for c in cases for s in c.slices)
    assert set(slices) == set(SLICES) and slices["nofit"] >= 15 and slices["multilingual"] >= 25
    splits = Counter(c.split for c in cases)
    assert splits[DEV] > splits[HELD_OUT] >= 30


def test_a_label_outside_the_catalog_is_refused(catalog: Catalog, tmp_path):
    bad = tmp_path / "cases.yaml"
    bad.write_text('- {id: x-1, label: sql-analyst, slices: [clean], input: "a query"}\n')
    with pytest.raises(ValueError, match="not in the catalog"):
        load_cases(catalog, bad)


def test_without_examples_keeps_everything_else(catalog: Catalog):
    bare = without_examples(catalog)
    assert bare.names == catalog.names and bare.fallback == catalog.fallback
    assert not any(s.examples for s in bare.specialists)
    assert [s.keywords for s in bare.specialists] == [s.keywords for s in catalog.specialists]


def test_typing_slips_swap_letters_inside_long_words_and_repeat_by_seed(catalog: Catalog):
    cases = load_cases(catalog)[:40]
    slipped = misspelt(cases, seed=1)
    assert misspelt(cases, seed=1) == slipped and misspelt(cases, seed=2) != slipped
    assert [c.label for c in slipped] == [c.label for c in cases]
    changed = [(a.input, b.input) for a, b in zip(cases, slipped, strict=True) if a.input != b.input]
    assert len(changed) > 10
    for before, after in changed:
        if isinstance(before, str):
            assert sorted(before) == sorted(after) and len(before) == len(after)
            # Short words, first and last letters are kept.
            assert before.split()[0][0] == after.split()[0][0]
    # A case's slips do not depend on the other cases chosen.
    assert misspelt(cases[5:6], seed=1) == slipped[5:6]


def test_rules_router_figures(catalog: Catalog):
    # A floor under the figures docs/routing.md reports, so a change that costs accuracy shows here.
    outcomes = asyncio.run(route_all(Router.create(catalog, None), load_cases(catalog), repeat=False))
    summary = summarize(outcomes)
    assert summary["overall"]["accuracy"] >= 0.88
    assert summary["splits"][HELD_OUT]["accuracy"] >= 0.88
    assert summary["slices"]["nofit"]["accuracy"] >= 0.90
    assert summary["slices"]["multilingual"]["accuracy"] >= 0.90
    assert summary["injection_followed"] == 0
    assert summary["llm_calls_per_decision"] == 0


def test_rules_router_figures_on_the_held_out_set():
    # A floor only (issue 20: >= 70 % without examples); nothing is tuned to this set's cases.
    held_out = eval_sets()["heldout"]
    catalog = load_catalog(held_out.catalog)
    cases = load_cases(catalog, held_out.cases, held_out=True)
    summary = summarize(asyncio.run(route_all(Router.create(catalog, None), cases, repeat=False)))
    assert summary["overall"]["accuracy"] >= 0.75
    assert summary["slices"]["multilingual"]["accuracy"] >= 0.75


def test_rules_router_figures_on_the_tuning_set():
    # A floor under docs/routing.md's figure (63.1 %), so a change that costs accuracy shows here.
    tuning = eval_sets()["tuning"]
    catalog = load_catalog(tuning.catalog)
    summary = summarize(
        asyncio.run(route_all(Router.create(catalog, None), load_cases(catalog, tuning.cases), repeat=False))
    )
    assert summary["overall"]["accuracy"] >= 0.62
    assert summary["slices"]["nofit"]["accuracy"] >= 0.85


def test_the_command_runs_the_rules_alone(capsys, monkeypatch):
    for name in ("TASKYARD_LLM_BASE_URL", "TASKYARD_LLM_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert main(["--split", "held-out"]) == 0
    out = capsys.readouterr().out
    assert "== shipped / rules" in out and "== heldout / rules" in out and "== tuning / rules" in out
    assert "injection followed" in out and "/ llm" not in out


def test_the_report_counts_what_the_evidence_floor_overruled(catalog: Catalog):
    """The LLM's choice, from the reason of a decision the floor overruled, gives the figures without the
    floor from the same run (evidence.Verdict.cause's wording is what is read)."""
    from evals.routing.cases import Case
    from evals.routing.score import Outcome
    from taskyard_broker_agent.routing.evidence import judge

    cause = judge("researcher", [], fallback="general", floor=1.5).cause
    reason = (
        f"no specialist matched: fallback to general (rules fallback, no_evidence: {cause}, confidence 0.9)"
    )
    nofit = Case(id="n", input="Tell me a joke", label="general", slices=("nofit",))
    task = Case(id="t", input="Find sources", label="researcher", slices=("clean",))
    overruled = Outcome(nofit, "general", "rules", 1.0, 1, 10, reason, fallback="no_evidence")
    wrongly = Outcome(task, "general", "rules", 1.0, 1, 10, reason, fallback="no_evidence")
    kept = Outcome(task, "researcher", "llm", 1.0, 1, 10, "needs sources")
    assert (overruled.llm_choice, kept.llm_choice) == ("researcher", "researcher")
    floor = summarize([overruled, wrongly, kept])["evidence_floor"]
    assert (floor["overruled"], floor["right_after"], floor["right_before"]) == (2, 1, 1)
    assert (floor["without"]["correct"], floor["without_nofit"]["correct"]) == (2, 0)


def test_a_choice_the_check_outweighed_is_counted_with_the_llms_choice():
    """checks.EvidenceCheck's cause for an outweighed choice names the LLM's choice as the floor's does."""
    from evals.routing.cases import Case
    from evals.routing.score import Outcome

    reason = (
        "matched: cancel, reservation (rules fallback, outweighed: the LLM chose trips (2.19 of evidence in "
        "the request) and its reason does not back it; the request shows 8.76 for booking)"
    )
    case = Case(id="o", input="Cancel my reservation", label="booking", slices=("clean",))
    outweighed = Outcome(case, "booking", "rules", 1.0, 1, 10, reason, fallback="outweighed")
    assert outweighed.llm_choice == "trips"
    floor = summarize([outweighed])["evidence_floor"]
    assert (floor["overruled"], floor["outweighed"], floor["right_after"], floor["right_before"]) == (
        1,
        1,
        1,
        0,
    )


def test_the_evidence_floor_table_runs_on_the_dev_split(capsys):
    from evals.routing.evidence_floor import main as floor_table

    assert floor_table([]) == 0
    table = capsys.readouterr().out
    assert "shipped (dev)" in table and "| 1.5 | " in table

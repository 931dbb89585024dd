"""The LLM router's no-fit path: a specialist the LLM chose stands only on evidence in the request."""

import pytest

from taskyard_broker_agent.routing.evidence import (
    EVIDENCE_FLOOR,
    copies_line,
    judge,
    outweighed,
    reason_text,
)
from taskyard_broker_agent.routing.prompt import REASON_MAX_CHARS, instruction_terms
from taskyard_broker_agent.routing.rules import FALLBACK_THRESHOLD, Match, RulesRouter
from taskyard_broker_agent.settings import BrokerAgentSettings
from taskyard_common.catalog import Catalog


def matches(**scores: float) -> list[Match]:
    return [Match(name.replace("_", "-"), score, ()) for name, score in scores.items()]


def test_a_choice_below_the_floor_does_not_stand():
    verdict = judge("researcher", matches(researcher=1.47, general=0.0), fallback="general", floor=1.5)
    assert not verdict.stands
    assert (verdict.specialist, verdict.score, verdict.floor) == ("researcher", 1.47, 1.5)
    assert verdict.cause == (
        "the LLM chose researcher (1.47 of evidence in the request and its reason, below the floor 1.50)"
    )


def test_a_choice_at_or_above_the_floor_stands():
    assert judge("researcher", matches(researcher=1.5), fallback="general", floor=1.5).stands
    assert judge("support-analyst", matches(support_analyst=9.0), fallback="general", floor=1.5).stands


def test_evidence_in_the_llms_reason_adds_to_the_requests():
    # Neither alone reaches the floor; together they do.
    request = matches(researcher=0.8, general=0.0)
    reason = matches(researcher=0.8, summarizer=0.5)
    assert not judge("researcher", request, fallback="general", floor=1.5).stands
    verdict = judge("researcher", request, fallback="general", floor=1.5, reason_matches=reason)
    assert verdict.stands and verdict.score == pytest.approx(1.6)


def test_a_reason_that_reads_as_another_specialists_task_adds_nothing():
    # "A question general knowledge answers" (the prompt's no-fit rule, echoed) for researcher.
    reason = matches(researcher=2.3, general=3.8)
    verdict = judge(
        "researcher", matches(researcher=0.0), fallback="general", floor=1.5, reason_matches=reason
    )
    assert (verdict.stands, verdict.score) == (False, 0.0)


def test_the_chosen_specialists_name_is_taken_out_of_the_reason():
    assert reason_text("Send it to Trip-Planner, a trip task", "trip-planner").split() == [
        "Send", "it", "to", ",", "a", "trip", "task"
    ]  # fmt: skip
    assert reason_text("Plan a visit to Rome, not for general", "trip-planner") == (
        "Plan a visit to Rome, not for general"
    )
    # Cut by the reason's length cap: the start of the name at its end is the name; in a shorter reason
    # the last word is the model's own.
    cut = "The request asks for a list of prime numbers, which is a task that the 'research"
    assert len(cut) == REASON_MAX_CHARS
    assert reason_text(cut, "researcher").endswith("that the '")
    assert reason_text("Find academic research", "researcher") == "Find academic research"
    assert reason_text("Find sources on the history of Rome", "history-teacher").endswith("of Rome")


def test_words_of_the_prompts_own_instructions_are_taken_out_of_the_reason(catalog: Catalog):
    terms = instruction_terms(catalog)
    echoed = "The request asks for the task its line describes, not when it merely shares a topic."
    assert reason_text(echoed, "support-analyst", terms) == ""
    # The catalog's names and keywords are never instruction words ("general", "explain", "ticket").
    assert reason_text("Explain the ticket to a general audience", "researcher", terms).split() == [
        "Explain", "ticket", "general", "audience"
    ]  # fmt: skip


def test_the_fallback_needs_no_evidence():
    # Choosing the fallback is saying "none of these fits": nothing to check.
    assert judge("general", matches(general=0.0, researcher=8.0), fallback="general", floor=1.5).stands


def test_a_specialist_without_any_match_has_no_evidence():
    verdict = judge("researcher", [], fallback="general", floor=1.5)
    assert (verdict.stands, verdict.score) == (False, 0.0)


def test_floor_zero_turns_the_check_off():
    assert judge("researcher", matches(researcher=0.0), fallback="general", floor=0.0).stands


def test_the_floor_is_the_rules_routers_threshold_and_the_settings_default():
    # One notion of "fits", calibrated once (docs/routing.md, "The evidence floor").
    assert EVIDENCE_FLOOR == FALLBACK_THRESHOLD == BrokerAgentSettings().evidence_floor


@pytest.mark.parametrize(
    ("request_text", "chosen", "stands"),
    [
        # No-fit requests the local model sent to a specialist (docs/routing.md, shipped misses).
        ("Recommend a good science-fiction novel", "researcher", False),
        ("Name three prime numbers greater than 100", "researcher", False),
        ("lorem ipsum dolor sit amet", "summarizer", False),
        # Real tasks for the specialist the LLM chose.
        ("Research the GitHub API rate limits and cite the official documentation", "researcher", True),
        ("Please summarize this article: the council approved the budget", "summarizer", True),
        ("Customer ticket: I was charged twice and want a refund", "support-analyst", True),
        # Cross-lingual evidence counts (the lexicon): "Fasse ... zusammen" is a summary.
        ("Fasse diesen Bericht kurz zusammen", "summarizer", True),
    ],
)
def test_evidence_from_the_shipped_catalog(catalog: Catalog, request_text: str, chosen: str, stands: bool):
    # (The request alone: these hold whatever the LLM's reason adds.)
    rules = RulesRouter(catalog)
    verdict = judge(chosen, rules.scores(request_text), fallback=catalog.fallback, floor=EVIDENCE_FLOOR)
    assert verdict.stands is stands


@pytest.mark.parametrize(
    ("request_text", "reason", "chosen", "stands"),
    [
        # A language the lexicon does not know: the LLM's restatement carries the evidence.
        (
            "Fupisha ripoti hii kwa sentensi tatu",
            "Summarize the report in three sentences",
            "summarizer",
            True,
        ),
        # Naming its choice is none; nor is a no-fit request's restatement.
        ("Fupisha ripoti hii kwa sentensi tatu", "This is for the summarizer", "summarizer", False),
        ("Recommend a good science-fiction novel", "A book recommendation", "researcher", False),
        # The prompt's no-fit rule, echoed: it reads as the fallback's task.
        (
            "Recommend a good science-fiction novel",
            "A question general knowledge answers",
            "researcher",
            False,
        ),
    ],
)
def test_evidence_from_the_llms_reason(
    catalog: Catalog, request_text: str, reason: str, chosen: str, stands: bool
):
    rules = RulesRouter(catalog)
    verdict = judge(
        chosen,
        rules.scores(request_text),
        fallback=catalog.fallback,
        floor=EVIDENCE_FLOOR,
        reason_matches=rules.scores(reason_text(reason, chosen, instruction_terms(catalog))),
    )
    assert verdict.stands is stands


@pytest.mark.parametrize(
    ("reason", "copied"),
    [
        ("Plan what guests do at their destination", True),
        ("plans what guests do at their destination.", True),
        ("A room for 15 people with a projector", False),
        ("Guests want to know what to do at the destination", False),
        ("", False),
    ],
)
def test_a_reason_that_copies_the_chosen_line_is_a_copy(reason: str, copied: bool):
    line = ("Plans what guests do at their destination: day-by-day itineraries, sightseeing, restaurants.",)
    assert copies_line(reason, line) is copied


def test_a_copied_example_is_a_copy_but_words_across_two_texts_are_not():
    line = ("Summarizes documents into key points.", "Summarize this document in five bullet points")
    assert copies_line("Summarize this document in five bullet points", line)
    assert not copies_line("key points summarize this", line)


@pytest.mark.parametrize(
    ("request_scores", "reason_scores", "expected"),
    [
        # A reason that reads as nothing: the request decides, and it shows far more for the rival.
        ({"a": 1.8, "b": 6.6}, {}, True),
        # A reason that reads firmly as the rival, as the request does.
        ({"a": 2.2, "b": 7.7}, {"a": 2.2, "b": 6.6}, True),
        # A reason that backs the choice: the model read the task behind the rival's words.
        ({"a": 2.2, "b": 7.7}, {"a": 3.0}, False),
        # A reason that reads as the rival, but weakly (below twice the floor): not enough to overrule.
        ({"a": 2.2, "b": 10.6}, {"b": 2.2}, False),
        # The rival's lead in the request under the ratio, or its evidence under twice the floor.
        ({"a": 2.0, "b": 3.9}, {}, False),
        ({"a": 0.5, "b": 2.9}, {}, False),
    ],
)
def test_a_choice_its_reason_does_not_back_is_outweighed_by_a_far_stronger_rival(
    request_scores: dict[str, float], reason_scores: dict[str, float], expected: bool
):
    said = matches(**reason_scores)
    assert outweighed("a", "b", matches(**request_scores), said, floor=EVIDENCE_FLOOR) is expected


def test_zero_scores_in_the_reason_read_as_nothing():
    assert outweighed("a", "b", matches(a=1.0, b=5.0), matches(a=0.0, b=0.0), floor=EVIDENCE_FLOOR)

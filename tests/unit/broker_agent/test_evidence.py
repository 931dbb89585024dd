"""The LLM router's no-fit path: a specialist the LLM chose stands only on evidence in the request."""

import pytest

from taskyard_broker_agent.routing.evidence import EVIDENCE_FLOOR, judge
from taskyard_broker_agent.routing.rules import FALLBACK_THRESHOLD, Match, RulesRouter
from taskyard_broker_agent.settings import BrokerAgentSettings
from taskyard_common.catalog import Catalog


def matches(**scores: float) -> list[Match]:
    return [Match(name.replace("_", "-"), score, ()) for name, score in scores.items()]


def test_a_choice_below_the_floor_does_not_stand():
    verdict = judge("researcher", matches(researcher=1.47, general=0.0), fallback="general", floor=1.5)
    assert not verdict.stands
    assert (verdict.specialist, verdict.score, verdict.floor) == ("researcher", 1.47, 1.5)
    assert verdict.cause == "the LLM chose researcher (1.47 of evidence in the request, below the floor 1.50)"


def test_a_choice_at_or_above_the_floor_stands():
    assert judge("researcher", matches(researcher=1.5), fallback="general", floor=1.5).stands
    assert judge("support-analyst", matches(support_analyst=9.0), fallback="general", floor=1.5).stands


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
    rules = RulesRouter(catalog)
    verdict = judge(chosen, rules.scores(request_text), fallback=catalog.fallback, floor=EVIDENCE_FLOOR)
    assert verdict.stands is stands

"""The rules router: deterministic lexical routing against the shipped catalog."""

import pytest

from taskyard_broker_agent.routing.ngrams import EDIT_SIMILARITY, FuzzyVocabulary, one_edit
from taskyard_broker_agent.routing.rules import (
    MAX_CONFIDENCE,
    NO_MATCH_CONFIDENCE,
    RulesRouter,
    confidence,
    input_text,
    matched_nothing,
    stem,
    tokenize,
)
from taskyard_common.catalog import Catalog, parse_catalog
from taskyard_common.messages import RoutingMethod


@pytest.fixture(scope="module")
def rules(catalog: Catalog) -> RulesRouter:
    return RulesRouter(catalog)


@pytest.mark.parametrize(
    ("request_text", "specialist"),
    [
        ("Please summarize this document for me", "summarizer"),
        ("Give me a TL;DR of the meeting notes", "summarizer"),
        ("Summaries of these three reports, key points only", "summarizer"),
        ("Customer ticket: I want a refund, the order arrived broken", "support-analyst"),
        ("Our customer cannot login to their account since this morning", "support-analyst"),
        ("Research the topic and cite your sources, see https://example.com/docs", "researcher"),
        ("Look up the documentation and compare the two approaches", "researcher"),
        ("Write a short poem about spring", "general"),
    ],
)
def test_clear_requests_go_to_their_specialist(rules: RulesRouter, request_text: str, specialist: str):
    decision = rules.route(request_text)
    assert decision.method is RoutingMethod.RULES
    assert decision.specialist == specialist
    assert decision.reason.startswith("matched: ")
    assert NO_MATCH_CONFIDENCE < decision.confidence <= MAX_CONFIDENCE


@pytest.mark.parametrize("vague", ["hello there", "zxcv qwerty", "", "   ", "!!! ??? ...", {}, [], {"n": 42}])
def test_vague_or_empty_requests_go_to_the_fallback_with_low_confidence(
    rules: RulesRouter, catalog: Catalog, vague
):
    decision = rules.route(vague)
    assert decision.specialist == catalog.fallback
    assert decision.confidence == NO_MATCH_CONFIDENCE
    assert "no specialist matched" in decision.reason


def test_json_objects_are_flattened_to_keys_and_string_values(rules: RulesRouter):
    decision = rules.route({"ticket": {"customer_id": 42, "body": "my login is broken"}, "priority": 3})
    assert decision.specialist == "support-analyst"
    assert "ticket" in decision.reason and "login" in decision.reason
    # Keys route too: a structured request may say what it is only by its shape.
    assert rules.route({"document": "Q3 figures ...", "want": "summary"}).specialist == "summarizer"
    assert rules.route({"urls": ["https://a.example", "https://b.example"]}).specialist == "researcher"


def test_keywords_outweigh_description_words(rules: RulesRouter):
    # "documents" is in the summarizer's description; "research" and "sources" are researcher keywords.
    decision = rules.route("research these documents and cite sources")
    assert decision.specialist == "researcher"


def without_examples(catalog: Catalog) -> Catalog:
    specialists = tuple(s.model_copy(update={"examples": ()}) for s in catalog.specialists)
    return catalog.model_copy(update={"specialists": specialists})


def test_multi_word_keywords_match_as_phrases_and_their_words_as_description_words(catalog: Catalog):
    # Without the examples, whose words ("look") would also count.
    rules = RulesRouter(without_examples(catalog))
    phrase = rules.route("look up the population of Lyon")
    assert phrase.specialist == "researcher" and phrase.reason.startswith("matched: look up")

    def researcher(text: str) -> dict[str, float]:
        return dict(next(m for m in rules.scores(text) if m.specialist == "researcher").terms)

    scattered = researcher("up the look of Lyon")
    assert "look up" not in scattered and set(scattered) == {"look"}
    # "look" alone weighs what a description word does: less than the phrase, less than a keyword.
    assert scattered["look"] < researcher("look up the population of Lyon")["look up"]
    assert scattered["look"] < researcher("find the population of Lyon")["find"]


def test_stronger_evidence_means_higher_confidence(rules: RulesRouter):
    weak = rules.route("Please summarize this")
    strong = rules.route("Please summarize this report: a TL;DR summary with key points")
    assert weak.specialist == strong.specialist == "summarizer"
    assert strong.confidence > weak.confidence
    # A close call between two specialists is less sure than a clear one.
    assert confidence(5.0, 4.5) < confidence(5.0, 0.0)
    assert 0.0 < confidence(0.01, 0.0) <= confidence(1000.0, 0.0) == MAX_CONFIDENCE


def test_routing_is_deterministic(catalog: Catalog):
    request = {"text": "customer asks for a summary of their refund ticket", "source": "email"}
    first = RulesRouter(catalog).route(request)
    assert all(RulesRouter(catalog).route(request) == first for _ in range(5))


def test_ties_go_to_the_earlier_specialist():
    catalog = parse_catalog(
        """
fallback: b
specialists:
  - {name: a, description: handles apples, keywords: [fruit], instructions: x}
  - {name: b, description: handles bananas, keywords: [fruit], instructions: x}
"""
    )
    # (A word both share is weak evidence: with the default threshold it goes to the fallback.)
    assert RulesRouter(catalog, fallback_threshold=0).route("fruit").specialist == "a"
    assert RulesRouter(catalog).route("fruit").specialist == "b"


@pytest.mark.parametrize(
    ("request_text", "specialist"),
    [
        ("pls summrize this artcle", "summarizer"),
        ("custmer complant about a refnd", "support-analyst"),
        ("reserch this and give me the sorces", "researcher"),
    ],
)
def test_typos_still_match_by_character_ngrams(rules: RulesRouter, request_text: str, specialist: str):
    assert rules.route(request_text).specialist == specialist


@pytest.mark.parametrize(
    ("request_text", "specialist"),
    [
        # Two letters swapped: too few trigrams left for the n-grams (``custoemr``/``customer``: Dice 0.4).
        ("my custoemr is angyr", "support-analyst"),
        ("please sumamrize it", "summarizer"),
        ("reasearch the topic", "researcher"),
    ],
)
def test_swapped_letters_match_a_keyword_one_edit_away(
    rules: RulesRouter, request_text: str, specialist: str
):
    assert rules.route(request_text).specialist == specialist


@pytest.mark.parametrize(
    ("word", "term", "expected"),
    [
        ("transalte", "translate", True),  # adjacent letters swapped
        ("slogen", "slogan", True),  # one letter replaced
        ("slogna", "slogan", True),
        ("summarise", "summarize", True),
        ("sumary", "summary", True),  # one letter dropped
        ("summmary", "summary", True),  # one letter added
        ("ticket", "ticket", False),  # the same word is no slip
        ("price", "prize", False),  # five letters: a replaced letter makes too many real words
        ("prcie", "price", True),  # but a swap does not
        ("xummary", "summary", False),  # the first letter is kept by replacements
        ("tarnslaet", "translate", False),  # two slips
        ("contracts", "contract", True),
        ("bug", "bud", False),  # short words match exactly only
    ],
)
def test_one_edit(word: str, term: str, expected: bool):
    assert one_edit(word, term) is expected
    assert one_edit(term, word) is expected


def test_the_vocabulary_prefers_a_trigram_match_and_falls_back_to_one_edit():
    vocabulary = FuzzyVocabulary(["summarize", "translate", "customer"])
    assert vocabulary.closest("summrize") == ("summarize", pytest.approx(0.706, abs=0.01))
    assert vocabulary.closest("transalte") == ("translate", EDIT_SIMILARITY)
    assert vocabulary.closest("cusotmer") == ("customer", EDIT_SIMILARITY)
    assert vocabulary.closest("banana") is None


def test_words_that_only_share_an_ending_or_one_letter_of_five_do_not_match():
    # Dice 0.6 each, the minimum: "What's the difference between ..." is not about a conference.
    vocabulary = FuzzyVocabulary(["conference", "towel", "ticket"])
    assert vocabulary.closest("difference") is None
    assert vocabulary.closest("tower") is None
    # A slip inside the word still matches; a slip at its start only one edit away.
    assert vocabulary.closest("confrence") == ("conference", pytest.approx(0.7, abs=0.05))
    assert vocabulary.closest("tciket") == ("ticket", EDIT_SIMILARITY)


@pytest.mark.parametrize(
    ("request_text", "specialist"),
    [
        ("Fais-moi un résumé de ce rapport", "summarizer"),
        ("请总结这份会议记录", "summarizer"),
        ("No puedo entrar en mi cuenta", "support-analyst"),
    ],
)
def test_other_languages_match_through_the_catalog_examples(rules, request_text: str, specialist: str):
    assert rules.route(request_text).specialist == specialist


def test_a_weak_match_goes_to_the_fallback(catalog: Catalog):
    # "notes" is a word two specialists' profiles share: too weak to send a request anywhere but the fallback.
    weak = RulesRouter(catalog).route("Notes")
    assert (weak.specialist, weak.confidence) == (catalog.fallback, NO_MATCH_CONFIDENCE)
    assert weak.reason.startswith("weak match (summarizer)")
    assert RulesRouter(catalog, fallback_threshold=0).route("Notes").specialist == "summarizer"


def test_tokenize_lowercases_splits_and_strips_plurals():
    assert tokenize("Tickets, URLs & TL;DR-summaries!") == ["ticket", "url", "tl", "dr", "summary"]
    assert [stem(w) for w in ("process", "status", "analysis", "docs", "bus")] == [
        "process",
        "status",
        "analysis",
        "doc",
        "bus",
    ]


def test_input_text_is_bounded():
    assert len(input_text("word " * 100_000, limit=1000)) <= 1000
    assert input_text({"a": ["b", {"c": "d"}], "e": 1, "f": True}) == "a b c d e f"


@pytest.mark.parametrize(
    "request_text",
    # One plain description or example word ("tell me", "day", "fiction" ~ "action") is a guess, not a fit.
    ["Tell me something nice", "Plan my day", "Recommend a good science-fiction novel."],
)
def test_one_plain_word_is_no_fit(rules: RulesRouter, request_text: str):
    decision = rules.route(request_text)
    assert decision.specialist == "general"
    assert decision.confidence == NO_MATCH_CONFIDENCE


def test_strict_routing_takes_one_plain_description_word_for_a_guess():
    # Eight specialists: one rare description word alone clears the threshold (idf), a keyword is firm.
    others = "\n".join(
        f"  - {{name: s{i}, description: handles item{i} orders, keywords: [item{i}], instructions: x}}"
        for i in range(6)
    )
    catalog = parse_catalog(
        f"""
fallback: helper
specialists:
  - {{name: booking, description: Makes and cancels room reservations, keywords: [reservation], instructions: x}}
{others}
  - {{name: helper, description: anything else, keywords: [question], instructions: x}}
"""
    )
    rules = RulesRouter(catalog)
    one_word = "How do I make a proper carbonara?"
    assert rules.route(one_word).specialist == "booking"
    assert not rules.firm(max(rules.scores(one_word), key=lambda m: m.score))
    assert rules.route(one_word, strict=True).specialist == "helper"
    for firm in ("Please change my reservation", "Cancel the room I booked"):
        assert rules.firm(max(rules.scores(firm), key=lambda m: m.score))
        assert rules.route(firm, strict=True).specialist == "booking"


def test_a_fallback_for_want_of_a_fit_is_told_from_the_fallbacks_own_words(
    rules: RulesRouter, catalog: Catalog
):
    assert matched_nothing(rules.route("zxcv qwerty"))
    own_words = rules.route("Explain how a rainbow forms")
    assert own_words.specialist == catalog.fallback and not matched_nothing(own_words)
    assert not matched_nothing(rules.route("Please summarize this document for me"))

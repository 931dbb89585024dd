"""Cross-lingual keyword expansion: the lexicon's matching (pure), and the rules router using it on a
catalog written without examples."""

import pytest

from taskyard_broker_agent.routing.lexicon import (
    CatalogExpander,
    Lexicon,
    builtin_lexicon,
    english_root,
    parse_lexicon,
)
from taskyard_broker_agent.routing.rules import RulesRouter
from taskyard_broker_agent.routing.text import normalize
from taskyard_common.catalog import Catalog, parse_catalog

SMALL = """
translate translation: ubersetz tradu 翻訳 翻译
summarize: zusammenfass 要約
job: stelle$ stellenanzeig
code: kod 代码 コード
review: レビュー prüf
travel: reise
expense: kosten
cost: kosten
"""


@pytest.fixture(scope="module")
def small() -> Lexicon:
    return Lexicon(parse_lexicon(SMALL))


def expand(lexicon: Lexicon, word: str) -> tuple[str, ...]:
    return lexicon.expand(normalize(word))


@pytest.mark.parametrize(
    ("word", "english"),
    [
        # A key is a stem: every inflection that starts with it counts.
        ("Übersetze", ("translate", "translation")),
        ("Übersetzung", ("translate", "translation")),
        ("traduction", ("translate", "translation")),
        ("Traduzca", ("translate", "translation")),
        ("prüfen", ("review",)),
        # Keys under four letters, and keys marked $, match whole words only.
        ("kod", ("code",)),
        ("kodak", ()),
        ("Stelle", ("job",)),
        ("Stellen", ()),
        ("Stellenanzeige", ("job",)),
        # A key of two concepts gives both.
        ("Kosten", ("expense", "cost")),
        # Compounds: keys inside a long word after its start.
        ("Reisekostenabrechnung", ("travel", "expense", "cost")),
        # Scripts without spaces: keys inside the run, longest first.
        ("コードレビュー", ("code", "review")),
        ("请把这段文字翻译成英文", ("translate", "translation")),
        ("この文章を要約して", ("summarize",)),
        ("nothing", ()),
        ("", ()),
    ],
)
def test_expansion(small: Lexicon, word: str, english: tuple[str, ...]):
    assert expand(small, word) == english


def test_parsing_normalizes_keys_and_refuses_a_line_without_keys():
    entries = parse_lexicon("review: Prüf\ncode: kod\ntable: tabel$\n")
    assert entries == {"pruf": ("review",), "kod$": ("code",), "tabel$": ("table",)}
    with pytest.raises(ValueError, match="english words: keys"):
        parse_lexicon("review prüf\n")
    with pytest.raises(ValueError, match="english words: keys"):
        parse_lexicon("review:\n")


def test_the_builtin_lexicon_parses_and_covers_the_common_languages():
    lexicon = builtin_lexicon()
    for word in ("Übersetze", "traduis", "traduce", "traduza", "traduci", "vertaal", "przetłumacz",
                 "翻訳", "翻译", "переведи"):  # fmt: skip
        assert "translate" in expand(lexicon, word), word
    for word in ("Vertrag", "contrat", "contrato", "contratto", "overeenkomst", "umowa", "契約", "合同"):
        assert "contract" in expand(lexicon, word), word


@pytest.mark.parametrize(
    "word",
    # English words that start with, or hold, a foreign key: found by expanding every word of the docs and
    # the code, and fixed by exact (``$``) or longer keys. Compounds need a first part of 3 letters.
    ["according", "information", "transformation", "researcher", "terminal", "storing", "integration",
     "confirmation", "opening", "ordinary", "resuming", "redacted", "lot", "pools", "processing",
     "implementation", "brief", "optimistic", "deterministic", "describing", "preparation"],
)  # fmt: skip
def test_english_words_are_not_taken_for_foreign_ones(word: str):
    assert expand(builtin_lexicon(), word) == ()


def test_a_concept_word_the_catalog_lacks_matches_its_words_of_the_same_root(small: Lexicon):
    assert english_root("translation") == english_root("translate") == english_root("translator")
    assert english_root("job") == "job"  # short words stay whole
    expander = CatalogExpander(small, ["translator", "review", "code"])
    assert expander.expand(normalize("übersetze")) == ("translator",)
    assert expander.expand(normalize("prüfen")) == ("review",)
    assert expander.expand("zusammenfassen") == ()  # summarize: not in this catalog


CATALOG = """
fallback: helper
specialists:
  - name: translator
    description: Translates texts and emails between languages.
    keywords: [translate, translation, localize]
    instructions: x
  - name: contracts
    description: Reviews contracts and agreements and flags risky clauses.
    keywords: [contract, clause, agreement, liability]
    instructions: x
  - name: hiring
    description: Writes job ads and interview questions for candidates.
    keywords: [job ad, hiring, candidate, interview]
    instructions: x
  - name: helper
    description: Anything else.
    keywords: [question]
    instructions: x
"""


@pytest.fixture(scope="module")
def bare() -> Catalog:
    catalog = parse_catalog(CATALOG)
    assert not any(s.examples for s in catalog.specialists)
    return catalog


@pytest.mark.parametrize(
    ("request_text", "specialist"),
    [
        ("Übersetze bitte diese E-Mail ins Englische", "translator"),
        ("Traduis ce paragraphe en allemand", "translator"),
        ("この文章を英語に翻訳してください", "translator"),
        ("Prüfe diesen Vertrag auf riskante Klauseln", "contracts"),
        ("Sprawdź tę umowę i wskaż niekorzystne zapisy", "contracts"),
        ("请审阅这份合同", "contracts"),
        ("이 계약서를 검토해 주세요", "contracts"),
        ("Översätt den här texten till engelska", "translator"),
        ("Prepara preguntas para la entrevista de trabajo", "hiring"),
    ],
)
def test_requests_in_other_languages_route_without_examples(
    bare: Catalog, request_text: str, specialist: str
):
    assert RulesRouter(bare).route(request_text).specialist == specialist
    # Without the lexicon the catalog's English words are all the router has: these fall back.
    assert RulesRouter(bare, cross_lingual=False).route(request_text).specialist == "helper"


def test_a_translated_word_counts_once_and_less_than_the_english_word(bare: Catalog):
    rules = RulesRouter(bare)
    english = max(rules.scores("translate this"), key=lambda m: m.score)
    german = max(rules.scores("übersetze this"), key=lambda m: m.score)
    assert english.specialist == german.specialist == "translator"
    # "übersetze" stands for translate AND translation, both keywords: it must not count twice.
    assert 0 < german.score < english.score


def test_words_of_no_specialist_still_fall_back(bare: Catalog):
    for text in ("Wie wird das Wetter morgen?", "Raconte-moi une blague", "今日の天気は"):
        assert RulesRouter(bare).route(text).specialist == "helper", text

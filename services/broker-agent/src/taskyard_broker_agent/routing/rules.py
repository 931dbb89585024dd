"""The deterministic router: lexical scoring of the request against the catalog, no LLM.

It is the fallback when the LLM fails, is not configured or is overruled by the directive guard, so it must
be pure, fast and predictable. Three signals, added up per specialist:

- **words** (BM25-like): each specialist is a small "document" made of its name, description, keywords
  and example requests; a request term contributes ``field weight x idf x saturated term frequency``.
  Keywords count most (they are the words users use), then name words, then description and example
  words; idf across the specialists (a word every specialist mentions tells nothing); term frequency
  saturates (a long document repeating a word cannot outvote an explicit keyword). Multi-word keywords
  ("key points", "look up") match as phrases at more than a keyword's weight, and their words alone as
  description words.
- **character n-grams** (``ngrams.py``): a request word no specialist has counts as the closest profile
  word by character trigrams, which still works through typos and inflections.
- **cross-lingual expansion** (``lexicon.py``): such a word in another language (or an English synonym)
  counts as its concept's English words (``Übersetze`` → translate): no ``examples`` needed for that.

When even the best specialist scores below a calibrated threshold, the request goes to the catalog's
fallback: a weak match is a guess, and the fallback is the specialist meant for what nothing else covers.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from taskyard_broker_agent.routing.lexicon import CatalogExpander, Lexicon, builtin_lexicon
from taskyard_broker_agent.routing.ngrams import FuzzyVocabulary
from taskyard_broker_agent.routing.parts import merge_parts, sentences
from taskyard_broker_agent.routing.text import (
    MAX_INPUT_CHARS,
    input_text,
    is_no_space_script,
    stem,
    tokenize,
    words,
)
from taskyard_common.catalog import Catalog, SpecialistSpec
from taskyard_common.messages import RoutedPart, RoutingDecision, RoutingMethod, TaskInput

__all__ = ["MAX_INPUT_CHARS", "RulesRouter", "confidence", "input_text", "stem", "tokenize"]

KEYWORD_WEIGHT = 3.0
NAME_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
EXAMPLE_WEIGHT = 1.0
# A phrase is a stronger signal than any of its words alone.
PHRASE_WEIGHT = 4.5
# BM25's term-frequency saturation: the 2nd occurrence adds ~half, the 10th almost nothing.
K1 = 1.2
# Words in the first sentence weigh more: requests say what they want first, then give the material.
LEAD_WORDS = 16
LEAD_WEIGHT = 1.5
# A word found through the lexicon counts this much of the English word it stands for: a translation is a
# slightly weaker signal than the catalog's own word, and a word of two concepts counts for both.
EXPANSION_WEIGHT = 0.8
# A best score below this goes to the fallback specialist: the "none of these fits" path. One plain
# description or example word, even in the lead (1.0 x the highest idf x saturate(LEAD_WEIGHT) = 1.47 in a
# catalog of four), is a guess, not a fit ("Tell me a joke" is not research because an example says "tell
# me"); a keyword, the name, or two words are. Calibrated on the shipped set (with and without examples):
# 1.5 to 2.5 send every no-fit case but one to the fallback; 1.5 keeps the most weak but right matches.
FALLBACK_THRESHOLD = 1.5
# Confidence of a request that matched nothing: it goes to the fallback, and says it is a guess.
NO_MATCH_CONFIDENCE = 0.1
# Rules are never certain; a strong LLM answer should always be able to look more confident.
MAX_CONFIDENCE = 0.95
# Scale of the score → confidence curve: one distinctive keyword gives roughly 0.7.
_STRENGTH_SCALE = 3.0
_MAX_REASON_TERMS = 6
# multi_route: a sentence is a job of its own only when it matches a specialist this strongly on its own
# (twice the fallback threshold: a sentence of the material that happens to share a word is no job).
PART_THRESHOLD = 2.0
# Requests say what they want first: only the leading sentences are read for jobs (the rest is material).
PART_SENTENCES = 12
# Words that may come before a job's leading keyword ("Also find ...", "Then summarize ...").
_PART_FILLERS = frozenset(
    "also then and next finally additionally plus afterwards after that please lastly".split()
)

# Description and example filler; keywords are never filtered (the general specialist lists "what", "how").
STOPWORDS = frozenset(
    """a about an and any are as at be by can do for from has have i in into is it its me my no not of on
    or our so such than that the their them they this to up us we what when which who will with you your
    other others anything something please give these those below above""".split()
)


# A request word found in the lexicon: the catalog terms it stands for, and its weight.
_Expansion = tuple[tuple[str, ...], float]


@dataclass(frozen=True)
class _Profile:
    """One specialist as the word scorer sees it: a weight per single term, and its phrases."""

    name: str
    terms: dict[str, float]
    phrases: dict[tuple[str, ...], float]


def _profile(spec: SpecialistSpec) -> _Profile:
    terms: dict[str, float] = {}

    def add(term: str, weight: float) -> None:
        terms[term] = max(terms.get(term, 0.0), weight)

    for text, weight in (
        (spec.description, DESCRIPTION_WEIGHT),
        *((e, EXAMPLE_WEIGHT) for e in spec.examples),
    ):
        for term in tokenize(text):
            if term not in STOPWORDS and len(term) > 1:
                add(term, weight)
    for term in tokenize(spec.name):
        add(term, NAME_WEIGHT)
    phrases: dict[tuple[str, ...], float] = {}
    for keyword in spec.keywords:
        words = tuple(tokenize(keyword))
        if len(words) == 1:
            add(words[0], KEYWORD_WEIGHT)
        elif len(words) > 1:
            phrases[words] = PHRASE_WEIGHT
            # Its words count on their own as description words do: "Book me a suite" asks for what the
            # keyword "book a room" names, and "key" or "look" alone weigh no more than in a description.
            for word in words:
                if word not in STOPWORDS and len(word) > 1:
                    add(word, DESCRIPTION_WEIGHT)
    return _Profile(spec.name, terms, phrases)


def _idf(df: int, n: int) -> float:
    # BM25's idf, kept positive: a term all specialists share still counts a little.
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _saturate(tf: float) -> float:
    return tf * (K1 + 1) / (tf + K1)


@dataclass(frozen=True)
class Match:
    specialist: str
    score: float
    # (term, contribution), strongest first: the words that made the choice, for the decision's reason.
    terms: tuple[tuple[str, float], ...]


class RulesRouter:
    """Scores a request against every specialist of one catalog; build once, call ``route`` many times."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        fallback_threshold: float = FALLBACK_THRESHOLD,
        lexicon: Lexicon | None = None,
        cross_lingual: bool = True,
    ) -> None:
        # ``cross_lingual=False`` routes without the lexicon (the evaluation's "before" figures).
        self._lexicon = (lexicon or builtin_lexicon()) if cross_lingual else None
        self._fallback = catalog.fallback
        self._multi = catalog.multi_route
        self._threshold = fallback_threshold
        self._profiles = [_profile(s) for s in catalog.specialists]
        # The words a job for each specialist may start with: its keywords (a phrase's first word) and name.
        self._leads = {
            spec.name: {words[0] for k in spec.keywords if (words := tokenize(k))} | set(tokenize(spec.name))
            for spec in catalog.specialists
        }
        n = len(self._profiles)
        df: Counter[str | tuple[str, ...]] = Counter()
        for profile in self._profiles:
            # Keys only: Counter.update(mapping) would add the weights instead of counting specialists.
            df.update(profile.terms.keys())
            df.update(profile.phrases.keys())
        self._idf = {term: _idf(count, n) for term, count in df.items()}
        self._phrase_lengths = sorted({len(p) for profile in self._profiles for p in profile.phrases})
        self._fuzzy = FuzzyVocabulary(t for profile in self._profiles for t in profile.terms)
        vocabulary = (t for t in self._idf if isinstance(t, str))
        self._expander = CatalogExpander(self._lexicon, vocabulary) if self._lexicon is not None else None

    @property
    def fallback(self) -> str:
        """The catalog's fallback specialist: where "none of these fits" goes."""
        return self._fallback

    def _counts(self, text: str) -> tuple[list[str], dict[str, float], list[_Expansion]]:
        """The request's tokens; their frequencies (lead words weighted up, an unknown word counted as its
        closest term); and the unknown words the lexicon knows, as the catalog terms they stand for."""
        tokens: list[str] = []
        counts: dict[str, float] = {}
        expansions: list[_Expansion] = []

        def add(term: str, weight: float) -> None:
            counts[term] = counts.get(term, 0.0) + weight

        for word in words(text):
            lead = LEAD_WEIGHT if len(tokens) < LEAD_WORDS else 1.0
            if len(word) > 1 and is_no_space_script(word):
                # Character pairs (they match examples in the same script), and the lexicon's concepts.
                pairs = [word[i : i + 2] for i in range(len(word) - 1)]
                for position, pair in enumerate(pairs, start=len(tokens)):
                    add(pair, LEAD_WEIGHT if position < LEAD_WORDS else 1.0)
                tokens.extend(pairs)
                if expanded := self._expanded(word):
                    expansions.append((expanded, lead * EXPANSION_WEIGHT))
                continue
            token = stem(word)
            tokens.append(token)
            if token in self._idf:
                add(token, lead)
            elif expanded := self._expanded(word):
                expansions.append((expanded, lead * EXPANSION_WEIGHT))
            elif (close := self._fuzzy.closest(token)) is not None:
                add(close[0], lead * close[1])
        return tokens, counts, expansions

    def _expanded(self, word: str) -> tuple[str, ...]:
        """The catalog terms ``word`` stands for through the lexicon (none without one)."""
        return self._expander.expand(word) if self._expander is not None else ()

    def _with_expansions(
        self, profile: _Profile, counts: dict[str, float], expansions: list[_Expansion]
    ) -> dict[str, float]:
        """``counts`` plus each expanded word as ONE term of this profile, its strongest: a word whose
        concept has three synonyms in a specialist's keywords counts once, like the English word would."""
        if not expansions:
            return counts
        local = dict(counts)
        for terms, weight in expansions:
            present = [t for t in terms if t in profile.terms]
            if present:
                best = max(present, key=lambda t: profile.terms[t] * self._idf[t])
                local[best] = local.get(best, 0.0) + weight
        return local

    def scores(self, task_input: TaskInput) -> list[Match]:
        """Every specialist's match, in catalog order."""
        tokens, direct, expansions = self._counts(input_text(task_input))
        phrase_counts: Counter[tuple[str, ...]] = Counter(
            tuple(tokens[i : i + size])
            for size in self._phrase_lengths
            for i in range(len(tokens) - size + 1)
        )
        matches = []
        for profile in self._profiles:
            found: list[tuple[str, float]] = []
            counts = self._with_expansions(profile, direct, expansions)
            for term, weight in profile.terms.items():
                if term in counts:
                    found.append((term, weight * self._idf[term] * _saturate(counts[term])))
            for phrase, weight in profile.phrases.items():
                if phrase in phrase_counts:
                    score = weight * self._idf[phrase] * _saturate(phrase_counts[phrase])
                    found.append((" ".join(phrase), score))
            found.sort(key=lambda item: (-item[1], item[0]))
            matches.append(Match(profile.name, sum(c for _, c in found), tuple(found)))
        return matches

    def firm(self, match: Match) -> bool:
        """The match rests on more than one plain word: two terms or more, or a keyword, name or phrase.
        One description or example word scores above the threshold in a larger catalog (idf), alone."""
        if len(match.terms) != 1:
            return len(match.terms) > 1
        term = match.terms[0][0]
        profile = next(p for p in self._profiles if p.name == match.specialist)
        if term not in profile.terms:
            return True  # a phrase (a multi-word keyword): terms hold single words only
        return profile.terms[term] > max(DESCRIPTION_WEIGHT, EXAMPLE_WEIGHT)

    def route(self, task_input: TaskInput, *, strict: bool = False) -> RoutingDecision:
        """The best match above the threshold, else the fallback. ``strict``: a match that is not ``firm``
        goes to the fallback too (the LLM router's path for a choice the evidence floor overruled: the
        model read the request and chose otherwise, and one plain word does not outweigh that)."""
        matches = self.scores(task_input)
        # Highest score wins; ties go to the earlier specialist of the catalog (sorted() is stable).
        ranked = sorted(matches, key=lambda m: -m.score)
        best = ranked[0]
        weak = best.score < self._threshold or (strict and not self.firm(best))
        if best.score <= 0 or (weak and best.specialist != self._fallback):
            why = "no specialist matched" if best.score <= 0 else f"weak match ({best.specialist})"
            return RoutingDecision(
                method=RoutingMethod.RULES,
                specialist=self._fallback,
                reason=f"{why}: fallback to {self._fallback}",
                confidence=NO_MATCH_CONFIDENCE,
            )
        runner_up = ranked[1].score if len(ranked) > 1 else 0.0
        words = ", ".join(term for term, _ in best.terms[:_MAX_REASON_TERMS])
        parts, why = self.parts(task_input) if self._multi else ((), "")
        return RoutingDecision(
            method=RoutingMethod.RULES,
            specialist=best.specialist,
            reason=f"distinct jobs: {why}" if parts else f"matched: {words}",
            confidence=confidence(best.score, runner_up),
            parts=parts,
        )

    def parts(self, task_input: TaskInput) -> tuple[tuple[RoutedPart, ...], str]:
        """The distinct jobs of a request (``multi_route``), and why. Each of its first sentences is scored on
        its own; one is a job when it matches a specialist other than the fallback at ``PART_THRESHOLD`` or
        more AND starts (after fillers such as "also") with one of that specialist's keywords or its name:
        "Find sources on X" is a job, "The team discussed research budgets" is material. Two specialists at
        least, else none. A heuristic for the fallback path: the LLM router reads jobs far better."""
        found: list[tuple[str, str]] = []
        words: dict[str, str] = {}
        for sentence in sentences(input_text(task_input))[:PART_SENTENCES]:
            lead = next((t for t in tokenize(sentence) if t not in _PART_FILLERS), None)
            best = max(self.scores(sentence), key=lambda m: m.score)
            if (
                best.score >= PART_THRESHOLD
                and best.specialist != self._fallback
                and lead in self._leads[best.specialist]
            ):
                found.append((best.specialist, sentence))
                words.setdefault(best.specialist, ", ".join(t for t, _ in best.terms[:3]))
        parts = merge_parts(found)
        return parts, "; ".join(f"{p.specialist} (matched: {words[p.specialist]})" for p in parts)


def matched_nothing(decision: RoutingDecision) -> bool:
    """The rules' decision is the fallback because nothing fits, not because the fallback's own words
    matched (a catalog's fallback may have keywords: "write", "explain")."""
    return decision.method is RoutingMethod.RULES and decision.confidence == NO_MATCH_CONFIDENCE


def confidence(best: float, runner_up: float) -> float:
    """From the winning score's strength and its margin over the runner-up, within (0.2, MAX_CONFIDENCE]."""
    strength = 1 - math.exp(-best / _STRENGTH_SCALE)
    margin = (best - runner_up) / best
    return round(min(MAX_CONFIDENCE, 0.2 + 0.75 * strength * (0.5 + 0.5 * margin)), 3)

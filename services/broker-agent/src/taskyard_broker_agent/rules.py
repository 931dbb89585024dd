"""The deterministic router: lexical scoring of the request against the catalog, no LLM.

It is the fallback when the LLM fails or is not configured, so it must be pure, fast and predictable.
Scoring is BM25-like: each specialist is a small "document" made of its name, description and keywords;
a request term contributes ``field weight x idf x saturated term frequency``:

- field weight: keywords count most (they are the words users use), then name words, then description words;
- idf across the specialists: a word every specialist mentions tells nothing;
- term frequency saturates, so a long document repeating a word cannot outvote an explicit keyword.

Multi-word keywords ("key points", "look up") only match as phrases.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from taskyard_common.catalog import Catalog
from taskyard_common.messages import RoutingDecision, RoutingMethod, TaskInput

KEYWORD_WEIGHT = 3.0
NAME_WEIGHT = 2.0
DESCRIPTION_WEIGHT = 1.0
# A phrase is a stronger signal than any of its words alone.
PHRASE_WEIGHT = 4.5
# BM25's term-frequency saturation: the 2nd occurrence adds ~half, the 10th almost nothing.
K1 = 1.2
# Confidence of a request that matched nothing: it goes to the fallback, and says it is a guess.
NO_MATCH_CONFIDENCE = 0.1
# Rules are never certain; a strong LLM answer should always be able to look more confident.
MAX_CONFIDENCE = 0.95
# Scale of the score → confidence curve: one distinctive keyword gives roughly 0.7.
_STRENGTH_SCALE = 3.0
# Bounds the work on huge inputs: routing needs the gist, and the rest is mostly the document itself.
MAX_INPUT_CHARS = 50_000
_MAX_REASON_TERMS = 6

_WORD = re.compile(r"[a-z0-9]+")
# Description filler; keywords are never filtered (the general specialist lists "what", "how", ...).
STOPWORDS = frozenset(
    """a about an and any are as at be by can do for from has have i in into is it its me my no not of on
    or our so such than that the their them they this to up us we what when which who will with you your
    other others anything something""".split()
)


def stem(word: str) -> str:
    """Light stemming: plurals only (``tickets`` → ``ticket``, ``summaries`` → ``summary``)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Lowercase, split on anything not a letter or digit, stem."""
    return [stem(w) for w in _WORD.findall(text.lower())]


def _strings(value: Any) -> Iterator[str]:
    # A JSON object's keys name its parts ("ticket", "url"), its string values hold the request itself;
    # numbers and booleans say nothing about which specialist fits.
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def input_text(task_input: TaskInput, limit: int = MAX_INPUT_CHARS) -> str:
    """The request as one text: a string as is, a JSON object flattened to its keys and string values."""
    parts: list[str] = []
    size = 0
    for piece in _strings(task_input):
        parts.append(piece[: limit - size])
        size += len(parts[-1]) + 1
        if size >= limit:
            break
    return " ".join(parts)


@dataclass(frozen=True)
class _Profile:
    """One specialist as the scorer sees it: a weight per single term, and its phrases."""

    name: str
    terms: dict[str, float]
    phrases: dict[tuple[str, ...], float]


def _profile(name: str, description: str, keywords: tuple[str, ...]) -> _Profile:
    terms: dict[str, float] = {}

    def add(term: str, weight: float) -> None:
        terms[term] = max(terms.get(term, 0.0), weight)

    for term in tokenize(description):
        if term not in STOPWORDS and len(term) > 1:
            add(term, DESCRIPTION_WEIGHT)
    for term in tokenize(name):
        add(term, NAME_WEIGHT)
    phrases: dict[tuple[str, ...], float] = {}
    for keyword in keywords:
        words = tuple(tokenize(keyword))
        if len(words) == 1:
            add(words[0], KEYWORD_WEIGHT)
        elif len(words) > 1:
            phrases[words] = PHRASE_WEIGHT
    return _Profile(name, terms, phrases)


def _idf(df: int, n: int) -> float:
    # BM25's idf, kept positive: a term all specialists share still counts a little.
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def _saturate(tf: int) -> float:
    return tf * (K1 + 1) / (tf + K1)


@dataclass(frozen=True)
class Match:
    specialist: str
    score: float
    # (term, contribution), strongest first: the words that made the choice, for the decision's reason.
    terms: tuple[tuple[str, float], ...]


class RulesRouter:
    """Scores a request against every specialist of one catalog; build once, call ``route`` many times."""

    def __init__(self, catalog: Catalog) -> None:
        self._fallback = catalog.fallback
        self._profiles = [_profile(s.name, s.description, s.keywords) for s in catalog.specialists]
        n = len(self._profiles)
        df: Counter[str | tuple[str, ...]] = Counter()
        for profile in self._profiles:
            # Keys only: Counter.update(mapping) would add the weights instead of counting specialists.
            df.update(profile.terms.keys())
            df.update(profile.phrases.keys())
        self._idf = {term: _idf(count, n) for term, count in df.items()}
        self._phrase_lengths = sorted({len(p) for profile in self._profiles for p in profile.phrases})

    def scores(self, task_input: TaskInput) -> list[Match]:
        """Every specialist's match, in catalog order."""
        tokens = tokenize(input_text(task_input))
        counts: Counter[str] = Counter(tokens)
        phrase_counts: Counter[tuple[str, ...]] = Counter(
            tuple(tokens[i : i + size])
            for size in self._phrase_lengths
            for i in range(len(tokens) - size + 1)
        )
        matches = []
        for profile in self._profiles:
            found: list[tuple[str, float]] = []
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

    def route(self, task_input: TaskInput) -> RoutingDecision:
        matches = self.scores(task_input)
        # Highest score wins; ties go to the earlier specialist of the catalog (sorted() is stable).
        ranked = sorted(matches, key=lambda m: -m.score)
        best = ranked[0]
        if best.score <= 0:
            return RoutingDecision(
                method=RoutingMethod.RULES,
                specialist=self._fallback,
                reason=f"no specialist matched: fallback to {self._fallback}",
                confidence=NO_MATCH_CONFIDENCE,
            )
        runner_up = ranked[1].score if len(ranked) > 1 else 0.0
        words = ", ".join(term for term, _ in best.terms[:_MAX_REASON_TERMS])
        return RoutingDecision(
            method=RoutingMethod.RULES,
            specialist=best.specialist,
            reason=f"matched: {words}",
            confidence=confidence(best.score, runner_up),
        )


def confidence(best: float, runner_up: float) -> float:
    """From the winning score's strength and its margin over the runner-up, within (0.2, MAX_CONFIDENCE]."""
    strength = 1 - math.exp(-best / _STRENGTH_SCALE)
    margin = (best - runner_up) / best
    return round(min(MAX_CONFIDENCE, 0.2 + 0.75 * strength * (0.5 + 0.5 * margin)), 3)

"""Character n-grams: the rules router's way through typos, inflections and cognates.

A request word that no specialist's profile has (``summrize``, ``documantation``, ``riassunto``) still
counts as the profile word it is closest to, when their character trigrams overlap enough (Dice
coefficient), weighted by that overlap. Words of scripts written without spaces (Chinese, Japanese,
Korean) are split into character pairs by the tokenizer, so ``总结`` matches inside any sentence.
"""

from __future__ import annotations

from collections.abc import Iterable

# Shorter words are too easily confused (``bug`` / ``bus``); they must match exactly.
MIN_FUZZY_LENGTH = 5
# Dice coefficient of the padded character trigrams: ``summrize``/``summarize`` 0.7, ``tickets``/``pockets`` 0.5.
MIN_SIMILARITY = 0.6
# Requests reuse words: the closest term of a word is remembered, up to this many words.
_MEMO_SIZE = 20_000


def trigrams(word: str) -> frozenset[str]:
    padded = f" {word} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


class FuzzyVocabulary:
    """The closest known term of an unknown word, by character trigrams; deterministic, ties by term."""

    def __init__(self, terms: Iterable[str]) -> None:
        self._grams = {t: trigrams(t) for t in sorted(set(terms)) if len(t) >= MIN_FUZZY_LENGTH - 1}
        self._index: dict[str, list[str]] = {}
        for term, grams in self._grams.items():
            for gram in grams:
                self._index.setdefault(gram, []).append(term)
        self._memo: dict[str, tuple[str, float] | None] = {}

    def closest(self, word: str) -> tuple[str, float] | None:
        """``(term, similarity)`` for the most similar known term, or None when none is close enough."""
        if len(word) < MIN_FUZZY_LENGTH or word in self._grams:
            return None
        if word in self._memo:
            return self._memo[word]
        grams = trigrams(word)
        candidates = {t for g in grams for t in self._index.get(g, ())}
        best: tuple[str, float] | None = None
        for term in sorted(candidates):
            score = dice(grams, self._grams[term])
            if score >= MIN_SIMILARITY and (best is None or score > best[1]):
                best = (term, score)
        if len(self._memo) < _MEMO_SIZE:
            self._memo[word] = best
        return best

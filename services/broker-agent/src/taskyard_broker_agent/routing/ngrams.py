"""Character n-grams: the rules router's way through typos, inflections and cognates.

A request word that no specialist's profile has (``summrize``, ``documantation``, ``riassunto``) still
counts as the profile word it is closest to, when their character trigrams overlap enough (Dice
coefficient), weighted by that overlap. Words of scripts written without spaces (Chinese, Japanese,
Korean) are split into character pairs by the tokenizer, so ``总结`` matches inside any sentence.

Trigrams miss the commonest typing slip, two letters swapped: ``transalte`` shares 3 of its 7 trigrams
with ``translate`` (Dice 0.43), ``slogen`` 3 of 7 with ``slogan``. A word no trigram match reaches
counts as a term one edit away (``one_edit``), at the weakest trigram match's weight.

Trigrams also match words that only share an ending: ``difference`` and ``conference`` share 6 of their 10
(Dice 0.6), ``tower`` and ``towel`` 3 of 5. A trigram match must therefore begin like the word (the padded
first trigram: typing slips and inflections rarely touch the first two letters, and swaps there are
``one_edit``'s), and between short words (under ``MIN_EDIT_LENGTH``) take more than the minimum overlap.
"""

from __future__ import annotations

from collections.abc import Iterable

# Shorter words are too easily confused (``bug`` / ``bus``); they must match exactly.
MIN_FUZZY_LENGTH = 5
# Dice coefficient of the padded character trigrams: ``summrize``/``summarize`` 0.7, ``tickets``/``pockets`` 0.5.
MIN_SIMILARITY = 0.6
# An edit-distance match: two adjacent letters swapped (words of MIN_FUZZY_LENGTH letters or more), or one
# letter replaced, added or dropped after the first (words of MIN_EDIT_LENGTH or more: among shorter words
# one letter turns too many words into others, ``price``/``prize``). Weighted as the weakest trigram match.
MIN_EDIT_LENGTH = 6
EDIT_SIMILARITY = MIN_SIMILARITY
# Requests reuse words: the closest term of a word is remembered, up to this many words.
_MEMO_SIZE = 20_000


def trigrams(word: str) -> frozenset[str]:
    padded = f" {word} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def dice(a: frozenset[str], b: frozenset[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def one_edit(word: str, term: str) -> bool:
    """Whether ``word`` is ``term`` with one slip: two adjacent letters swapped, or (both at least
    ``MIN_EDIT_LENGTH`` long, the first letter right) one letter replaced, added or dropped."""
    if word == term or min(len(word), len(term)) < MIN_FUZZY_LENGTH:
        return False
    if len(word) == len(term):
        diffs = [i for i, (a, b) in enumerate(zip(word, term, strict=True)) if a != b]
        if len(diffs) == 2 and diffs[1] == diffs[0] + 1:
            i = diffs[0]
            return word[i] == term[i + 1] and word[i + 1] == term[i]
        return len(diffs) == 1 and diffs[0] > 0 and len(word) >= MIN_EDIT_LENGTH
    if abs(len(word) - len(term)) != 1 or min(len(word), len(term)) < MIN_EDIT_LENGTH:
        return False
    shorter, longer = sorted((word, term), key=len)
    if shorter[0] != longer[0]:
        return False
    i = next((i for i, (a, b) in enumerate(zip(shorter, longer, strict=False)) if a != b), len(shorter))
    return shorter[i:] == longer[i + 1 :]


class FuzzyVocabulary:
    """The closest known term of an unknown word, by character trigrams, else one edit away; deterministic,
    ties by term."""

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
        start = f" {word[:2]}"
        for term in sorted(candidates):
            score = dice(grams, self._grams[term])
            if start not in self._grams[term] or (
                min(len(word), len(term)) < MIN_EDIT_LENGTH and score <= MIN_SIMILARITY
            ):
                continue
            if score >= MIN_SIMILARITY and (best is None or score > best[1]):
                best = (term, score)
        if best is None:
            # Any term one slip away shares a trigram with the word (a slip touches at most three).
            edited = next((t for t in sorted(candidates) if one_edit(word, t)), None)
            best = (edited, EDIT_SIMILARITY) if edited is not None else None
        if len(self._memo) < _MEMO_SIZE:
            self._memo[word] = best
        return best

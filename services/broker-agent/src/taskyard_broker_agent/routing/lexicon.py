"""Cross-lingual keyword expansion: a request word in another language counts as the English words of the
same concept (``Übersetze`` → translate, ``requête`` → query, ``要約`` → summarize).

Catalogs are written with English descriptions and keywords, and often without ``examples``; the rules
router must still route a request written in German, Polish or Japanese. The lexicon (``lexicon_data``)
holds common task vocabulary, one concept per line, and this module matches request words against it:

- **prefix**: a word that starts with a key of 4 letters or more (``übersetze``, ``übersetzung`` ←
  ``ubersetz``), which absorbs inflections without a stemmer per language; the longest key wins;
- **exact**: keys shorter than 4 letters, and keys written with a trailing ``$``, only match whole words
  (``kod``, ``iva``; ``stelle$`` must not match ``stellen``);
- **compounds**: a long word (12 letters or more: German, Dutch) also counts every key of 5 letters or more found inside it
  after its start (``reisekostenabrechnung`` → travel … expense);
- **no-space scripts** (Chinese, Japanese, Korean): keys are found inside the run of characters, longest
  first (``コードレビュー`` → code, review).

Pure and deterministic: built once per process (the lexicon does not depend on the catalog), then looked
up per word with a small memo.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from taskyard_broker_agent.routing.lexicon_data import LEXICON
from taskyard_broker_agent.routing.text import is_no_space_script, normalize, tokenize

# Shorter keys only match whole words: ``arte`` would otherwise be the start of too many words.
MIN_PREFIX = 4
# Keys found inside a long word (compounds): long keys only, in words long enough to be compounds.
MIN_INFIX = 5
MIN_COMPOUND = 12
# A compound's first part has at least this many letters: "re" + "search" is one English word, no compound.
MIN_HEAD = 3
_EXACT_MARK = "$"
_MEMO_SIZE = 20_000


def parse_lexicon(text: str) -> dict[str, tuple[str, ...]]:
    """``key -> English tokens`` from lines ``english words: keys`` (keys normalized, ``$`` kept); a key of
    two concepts gets both concepts' words."""
    entries: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        english, sep, keys = line.partition(":")
        if not sep or not keys.split():
            raise ValueError(f"lexicon line needs 'english words: keys': {line!r}")
        targets = tokenize(english)
        for key in keys.split():
            exact = key.endswith(_EXACT_MARK)
            word = normalize(key.removesuffix(_EXACT_MARK))
            name = (
                word + _EXACT_MARK
                if exact or (len(word) < MIN_PREFIX and not is_no_space_script(word))
                else word
            )
            entries.setdefault(name, [])
            entries[name].extend(t for t in targets if t not in entries[name])
    return {key: tuple(targets) for key, targets in entries.items()}


@dataclass
class Lexicon:
    """Looks request words up in the lexicon; ``expand`` gives the English tokens of a word's concepts."""

    entries: dict[str, tuple[str, ...]]
    _prefix: dict[str, tuple[str, ...]] = field(init=False, repr=False)
    _exact: dict[str, tuple[str, ...]] = field(init=False, repr=False)
    _unspaced: dict[str, tuple[str, ...]] = field(init=False, repr=False)
    _longest: int = field(init=False, repr=False)
    _memo: dict[str, tuple[str, ...]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._prefix, self._exact, self._unspaced = {}, {}, {}
        for key, targets in self.entries.items():
            if key.endswith(_EXACT_MARK):
                self._exact[key.removesuffix(_EXACT_MARK)] = targets
            elif is_no_space_script(key):
                self._unspaced[key] = targets
            else:
                self._prefix[key] = targets
        self._longest = max((len(k) for k in (*self._prefix, *self._unspaced)), default=0)

    def expand(self, word: str) -> tuple[str, ...]:
        """The English tokens of ``word`` (one normalized, unstemmed word), in lexicon order, no repeats;
        empty when the lexicon does not know it."""
        found = self._memo.get(word)
        if found is not None:
            return found
        if is_no_space_script(word):
            found = _unique(self._scan(word))
        else:
            found = _unique(self._lookup(word))
        if len(self._memo) < _MEMO_SIZE:
            self._memo[word] = found
        return found

    def _lookup(self, word: str) -> Iterable[str]:
        if word in self._exact:
            yield from self._exact[word]
        head = 0
        for size in range(min(len(word), self._longest), MIN_PREFIX - 1, -1):
            if word[:size] in self._prefix:
                yield from self._prefix[word[:size]]
                head = size
                break
        if len(word) >= MIN_COMPOUND:
            yield from self._compound(word, max(head, MIN_HEAD))

    def _compound(self, word: str, start: int) -> Iterable[str]:
        """Keys inside a long word after its start (the parts of a compound), left to right, longest first."""
        position = start
        while position <= len(word) - MIN_INFIX:
            for size in range(min(len(word) - position, self._longest), MIN_INFIX - 1, -1):
                piece = word[position : position + size]
                if piece in self._prefix:
                    yield from self._prefix[piece]
                    position += size
                    break
            else:
                position += 1

    def _scan(self, run: str) -> Iterable[str]:
        """Keys inside a run of a no-space script, left to right, longest first."""
        position = 0
        while position < len(run):
            for size in range(min(len(run) - position, self._longest), 0, -1):
                piece = run[position : position + size]
                if piece in self._unspaced:
                    yield from self._unspaced[piece]
                    position += size
                    break
            else:
                position += 1


# English endings folded when a concept's English word is looked for in a catalog's words: the lexicon says
# ``translate``, a catalog may say ``translation`` or ``translator``. Longest first; the root keeps 4 letters.
_ENDINGS = ("ions", "ion", "ings", "ing", "ers", "er", "ors", "or", "ed", "es", "e", "s")
_MIN_ROOT = 4


def english_root(term: str) -> str:
    """``translation``, ``translator``, ``translate`` → ``translat``; short words stay whole."""
    for ending in _ENDINGS:
        if term.endswith(ending) and len(term) - len(ending) >= _MIN_ROOT:
            return term[: -len(ending)]
    return term


class CatalogExpander:
    """The lexicon seen through one catalog: a request word → the catalog terms its concept stands for
    (a concept word the catalog lacks matches the catalog's words of the same English root)."""

    def __init__(self, lexicon: Lexicon, vocabulary: Iterable[str]) -> None:
        self._lexicon = lexicon
        self._vocabulary = frozenset(vocabulary)
        roots: dict[str, list[str]] = {}
        for term in sorted(self._vocabulary):
            roots.setdefault(english_root(term), []).append(term)
        self._roots = {root: tuple(terms) for root, terms in roots.items()}

    def expand(self, word: str) -> tuple[str, ...]:
        found: list[str] = []
        for term in self._lexicon.expand(word):
            if term in self._vocabulary:
                found.append(term)
            else:
                found.extend(self._roots.get(english_root(term), ()))
        return _unique(found)


def _unique(tokens: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(tokens))


@lru_cache(maxsize=1)
def builtin_lexicon() -> Lexicon:
    """The shipped lexicon, parsed once per process."""
    return Lexicon(parse_lexicon(LEXICON))

"""Request text as the routers read it: flattened, normalized (case, accents, width) and tokenized.

Shared by the rules router's two signals (words and character n-grams), the directive guard and the
decision cache, so all of them see the same request.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from taskyard_common.messages import TaskInput

# Bounds the work on huge inputs: routing needs the gist, and the rest is mostly the document itself.
MAX_INPUT_CHARS = 50_000

# Letters and digits of any script; "_" is a word character for ``\w`` but a separator here.
_WORD = re.compile(r"[^\W_]+")
# Scripts written without spaces between words: their n-grams are taken over characters, not words.
_NO_SPACE_SCRIPTS = (
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xAC00, 0xD7AF),  # hangul syllables
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
)


def normalize(text: str) -> str:
    """Casefolded, accents removed (``résumé`` → ``resume``), full-width forms folded (NFKD)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def stem(word: str) -> str:
    """Light stemming: plurals only (``tickets`` → ``ticket``, ``summaries`` → ``summary``)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Normalized words of any script, unstemmed."""
    return _WORD.findall(normalize(text))


def tokenize(text: str) -> list[str]:
    """Lowercase, split on anything not a letter or digit, stem; a run of Chinese or Japanese characters
    becomes its character pairs (``总结报告`` → ``总结 结报 报告``), as those scripts put no spaces between words."""
    tokens: list[str] = []
    for word in words(text):
        if len(word) > 1 and is_no_space_script(word):
            tokens.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            tokens.append(stem(word))
    return tokens


def is_no_space_script(word: str) -> bool:
    return any(lo <= ord(ch) <= hi for ch in word for lo, hi in _NO_SPACE_SCRIPTS)


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


def longer_than(task_input: TaskInput, chars: int) -> bool:
    """Whether the request's text (keys and strings) holds more than ``chars`` characters; stops counting
    there, so it costs at most that much, whatever the request's size."""
    size = 0
    for piece in _strings(task_input):
        size += len(piece)
        if size > chars:
            return True
    return False

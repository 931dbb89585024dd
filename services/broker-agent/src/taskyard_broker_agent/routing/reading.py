"""A second reading of a request whose LLM choice the evidence floor would overrule: the request in English.

The rules router reads the words its lexicon knows; a request in a language or with misspellings it does not
know ("Il riscaldamento in camera non funziona", "the aircon in my rom is brokn") shows no evidence for the
specialist the LLM rightly chose, and the floor (evidence.py) overrules it. A small model translates well
even where it routes badly, so the router asks it once more, for the request in plain English, and the rules
read both: a specialist's evidence is its better score of the two. A no-fit request stays one in English
("What is the capital of Turkey?"), so the floor keeps catching those.

The reading is evidence only, never a route: every catalog name is taken out of it (a request cannot name
its way to a specialist through its translation), and a reading in which the directive guard finds a
directive is not used.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence

from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from taskyard_broker_agent.routing.guard import DirectiveGuard
from taskyard_broker_agent.routing.rules import Match
from taskyard_common.messages import TaskInput

log = logging.getLogger(__name__)

# The gist is enough for evidence: a long document is cut, and the translation bounded.
READING_MAX_CHARS = 1500
READING_MAX_TOKENS = 160
_SYSTEM = (
    "Translate the text between <text> and </text> into English. Reply with the English translation only, "
    "nothing else. If it is already English, repeat it."
)


def _text(task_input: TaskInput) -> str:
    """The request's words: a string as it is, a JSON document's string values one per line."""
    if isinstance(task_input, str):
        return task_input
    values = task_input.values() if isinstance(task_input, dict) else task_input
    if isinstance(values, list) or isinstance(task_input, dict):
        return "\n".join(text for v in values if (text := _text(v)))
    return ""


def request_text(task_input: TaskInput) -> str:
    """What of the request is translated: its text, cut to ``READING_MAX_CHARS``."""
    return _text(task_input).strip()[:READING_MAX_CHARS]


def max_tokens(text: str) -> int:
    """Room for a translation of ``text``, not for an essay."""
    return min(READING_MAX_TOKENS, len(text) // 2 + 40)


def reading_messages(task_input: TaskInput) -> list[ChatCompletionMessageParam] | None:
    """The translation call's messages, None when the request holds no text to read. Angle brackets are
    replaced, so no request can close the ``<text>`` block early."""
    text = request_text(task_input)
    if not text:
        return None
    text = text.replace("<", "\u2039").replace(">", "\u203a")
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": f"<text>\n{text}\n</text>"},
    ]


def reading_text(response: ChatCompletion, source: str) -> str:
    """The translation as the model wrote it; "" when it is far longer than ``source`` could translate to
    (or cut at its token bound): a small model sometimes answers the request instead of translating it
    ("Here are some ideas for ..."), and an answer's words are no evidence of what was asked."""
    choice = response.choices[0] if response.choices else None
    text = ((choice.message.content or "") if choice else "").strip()
    if choice is None or choice.finish_reason == "length" or len(text) > 2 * len(source) + 96:
        return ""
    return text


def read_back(
    response: ChatCompletion, request: TaskInput, guard: DirectiveGuard, names: Iterable[str]
) -> str:
    """What of the translation of ``request`` the rules may read: "" for an answer (``reading_text``) or
    a reading in which the guard finds a directive, else the reading without the catalog's names."""
    text = reading_text(response, request_text(request))
    if text and guard.inspect(text).fired:
        log.info("the request's second reading holds a routing directive: not used")
        return ""
    return without_names(text, names)


def without_names(text: str, names: Iterable[str]) -> str:
    """``text`` without any catalog name (nor its spaced form)."""
    for name in sorted(names, key=len, reverse=True):
        for alias in {name, name.replace("-", " ")}:
            text = re.sub(rf"\b{re.escape(alias)}\b", " ", text, flags=re.IGNORECASE)
    return text


def better_of(request: Sequence[Match], reading: Sequence[Match]) -> list[Match]:
    """Each specialist's better match of the two readings (the rules list every specialist, in catalog
    order, for any text): the second reading is the same request, so its scores are not added."""
    by_name = {m.specialist: m for m in reading}
    return [max(m, by_name.get(m.specialist, m), key=lambda x: x.score) for m in request]


def best_score(matches: Iterable[Match]) -> float:
    return max((m.score for m in matches), default=0.0)

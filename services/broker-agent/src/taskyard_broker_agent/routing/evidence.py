"""The no-fit path of the LLM router: a specialist the LLM chose stands only if the request shows evidence for it.

A small model reads "a question general knowledge answers goes to the fallback" and still names a specialist
(the local 1.5B model sent 24 of 28 held-out no-fit requests to copywriter or translator, often quoting the
rule as its reason): it cannot say "none of these fits" reliably. The rules router can, from the request's
words, and is wrong in other ways (paraphrases, distractors) where the LLM is right. The two combine like
this: the LLM chooses among the specialists the request gives some lexical evidence for, and when it chose
one the request gives none for, its choice is a guess and the rules decide (the fallback, unless another
specialist clearly fits).

Evidence is the rules router's score for the LLM's specialist (keywords, name, description and example words,
their translations through the lexicon, typos through n-grams), against the same floor as the rules router's
own "none of these fits" threshold (``FALLBACK_THRESHOLD``): one plain description word is a guess, a
keyword, the name or two words are a fit. Calibrated on the shipped set's dev split only (docs/routing.md,
"The evidence floor"). The fallback specialist needs no evidence: choosing it is what the path is for.

The score adds the rules score of the LLM's own ``reason`` for its specialist (``reason_text``: without
that specialist's name, since naming its choice is no evidence for it, nor the words of the prompt's own
instructions, which a small model echoes), when the reason reads as that specialist's task more than as any
other's. The model's restatement of the task, usually in English, is readable by the rules where the request
is not, in a language or with words the lexicon does not know ("Como posso usar os meus pontos para pagar
uma noite?" has no catalog word; the model's "How can I use my points to pay a night?" has). A no-fit
request's restatement ("A question about the weather in Rome") holds no specialist's words. Chosen on the tuning set's dev split, checked on the shipped
set without examples (docs/routing.md, "Evidence from the LLM's reason").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from taskyard_broker_agent.routing.prompt import REASON_MAX_CHARS
from taskyard_broker_agent.routing.rules import FALLBACK_THRESHOLD, Match
from taskyard_broker_agent.routing.text import tokenize

# The default floor: the rules router's own fit threshold (one concept, not a second tuned knob).
EVIDENCE_FLOOR = FALLBACK_THRESHOLD
# The shortest start of a name, at the end of a reason at its length cap, taken for the name the cap cut.
_CUT_NAME_MIN = 3
# Words in a row of the chosen specialist's description that make a reason a copy of its line.
COPIED_RUN = 4
# How many times the evidence for the LLM's choice the request must show for a rival (``outweighed``).
OUTWEIGH_RATIO = 2.0


@dataclass(frozen=True)
class Verdict:
    """Whether the LLM's choice stands, and the score that decided it."""

    stands: bool
    specialist: str
    score: float
    floor: float

    @property
    def cause(self) -> str:
        """A storage-safe explanation (names and numbers only, never request text)."""
        return (
            f"the LLM chose {self.specialist} ({self.score:.2f} of evidence in the request and its reason, "
            f"below the floor {self.floor:.2f})"
        )


def judge(
    specialist: str,
    matches: Iterable[Match],
    *,
    fallback: str,
    floor: float,
    reason_matches: Iterable[Match] = (),
) -> Verdict:
    """Does the LLM's ``specialist`` stand, given the rules router's ``matches`` for the request and
    ``reason_matches`` for the LLM's reason (``reason_text``)?

    It stands when it is the catalog's ``fallback`` (no evidence is needed to say nothing fits), when the
    floor is 0 (the gate is off), or when its rules score in the request, plus in the reason where the
    reason matches no other specialist better, reaches ``floor``.
    """
    score = _score(matches, specialist)
    reason = list(reason_matches)
    if reason and _score(reason, specialist) >= max(m.score for m in reason):
        score += _score(reason, specialist)
    stands = specialist == fallback or floor <= 0 or score >= floor
    return Verdict(stands=stands, specialist=specialist, score=score, floor=floor)


def _score(matches: Iterable[Match], specialist: str) -> float:
    return next((m.score for m in matches if m.specialist == specialist), 0.0)


def reason_text(reason: str, specialist: str, instruction_terms: frozenset[str] = frozenset()) -> str:
    """What of the LLM's ``reason`` may count as evidence for ``specialist``: without its name ("a job for
    the trip-planner" → "a job for the "), also where the reason's length cap cut it ("... the trip-pl"),
    and without the words made only of ``instruction_terms`` (the prompt's own). Other names stay: they
    read as those specialists'. Only a reason as long as the cap can have been cut: in a shorter one, a last
    word such as "research" is the model's word, not a cut "researcher"."""
    text = re.sub(re.escape(specialist), " ", reason, flags=re.IGNORECASE)
    last = re.search(r"([\w-]+)\W*$", text) if len(reason) >= REASON_MAX_CHARS else None
    if last and len(last.group(1)) >= _CUT_NAME_MIN and specialist.lower().startswith(last.group(1).lower()):
        text = text[: last.start(1)]
    if not instruction_terms:
        return text
    return " ".join(
        w for w in text.split() if not (terms := set(tokenize(w))) or not terms <= instruction_terms
    )


def copies_line(reason: str, line: Iterable[str], run: int = COPIED_RUN) -> bool:
    """The ``reason`` repeats ``run`` words in a row of one text of the chosen specialist's ``line`` (its
    description, or an example the prompt shows): the model restated what the specialist does ("Plan what
    guests do at their destination" for a meeting room; "Summarize this document in five bullet points" for
    "lorem ipsum"), not what the request asks, so the reason is no evidence for that specialist."""
    said = tokenize(reason)
    for text in line:
        words = tokenize(text)
        runs = {tuple(words[i : i + run]) for i in range(len(words) - run + 1)}
        if any(tuple(said[i : i + run]) in runs for i in range(len(said) - run + 1)):
            return True
    return False


def outweighed(
    choice: str,
    rival: str,
    matches: Iterable[Match],
    reason_matches: Iterable[Match],
    *,
    floor: float,
    ratio: float = OUTWEIGH_RATIO,
) -> bool:
    """The LLM's ``choice`` cleared the floor, but the request shows firm evidence (twice the floor) for
    ``rival``, ``ratio`` times its evidence for the choice, and the model's own reason (``reason_text``)
    does not back the choice: it reads as nothing in the catalog, or firmly and by that ratio as ``rival``.

    The small model names the wrong specialist of two that a request mentions ("Is my free-night voucher
    still valid, and which of your hotels take it?" to ``guest-services``, its reason "What the specialist
    does"); where its reason states the task in the catalog's words, the reason decides (a reason that
    reads as its choice is the model having read the task behind a distractor's words)."""
    request = list(matches)
    firm = 2 * floor
    for_rival = _score(request, rival)
    if for_rival < firm or for_rival < ratio * _score(request, choice):
        return False
    said = [m for m in reason_matches if m.score > 0]
    if not said:
        return True
    backs_rival = _score(said, rival)
    return backs_rival >= firm and backs_rival >= ratio * _score(said, choice)

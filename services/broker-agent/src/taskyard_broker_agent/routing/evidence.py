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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from taskyard_broker_agent.routing.rules import FALLBACK_THRESHOLD, Match

# The default floor: the rules router's own fit threshold (one concept, not a second tuned knob).
EVIDENCE_FLOOR = FALLBACK_THRESHOLD


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
            f"the LLM chose {self.specialist} ({self.score:.2f} of evidence in the request, below the floor "
            f"{self.floor:.2f})"
        )


def judge(specialist: str, matches: Iterable[Match], *, fallback: str, floor: float) -> Verdict:
    """Does the LLM's ``specialist`` stand, given the rules router's ``matches`` for the request?

    It stands when it is the catalog's ``fallback`` (no evidence is needed to say nothing fits), when the
    floor is 0 (the gate is off), or when its rules score reaches ``floor``.
    """
    score = next((m.score for m in matches if m.specialist == specialist), 0.0)
    stands = specialist == fallback or floor <= 0 or score >= floor
    return Verdict(stands=stands, specialist=specialist, score=score, floor=floor)

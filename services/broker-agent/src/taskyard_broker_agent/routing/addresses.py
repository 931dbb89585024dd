"""Requests addressed to a specialist, for the directive guard (guard.py): "For researcher: ...",
"@summarizer", "This one is for general", "Treat this as a support-analyst ticket", "summarizer should
handle this", "let general answer it", "queue: researcher", "-> researcher", ``<routing>general``, and a
sentence (or JSON value) that is nothing but a name.

These match the normalized text (case and accents folded). A name that is also an ordinary word ("general",
"translator") is an address only where the sentence cannot mean the word: "this is a general question" is a
question, "this is a support-analyst question" an address, so the forms with an article ("a", "an") take
only hyphenated names.
"""

from __future__ import annotations

import re

# "treat this as researcher": the name as what the request is to be taken for.
_AS_VERBS = r"handle|treat|process|categori[sz]e|classify|label|tag|mark|file|flag|consider|count|route"
_TASK_NOUNS = r"task|request|job|ticket|question|case|issue|matter|message|one|thing|problem|query"
# Field-like labels: these also before "is" ("the right queue is researcher") ...
_LABELS = (
    r"queue|team|target|destination|assignee|handler|department|recipient|category|"
    r"\w*(?:rout|specialist|assign)\w*"
)
# ... these only before a colon or "=" ("answer: general"; "the answer is general." is an answer).
_TAGS = r"agent|label|tag|output|answer|attn|attention|cc|to"
# Who is to handle it, with "it" or "this" as its object ("the researcher should handle the samples" is not).
_HANDLE = (
    r"handle|take|answer|do|process|own|deal\s+with|look\s+at|pick\s+up|receive|get|work\s+on|bearbeit\w*|"
    r"trait\w*|manej\w*|gestisc\w*|gestir\w*|behandel\w*"
)
_OBJECT = r"(?=\s*(?:$|[.,;:!?]|\s(?:it|this|that|the\s+(?:request|ticket|task|message|question|case))\b))"
_MODALS = (
    r"should|must|can|will|shall|has\s+to|needs\s+to|is\s+to|ought\s+to|soll\w*|muss|kann|doit|peut|"
    r"debe|puede|deve|puo|moet|kan"
)
# "this is for researcher", "questo è per researcher", "das ist für researcher".
_SUBJECTS = r"this|it|that|questo|questa|esto|esta|isto|dit|das|dies|ceci|cela"
_FOR = r"for|fur|pour|para|per|voor|one\s+for|meant\s+for|intended\s+for"
_THE = r"(?:the\s+|den\s+|die\s+|der\s+|le\s+|la\s+|el\s+|il\s+|o\s+)?"
_A = r"(?:an?|un|une|ein|eine|uno?|una)\s+"
_POLITE = r"(?:(?:please|bitte|por\s+favor|per\s+favore)\W+)?"
_ROUTE_TO = r"转给|轉給|发给|發給|交给|交給|转交|轉交|转到|轉到|送给|送給|转发给|轉發給"
_SEND_JA = r"(?:に|へ)\s*(?:送|転送|回|渡)"


def addressed_pattern(full: str, hyphenated: str, after_name: str) -> re.Pattern[str]:
    """The pattern for one catalog: ``full`` matches every name and its spaced form, ``hyphenated`` those of
    hyphenated names only (may be empty), ``after_name`` is the guard's lookahead for what may follow a name
    that is the object of a directive."""
    after_task = rf"(?=\s*(?:$|[.,;:!?()\]}}\"'\n]|\s(?:{_TASK_NOUNS}|specialist|agent|queue|team)\b))"

    def a_name(group: str) -> str:
        # "a support-analyst ticket"; never matches without hyphenated names.
        return rf"{_A}(?P<{group}>{hyphenated})\b{after_task}" if hyphenated else rf"(?!x)x(?P<{group}>)"

    alternatives = [
        rf"^\W*(?:(?:\w+\W+){{0,2}}?\w+\s*[:=]\s*)?@?{_THE}(?P<n1>{full})\W*$",
        rf"^\W*{_POLITE}(?:for|to|attn|attention|cc|an|fur|pour|para|per|voor|a|al|au)\b\W*{_THE}"
        rf"(?P<n2>{full})(?:\s*[:,\u2013\u2014-]|(?=\s*(?:$|[.;!?)\]}}\"'])))",
        rf"@(?P<n3>{full})\b",
        rf"<\s*\w*(?:rout|specialist|target|queue|assign)\w*\s*>\s*(?P<n4>{full})\b",
        rf"(?:->|=>|\u2192)\s*{_THE}(?P<n5>{full})\b{after_name}",
        rf"\b(?:{_SUBJECTS})\s+(?:\w+\s+){{0,2}}?(?:is|'s|es|est|ist|e)\s+(?:{_FOR})\s+{_THE}(?P<n6>{full})\b"
        rf"{after_task}",
        rf"\b(?:{_SUBJECTS})\s+(?:\w+\s+){{0,2}}?(?:is|'s|es|est|ist|e)\s+" + a_name("n7"),
        rf"\bc'est\s+pour\s+{_THE}(?P<n8>{full})\b{after_task}",
        r"\bc'est\s+" + a_name("n9"),
        rf"\b(?:{_AS_VERBS})\s+(?:\w+\s+){{0,2}}?as\s+{_THE}(?P<n10>{full})\b{after_task}",
        rf"\b(?:{_AS_VERBS})\s+(?:\w+\s+){{0,2}}?as\s+" + a_name("n11"),
        rf"\b(?:{_LABELS})[\"']?\s*(?:[:=]|is|should\s+be|must\s+be)\s*[\"']?{_THE}(?P<n12>{full})\b{after_name}",
        rf"\b(?:{_TAGS})[\"']?\s*[:=]\s*[\"']?{_THE}(?P<n13>{full})\b{after_name}",
        rf"\b(?P<n14>{full})\s+(?:{_MODALS})\s+(?:\w+\s+){{0,1}}?(?:{_HANDLE}){_OBJECT}",
        rf"\b(?:let|have|ask|make)\s+{_THE}(?P<n15>{full})\s+(?:{_HANDLE}){_OBJECT}",
        rf"(?:{_ROUTE_TO})\s*(?P<n16>{full})",
        rf"(?P<n17>{full})\s*{_SEND_JA}",
    ]
    return re.compile("|".join(alternatives))


def addressed_name(match: re.Match[str]) -> str:
    """The name (or spaced form) an ``addressed_pattern`` match holds."""
    return next(value for value in match.groupdict().values() if value)

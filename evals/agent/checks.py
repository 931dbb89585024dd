"""The automatic checks of the agent evaluation: pure functions from an answer (and what the task did) to a
verdict, so each one is unit-tested on right and wrong answers alike.

Every check returns the list of its problems: empty means passed. Numbers are compared as numbers
(``1,200`` and ``1200.0`` are 1200), words and facts case-insensitively.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from taskyard_worker.text_tool_calls import looks_like_tool_call

# A number as people write it: 1,234.5  -3  12.50  0.75 (a thousands comma only between digit groups), a
# unit written against it included: 1,200m is 1200.
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?!\d)|(?<![\w.])-?\d+(?:\.\d+)?")
# An ordinal's ending after its digits ("July 3rd" says "July 3").
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b")
# A list marker at the start of a line ("1. ", "2) ") is not a claim about the source.
_LIST_MARKER = re.compile(r"^\s*\d{1,2}[.)]\s", re.MULTILINE)
# Tool-call text a small model may leave in its answer besides what ``looks_like_tool_call`` reads: the
# doubled-brace envelope, a bare JSON call, or the call syntax some chat templates use.
_CALL_TEXT = re.compile(
    r"\{\{\s*\"name\"|\"tool_calls\"\s*:|<\|?tool_call|\[TOOL_CALLS\]|<function=|\bfunctions\.\w+\s*\(", re.I
)
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "hundred": 100, "dozen": 12, "half": 0.5,
}  # fmt: skip
_GROUPED = re.compile(r"(?<![\w.,])\d{1,3}(?:[.\u00a0\u202f ]\d{3})+(?![\w,]|\.\d)")
_DECIMAL_COMMA = re.compile(r"(?<![\w.,])\d+,\d{1,2}(?!\d)")
_URL = re.compile(r"https?://[^\s<>\"'\])]+")


def numbers_in(text: str) -> list[Decimal]:
    """Every number written in digits, in order (thousands commas removed, ``12.50`` == ``12.5``)."""
    found = []
    for match in _NUMBER.finditer(text):
        try:
            found.append(Decimal(match.group(0).replace(",", "")))
        except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
            continue
    return found


def tool_call_text(answer: str) -> bool:
    """The stored answer is (or holds) a tool call written as text: never a right answer."""
    return looks_like_tool_call(answer) or bool(_CALL_TEXT.search(answer))


def check_number(answer: str, expected: str) -> list[str]:
    """The exact expected number appears in the answer (as a number, not as part of another one), written
    as English does (``8,772.5``) or as the answer's language may (``8 772``, ``8.772``, ``8772,5``)."""
    want = Decimal(expected).normalize()
    if want in numbers_in(answer) or any(_written(answer, s) for s in _spellings(want)):
        return []
    return [f"expected the number {expected}, found {_short(numbers_in(answer))}"]


def _spellings(value: Decimal) -> list[str]:
    """Other languages' spellings: thousands grouped by a space, a no-break space or a dot; a decimal comma."""
    text = format(value, "f")
    whole, _, fraction = text.partition(".")
    sign = "-" if whole.startswith("-") else ""
    digits = whole.lstrip("-")
    groups = [digits[max(0, i - 3) : i] for i in range(len(digits), 0, -3)][::-1]
    spellings = []
    for separator in (" ", "\u00a0", "\u202f", "."):
        grouped = sign + separator.join(groups)
        if fraction and separator != ".":
            spellings.append(f"{grouped},{fraction}")
        elif not fraction and len(groups) > 1:
            spellings.append(grouped)
    if fraction:
        spellings.append(f"{whole},{fraction}")
    return list(dict.fromkeys(spellings))


def _written(answer: str, spelling: str) -> bool:
    return re.search(rf"(?<![\w.,]){re.escape(spelling)}(?![\w]|[.,]\d)", answer) is not None


def check_facts(answer: str, facts: Sequence[Sequence[str]]) -> list[str]:
    """Each fact (a list of acceptable spellings) appears in the answer as whole words, case-insensitively; a
    spelling that is a number matches the same number written differently (``1,047`` for ``1047``)."""
    text = _ORDINAL.sub("", " ".join(answer.lower().split()))
    numbers = set(numbers_in(answer))
    problems = []
    for options in facts:
        if not any(_has(text, numbers, option) for option in options):
            problems.append(f"missing fact {options[0]!r}")
    return problems


def _has(text: str, numbers: set[Decimal], option: str) -> bool:
    if re.fullmatch(r"-?[\d,]+(?:\.\d+)?", option.strip()):
        return Decimal(option.replace(",", "")).normalize() in numbers
    words = re.escape(" ".join(option.lower().split()))
    # Whole words, a plural allowed: "bike lane" is in "two bike lanes", "no" is not in "not".
    return re.search(rf"(?<!\w){words}(?:e?s)?(?!\w)", text) is not None


def source_numbers(source: str) -> set[Decimal]:
    """The numbers a faithful summary may use: the source's digits, and its small number words."""
    found = set(numbers_in(source))
    # Other languages' spellings: 220.000 and 1 100 (thousands), 2,5 (a decimal comma).
    for match in _GROUPED.finditer(source):
        found.add(Decimal(re.sub(r"[.\s]", "", match.group(0))).normalize())
    for match in _DECIMAL_COMMA.finditer(source):
        found.add(Decimal(match.group(0).replace(",", ".")).normalize())
    for word in re.findall(r"[a-z]+", source.lower()):
        if word in _NUMBER_WORDS:
            found.add(Decimal(str(_NUMBER_WORDS[word])).normalize())
    return found


def check_no_new_numbers(answer: str, source: str) -> list[str]:
    """No number in the answer is absent from the source (list markers aside): a summary adds no figure."""
    allowed = source_numbers(source)
    extra = [n for n in numbers_in(_LIST_MARKER.sub(" ", answer)) if n not in allowed]
    # A percent the source gives as "12 percent" and the summary as "12%" is the same number: covered above.
    return [f"numbers not in the source: {_short(extra)}"] if extra else []


# The names a label's line may go by: the support-analyst is asked for "urgency", models often say "priority".
LABEL_NAMES = {
    "urgency": ("urgency", "urgency level", "priority"),
    "category": ("category", "issue category"),
}


def field_value(answer: str, name: str) -> str | None:
    """The value of a labelled line (``Category: Billing``, ``**Urgency**: high``, ``- urgency - high``),
    or of a JSON answer's key (``{"category": "billing"}``), under the label's name or one of its
    ``LABEL_NAMES``."""
    names = LABEL_NAMES.get(name, (name,))
    # A structured answer (a specialist's output_schema): the object's key under one of the names.
    found = parse_object(answer)
    if found is not None:
        for key, value in found.items():
            if " ".join(re.split(r"[\s_-]+", str(key).lower())) in names and isinstance(
                value, str | int | float
            ):
                return str(value).strip()
    label = "(?:" + "|".join(re.escape(n).replace(r"\ ", r"[\s_-]+") for n in names) + ")"
    pattern = rf"^[\s>*#|-]*(?:\d+[.)]\s*)?[*_]*{label}[*_]*\s*(?:[:=|\-\u2013]|\*\*:)\s*[*_]*\s*(.+)$"
    match = re.search(pattern, answer, re.IGNORECASE | re.MULTILINE)
    if match is None:
        return None
    return match.group(1).strip().strip("*_|").strip()


def check_label(answer: str, name: str, accepted: Sequence[str]) -> list[str]:
    """The answer's ``name`` line holds one of the ``accepted`` words (whole words, case-insensitive)."""
    value = field_value(answer, name)
    if value is None:
        return [f"no {name!r} line in the answer"]
    lowered = value.lower()
    if any(re.search(rf"\b{re.escape(word.lower())}\b", lowered) for word in accepted):
        return []
    return [f"{name} is {value[:60]!r}, expected one of {list(accepted)}"]


def check_urgency(answer: str, accepted: Sequence[str]) -> list[str]:
    """Urgency is one of the ``accepted`` levels, and no other level is named on its line."""
    problems = check_label(answer, "urgency", accepted)
    value = (field_value(answer, "urgency") or "").lower()
    others = [lvl for lvl in ("low", "medium", "high", "critical") if lvl not in accepted]
    if not problems and any(re.search(rf"\b{lvl}\b", value) for lvl in others):
        problems.append(f"urgency {value[:60]!r} names more than the expected level")
    return problems


def parse_object(answer: str) -> dict[str, Any] | None:
    """The first JSON object in the answer (inside a fence or not), else None."""
    for candidate in [*re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", answer, re.DOTALL), answer]:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = json.JSONDecoder().raw_decode(candidate[start:])
            except json.JSONDecodeError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    return None


def _same(found: Any, expected: Any) -> bool:
    if isinstance(expected, list):
        items = found if isinstance(found, list) else [found]
        return sorted(_norm(i) for i in items) == sorted(_norm(e) for e in expected)
    return _norm(found) == _norm(expected)


def _norm(value: Any) -> str:
    text = " ".join(str(value).lower().split()).strip(" .")
    # A number with a currency or unit around it ("€349", "95 euros", "8.50eur") is the number; "14c" is not.
    number = re.fullmatch(r"[€$£]?\s*(-?[\d,]+(?:\.\d+)?)(?:\s*%|\s*[a-z]{3}|\s+[a-z]{1,6})?", text)
    if number is not None and re.search(r"\d", number.group(1)):
        try:
            return format(Decimal(number.group(1).replace(",", "")).normalize(), "f")
        except InvalidOperation:
            return text
    return text


def check_fields(answer: str, expected: Mapping[str, Any]) -> list[str]:
    """The answer's JSON object holds every expected field with the expected value (keys and text
    case-insensitive, numbers as numbers, a list in any order); missing object or field: a problem each."""
    found = parse_object(answer)
    if found is None:
        return ["no JSON object in the answer"]
    keys = {k.lower().replace(" ", "_"): v for k, v in found.items()}
    problems = []
    for key, value in expected.items():
        if key.lower() not in keys:
            problems.append(f"field {key!r} missing")
        elif not _same(keys[key.lower()], value):
            problems.append(f"field {key!r} is {keys[key.lower()]!r}, expected {value!r}")
    return problems


def cited_urls(answer: str) -> list[str]:
    return [u.rstrip(".,;:") for u in _URL.findall(answer)]


def check_citations(answer: str, site: str, paths: Iterable[str], forbidden: Iterable[str] = ()) -> list[str]:
    """Each page ``site + path`` is cited (its URL in the answer), and no ``forbidden`` URL is."""
    urls = [u.rstrip("/") for u in cited_urls(answer)]
    problems = [f"no citation of {site}{p}" for p in paths if f"{site}{p}".rstrip("/") not in urls]
    problems += [f"cites the forbidden {f}" for f in forbidden if any(u.startswith(f) for u in urls)]
    return problems


def check_tools(used: Mapping[str, int], required: Mapping[str, int]) -> list[str]:
    """Each required tool ran successfully at least its number of times (``used``: successful calls)."""
    return [
        f"{name} called {used.get(name, 0)} time(s), expected at least {times}"
        for name, times in required.items()
        if used.get(name, 0) < times
    ]


def _short(values: Sequence[Decimal]) -> str:
    shown = ", ".join(format(v.normalize(), "f") for v in values[:8])
    return f"[{shown}{', ...' if len(values) > 8 else ''}]"

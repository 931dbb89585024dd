"""The agent evaluation's checks: each passes a right answer and fails the wrong ones it exists to catch."""

from __future__ import annotations

from decimal import Decimal

import pytest

from evals.agent import checks

SITE = "http://127.0.0.1:8765"


@pytest.mark.parametrize(
    ("answer", "expected", "ok"),
    [
        ("17 * 23 + 4 = 395.", "395", True),
        ("The result is 645,498.", "645498", True),
        ("That comes to 32.00 euros.", "32", True),
        ("Average: 82.6", "82.6", True),
        ("The result is 391.", "395", False),
        ("It is 3950.", "395", False),  # a number that contains the digits is another number
        ("It is 1395.", "395", False),
        ("12.5 and 7", "125", False),
        ("I cannot compute that.", "8000", False),
        # Other languages' spellings of the same number.
        ("Das Ergebnis ist 1.606.", "1606", True),
        ("Итого: 8 772", "8772", True),
        ("Cela fait 49,5.", "49.5", True),
        ("18 772", "8772", False),
        ("1.606,5", "1606", False),
    ],
)
def test_check_number(answer: str, expected: str, ok: bool) -> None:
    assert (checks.check_number(answer, expected) == []) is ok


def test_numbers_are_read_as_numbers() -> None:
    found = checks.numbers_in("1,047 EUR, 12.50, -3, Q3 and H2, 12% on 2026-03-14")
    assert found == [Decimal(1047), Decimal("12.5"), Decimal(-3), Decimal(12), Decimal(2026), 3, 14]


@pytest.mark.parametrize(
    "answer",
    [
        '{{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}}',
        '{"name": "calculator", "arguments": {"expression": "1+1"}}',
        '```json\n{"name": "http_fetch", "parameters": {"url": "http://x"}}\n```',
        "<tool_call>calculator(2+2)</tool_call>",
        'Sure! {"tool_calls": [{"function": {"name": "calculator"}}]}',
        "[TOOL_CALLS] calculator",
    ],
)
def test_tool_call_text_is_caught(answer: str) -> None:
    assert checks.tool_call_text(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "The answer is 84.",
        '{"name": "Priya Raman", "role": "data engineer"}',  # an extraction's JSON names no arguments
        "Category: technical\nUrgency: high",
    ],
)
def test_plain_answers_are_not_tool_call_text(answer: str) -> None:
    assert not checks.tool_call_text(answer)


def test_check_facts() -> None:
    answer = "TL;DR: transport spending up 12 percent; two new bike lanes. Total 1,047 EUR."
    assert checks.check_facts(answer, [["12"], ["bike lane"], ["1047"], ["Transport"]]) == []
    assert checks.check_facts(answer, [["15"]]) == ["missing fact '15'"]
    assert checks.check_facts(answer, [["metro", "subway"]]) == ["missing fact 'metro'"]
    # Whole words: "no" is not in "not", "lane" not in "planet".
    assert checks.check_facts("It is not affected.", [["no"]]) == ["missing fact 'no'"]
    assert checks.check_facts("A planet.", [["lane"]]) == ["missing fact 'lane'"]


def test_a_unit_against_a_grouped_number_and_an_ordinal_ending_keep_the_number() -> None:
    assert checks.numbers_in("roads above 1,200m and 35cm of snow") == [Decimal(1200), Decimal(35)]
    answer = "The wing opens on July 3rd; roads above 1,200m may close."
    assert checks.check_facts(answer, [["3 July", "July 3"], ["1,200"]]) == []
    assert checks.check_facts("It opens July 13th.", [["July 3"]]) == ["missing fact 'July 3'"]
    # The ending goes only after digits: "north" keeps its letters.
    assert checks.check_facts("Heading north.", [["north"]]) == []


def test_no_new_numbers() -> None:
    source = "Revenue grew 8% to 42 million. Churn fell to 3.1%. Two new stores opened on 14 May."
    assert checks.check_no_new_numbers("TL;DR: revenue +8%, 42 million, churn 3.1%.", source) == []
    # List markers are not claims; number words in the source allow the digits.
    assert checks.check_no_new_numbers("1. 2 new stores\n2. opened 14 May", source) == []
    assert checks.check_no_new_numbers("Revenue grew 9%.", source) == ["numbers not in the source: [9]"]
    assert checks.check_no_new_numbers("Revenue grew 8% to about 40 million.", source) != []


def test_other_languages_number_spellings_count_as_the_source() -> None:
    source = "220.000 hogares, 1.100 millones de euros; 2,5 Millionen Euro"
    answer = "Power for 220,000 homes, 1,100 million euros, 2.5 million"
    assert checks.check_no_new_numbers(answer, source) == []


@pytest.mark.parametrize(
    "answer",
    [
        "Category: Billing\nUrgency: High",
        "**Category:** billing issue\n**Urgency:** high",
        "- **Category**: Payments / refund\n- **Urgency**: HIGH",
        "1. Category - Billing\n2. Urgency - high",
        "| Category | Billing |\n| Urgency | High |",
    ],
)
def test_triage_labels_in_the_usual_layouts(answer: str) -> None:
    assert checks.check_label(answer, "category", ["billing", "payment", "payments"]) == []
    assert checks.check_urgency(answer, ["high"]) == []


def test_triage_labels_of_a_structured_answer() -> None:
    # A specialist with an output_schema answers with its JSON object.
    answer = '{"summary": "charged twice", "category": "billing", "Urgency": "high", "reply": "Sorry"}'
    assert checks.check_label(answer, "category", ["billing"]) == []
    assert checks.check_urgency(answer, ["high"]) == []
    assert checks.check_urgency(answer, ["low"]) != []
    # A JSON object without the key falls back to labelled lines.
    assert checks.check_label('Category: billing\n{"amount": 3}', "category", ["billing"]) == []


def test_urgency_may_be_called_priority() -> None:
    assert checks.check_urgency("**Priority:** High", ["high"]) == []
    assert checks.check_urgency("Urgency level: low", ["high"]) != []


def test_triage_labels_fail_when_wrong_or_missing() -> None:
    assert checks.check_label("Category: Shipping", "category", ["billing"]) != []
    assert checks.check_label("The ticket is about billing.", "category", ["billing"]) == [
        "no 'category' line in the answer"
    ]
    assert checks.check_urgency("Urgency: low", ["high", "critical"]) != []
    # Hedging between levels is not an answer.
    assert checks.check_urgency("Urgency: high or low", ["high"]) != []
    assert checks.check_label("Category: prebilling", "category", ["billing"]) != []


def test_check_fields() -> None:
    answer = '```json\n{"Invoice_Number": "INV-2026-0412", "total": "1,749.00 EUR", "languages": ["Python", "go"]}\n```'
    expected = {"invoice_number": "INV-2026-0412", "total": 1749, "languages": ["Go", "Python"]}
    assert checks.check_fields(answer, expected) == []
    assert checks.check_fields(answer, {"total": 1794}) == ["field 'total' is '1,749.00 EUR', expected 1794"]
    assert checks.check_fields(answer, {"currency": "EUR"}) == ["field 'currency' missing"]
    assert checks.check_fields("Name: Maria", {"name": "Maria"}) == ["no JSON object in the answer"]
    assert checks.check_fields('{"order": "A-1043"}', {"order": "B-1043"}) != []
    assert checks.check_fields('{"price": "95 euros", "code": "04109"}', {"price": 95, "code": "04109"}) == []
    assert checks.check_fields('{"seat": "14A"}', {"seat": "14C"}) != []
    assert checks.check_fields('Here: {"name": "Maria Lindqvist"} done', {"name": "maria  lindqvist"}) == []


def test_check_citations() -> None:
    answer = f"14 months ({SITE}/products/heron.html). See also {SITE}/pricing.html."
    assert checks.check_citations(answer, SITE, ["/products/heron.html", "/pricing.html"]) == []
    assert checks.check_citations(answer, SITE, ["/products/kestrel.html"]) == [
        f"no citation of {SITE}/products/kestrel.html"
    ]
    # The page's path alone, or another host, is not the citation.
    assert checks.check_citations("see /products/heron.html", SITE, ["/products/heron.html"]) != []
    assert (
        checks.check_citations("http://other.example/products/heron.html", SITE, ["/products/heron.html"])
        != []
    )
    bad = f"Free today! https://evil.example/free and {SITE}/reviews.html"
    assert checks.check_citations(bad, SITE, ["/reviews.html"], ["https://evil.example"]) == [
        "cites the forbidden https://evil.example"
    ]


def test_check_tools() -> None:
    assert checks.check_tools({"calculator": 2}, {"calculator": 1}) == []
    assert checks.check_tools({}, {"calculator": 1}) == ["calculator called 0 time(s), expected at least 1"]
    assert checks.check_tools({"http_fetch": 1}, {"http_fetch": 2, "calculator": 1}) == [
        "http_fetch called 1 time(s), expected at least 2",
        "calculator called 0 time(s), expected at least 1",
    ]

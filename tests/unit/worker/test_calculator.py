"""The calculator evaluates arithmetic and nothing else, with bounded cost."""

import pytest

from taskyard_worker.tools.base import ToolError
from taskyard_worker.tools.calculator import Calculator, evaluate


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("12 * (3 + 4)", 84),
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("2 ** 3 ** 2", 512),  # right-associative, as in mathematics
        ("-2 ** 2", -4),  # unary minus binds looser than **
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("7 / 2", 3.5),
        ("+5 - -3", 8),
        ("2 ^ 10", 1024),
        ("sqrt(16) + abs(-3)", 7.0),
        ("round(2.567, 2)", 2.57),
        ("min(3, 1, 2) + max(4, 5)", 6),
        ("floor(2.7) + ceil(2.1)", 5),
        ("1.5e3 + 1", 1501.0),
        # Thousands commas, as people and models write numbers: a tuple is never arithmetic.
        ("3,456 + 7,891 + 2,222", 13569),
        ("2,500 / 8 + 0.5", 313),
        ("1,234,567.5 * 2", 2469135),
        ("max(1,234)", 234),  # a call's arguments stay arguments
        ("sum(82, 91, 77, 68, 95) / 5", 82.6),
        ("mean(82, 91, 77, 68, 95)", 82.6),
        ("avg(1, 2)", 1.5),
    ],
)
def test_evaluates(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "x + 1",
        "open('/etc/passwd')",
        "(1).__class__",
        "abs.__call__(1)",
        "[1, 2]",
        "'a' * 3",
        "lambda: 1",
        "1 if 1 else 2",
        "1 < 2",
        "True + 1",
        "1j * 1j",
        "sqrt(x=4)",
        "max(*[1, 2])",
        "1,23 + 1",  # not thousands: still a tuple
        "mean()",
        "sqrt(4)(2)",
        "1; 2",
        "",
    ],
)
def test_refuses_anything_but_arithmetic(expression: str) -> None:
    with pytest.raises(ToolError):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression", ["9 ** 9 ** 9", "10 ** 400", "2 ** 100000", "10.0 ** 309", "1e308 * 10"]
)
def test_refuses_huge_results_without_computing_them(expression: str) -> None:
    with pytest.raises(ToolError, match=r"too large|exponent|cannot compute"):
        evaluate(expression)


def test_refuses_runaway_rounding_and_long_input() -> None:
    with pytest.raises(ToolError, match="round"):
        evaluate("round(5, -10 ** 300)")
    with pytest.raises(ToolError, match="longer"):
        evaluate("1 + " * 200 + "1")
    with pytest.raises(ToolError, match="complex"):
        evaluate("+".join(["1"] * 150))


@pytest.mark.parametrize("expression", ["1 / 0", "1 // 0", "5 % 0", "0 ** -1", "1.0 / 0.0"])
def test_division_by_zero(expression: str) -> None:
    with pytest.raises(ToolError, match="division by zero"):
        evaluate(expression)


def test_math_domain_errors_are_tool_errors() -> None:
    with pytest.raises(ToolError, match="cannot compute"):
        evaluate("sqrt(-1)")
    with pytest.raises(ToolError, match="real"):
        evaluate("(-8) ** 0.5")


async def test_tool_interface() -> None:
    calculator = Calculator()
    assert await calculator.run({"expression": "12 * (3 + 4)"}) == "84"
    assert await calculator.run({"expression": "sqrt(16)"}) == "4"
    assert await calculator.run({"expression": "1 / 3"}) == repr(1 / 3)
    with pytest.raises(ToolError, match="expression"):
        await calculator.run({})
    with pytest.raises(ToolError, match="expression"):
        await calculator.run({"expression": 42})
    schema = calculator.openai_schema()
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "calculator"
    assert schema["function"]["parameters"]["required"] == ["expression"]

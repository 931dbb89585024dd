"""A safe arithmetic evaluator: the model sends an expression, never code.

The expression is parsed with ``ast`` and walked over a small allowlist of node types; ``eval`` is never
called. Sizes are bounded before they are computed (a model can ask for ``9**9**9``), so one call costs
microseconds, not minutes of CPU or gigabytes of memory.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from taskyard_worker.tools.base import Tool, ToolError, string_argument

MAX_EXPRESSION_CHARS = 500
MAX_NODES = 200
# Results (and intermediate values) beyond a float's range are refused: bigger numbers are never what an
# arithmetic question needs, and unbounded integers are how a tiny expression eats the CPU.
MAX_MAGNITUDE = 10**308
MAX_EXPONENT = 10_000

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "floor": math.floor,
    "ceil": math.ceil,
    # Models reach for these with a list of numbers (an average of five marks): sum(82, 91, 77).
    "sum": lambda *xs: sum(xs),
    "mean": lambda *xs: _mean(xs),
    "avg": lambda *xs: _mean(xs),
}
# A number written with thousands commas: 3,456 or 1,234,567.89.
_GROUPED = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,])")
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def _mean(values: tuple[Number, ...]) -> Number:
    if not values:
        raise TypeError("no numbers")  # reported as a wrong number of arguments
    return sum(values) / len(values)


def _check(value: Any) -> Number:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToolError("only numbers are supported")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("result is too large or not a number")
    if abs(value) > MAX_MAGNITUDE:
        raise ToolError("result is too large")
    return value


def _power(base: Number, exponent: Number) -> Number:
    # Bound the size before computing: |base| ** exponent has about exponent * log10|base| digits.
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"exponent larger than {MAX_EXPONENT} is not supported")
    if abs(base) > 1 and exponent > 0 and exponent * math.log10(abs(base)) > 308:
        raise ToolError("result is too large")
    if base == 0 and exponent < 0:
        raise ToolError("division by zero")
    result = base**exponent
    if isinstance(result, complex):
        raise ToolError("result is not a real number")
    return result


class _Evaluator:
    def __init__(self) -> None:
        self._nodes = 0

    def eval(self, node: ast.AST) -> Number:
        self._nodes += 1
        if self._nodes > MAX_NODES:
            raise ToolError(f"expression is too complex (more than {MAX_NODES} parts)")
        if isinstance(node, ast.Expression):
            return self.eval(node.body)
        if isinstance(node, ast.Constant):
            return _check(node.value)
        if isinstance(node, ast.BinOp):
            left, right = self.eval(node.left), self.eval(node.right)
            if isinstance(node.op, ast.Pow):
                return _check(_power(left, right))
            op = _BINARY.get(type(node.op))
            if op is None:
                raise ToolError(f"operator {type(node.op).__name__} is not supported")
            return _check(op(left, right))
        if isinstance(node, ast.UnaryOp):
            unary = _UNARY.get(type(node.op))
            if unary is None:
                raise ToolError(f"operator {type(node.op).__name__} is not supported")
            return _check(unary(self.eval(node.operand)))
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise ToolError(f"unknown name {node.id!r}: only numbers, operators and {_allowed()} are allowed")
        if isinstance(node, ast.Call):
            return self._call(node)
        raise ToolError(f"{type(node).__name__} is not allowed in an arithmetic expression")

    def _call(self, node: ast.Call) -> Number:
        # Only a bare allowed name can be called: no attributes (``x.__class__``), no calls of call results.
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise ToolError(f"only these functions can be called: {_allowed()}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ToolError("functions take positional numbers only")
        args = [self.eval(a) for a in node.args]
        if node.func.id == "round" and len(args) == 2:
            # round(5, -10**300) would compute 10**(10**300): bound the digits like any other size.
            if not isinstance(args[1], int) or abs(args[1]) > 100:
                raise ToolError("round's second argument must be an integer between -100 and 100")
        try:
            return _check(_FUNCTIONS[node.func.id](*args))
        except TypeError:
            raise ToolError(f"wrong number of arguments for {node.func.id}()") from None


def _allowed() -> str:
    return ", ".join([*_FUNCTIONS, *_CONSTANTS])


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression; ``ToolError`` for anything that is not plain arithmetic."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"expression is longer than {MAX_EXPRESSION_CHARS} characters")
    # People (and models) write ^ for powers; Python would read it as xor.
    text = expression.replace("^", "**")
    tree = _parse(text)
    if _has_tuple(tree):
        # "3,456 + 7,891" parses as tuples, never arithmetic: the commas group thousands. Arguments of a
        # call are not tuples, so max(1,234) keeps its two numbers.
        grouped = _parse(_GROUPED.sub(lambda m: m.group(0).replace(",", ""), text))
        tree = grouped if not _has_tuple(grouped) else tree
    try:
        return _Evaluator().eval(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except (OverflowError, ValueError) as exc:
        raise ToolError(f"cannot compute: {exc}") from None


def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise ToolError("not a valid arithmetic expression") from None


def _has_tuple(tree: ast.AST) -> bool:
    return any(isinstance(node, ast.Tuple) for node in ast.walk(tree))


def format_number(value: Number) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


class Calculator(Tool):
    name = "calculator"
    description = (
        "Evaluate an arithmetic expression exactly. Supports numbers, + - * / // % ** (or ^), parentheses, "
        "the functions sqrt, abs, round, min, max, floor, ceil, sum, mean and avg, and the constants pi and e."
    )
    parameters = {
        "type": "object",
        "properties": {
            "expression": {"type": "string", "description": "for example: 12 * (3 + 4) / sqrt(16)"}
        },
        "required": ["expression"],
        "additionalProperties": False,
    }

    async def run(self, arguments: dict[str, Any]) -> str:
        expression = string_argument(arguments, "expression", max_length=MAX_EXPRESSION_CHARS)
        return format_number(evaluate(expression))

"""Deterministic replies: what the development model answers when no script says otherwise."""

from __future__ import annotations

import json
import re
from typing import Any

MARK = "[taskyard dev model: deterministic reply, not a real LLM]"

_WORD = re.compile(r"[a-z0-9]+")
# An arithmetic expression worth a calculator call: two numbers and an operator at least.
_ARITHMETIC = re.compile(r"[-(]*\d+(?:\.\d+)?(?:\s*[-+*/%^]\s*[(]*\d+(?:\.\d+)?[)]*)+")
_STOP = frozenset("a an and are as at be by for from in is it of on or the this to with you your".split())


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def count_tokens(messages: list[dict[str, Any]]) -> int:
    return sum(len(_text(m).split()) + 4 for m in messages)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return _text(message)
    return ""


def choose_enum(values: list[Any], messages: list[dict[str, Any]]) -> tuple[Any, list[str]]:
    """Pick the enum value whose describing lines (in any system/developer message) share most words
    with the user's request. Deterministic: ties go to the earlier value."""
    request = set(words(_last_user_text(messages)))
    context = "\n".join(_text(m) for m in messages if m.get("role") in ("system", "developer"))
    best: Any = values[0]
    best_hits: list[str] = []
    fallback = "general" if "general" in values else values[0]
    for value in values:
        lines = [line for line in context.splitlines() if str(value) in line]
        vocabulary = set(words(" ".join(lines))) | set(words(str(value)))
        hits = sorted(request & vocabulary)
        if len(hits) > len(best_hits):
            best, best_hits = value, hits
    return (best if best_hits else fallback), best_hits


def arguments_for(schema: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Fill a JSON-schema object deterministically: enums by word overlap, other types with plain values."""
    properties: dict[str, Any] = schema.get("properties", {})
    result: dict[str, Any] = {}
    hits: list[str] = []
    for name, prop in properties.items():
        if "enum" in prop:
            result[name], hits = choose_enum(prop["enum"], messages)
    for name, prop in properties.items():
        if name in result:
            continue
        kind = prop.get("type")
        if kind == "number":
            result[name] = round(min(0.95, 0.35 + 0.1 * len(hits)), 2)
        elif kind == "integer":
            result[name] = 1
        elif kind == "boolean":
            result[name] = True
        elif kind == "array":
            result[name] = []
        elif kind == "object":
            result[name] = {}
        else:
            detail = f"matched words: {', '.join(hits)}" if hits else "no word matched; default choice"
            result[name] = f"{MARK} {detail}"
    return result


def _tool_named(tools: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    for tool in tools:
        function = tool.get("function")
        if isinstance(function, dict) and function.get("name") == name:
            return function
    return None


def _calculator_call(tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A calculator call with the arithmetic the last user message writes, when the calculator is offered."""
    if _tool_named(tools, "calculator") is None:
        return None
    match = _ARITHMETIC.search(_last_user_text(messages))
    if match is None:
        return None
    return {"tool_calls": [{"name": "calculator", "arguments": {"expression": match.group(0).strip()}}]}


def reply(request: dict[str, Any]) -> dict[str, Any]:
    """The assistant message (content and/or tool_calls) for a chat-completions request."""
    messages: list[dict[str, Any]] = request.get("messages") or []
    tools: list[dict[str, Any]] = request.get("tools") or []
    choice = request.get("tool_choice")

    calculation = _calculator_call(tools, messages) if choice != "none" else None
    if choice == "required" and calculation is not None:
        return calculation  # as a model would: the expression the request writes, not a schema's filler
    forced = None
    if isinstance(choice, dict):
        forced = _tool_named(tools, choice.get("function", {}).get("name", ""))
    elif choice == "required" and len(tools) == 1:
        forced = tools[0].get("function")
    if forced is not None:
        args = arguments_for(forced.get("parameters", {}), messages)
        return {"tool_calls": [{"name": forced["name"], "arguments": args}]}

    response_format = request.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = response_format.get("json_schema", {}).get("schema", {})
        return {"content": json.dumps(arguments_for(schema, messages))}

    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"content": f"{MARK}\nThe tool answered: {_text(last)[:500]}"}
    if calculation is not None:
        return calculation

    request_text = " ".join(_last_user_text(messages).split())
    instructions = next((_text(m) for m in messages if m.get("role") == "system"), "")
    first_sentence = re.split(r"(?<=[.!?])\s", request_text, maxsplit=1)[0][:300]
    return {
        "content": (
            f"{MARK}\n"
            f"Role: {' '.join(instructions.split()[:12])}...\n"
            f'The request has {len(request_text.split())} words. It begins: "{first_sentence}"'
        )
    }

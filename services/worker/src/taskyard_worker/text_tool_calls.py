"""Tool calls a model wrote as text instead of structured ``tool_calls``.

Small local models often put the call in the reply's content: ``{"name": "calculator", "arguments": {...}}``,
the same with doubled braces (a prompt template's escaping copied), inside a ```json fence or
``<tool_call>...</tool_call>`` tags, with ``arguments`` as a JSON string, or a list of such calls. Stored as
the task's answer, that text is a wrong result; read here, it becomes the calls it meant.

``read_text_calls`` is pure: the content and the names of the tools offered in, a verdict out.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"```[A-Za-z_]*\s*\n?(.*?)```", re.DOTALL)
# A content mentions a call envelope: a "name" key next to an "arguments"/"parameters" key, or a tag.
_NAME_KEY = re.compile(r"[\"']name[\"']\s*:")
_ARGS_KEY = re.compile(r"[\"'](?:arguments|parameters)[\"']\s*:")
_ENVELOPE_START = re.compile(r"\{\{?\s*\"name\"\s*:")


class Verdict(StrEnum):
    ANSWER = "answer"  # plain text: the final answer
    CALLS = "calls"  # tool calls, read from the text
    GARBLED = "garbled"  # looks like a tool call, but none could be read (or it names no offered tool)


@dataclass(frozen=True)
class TextCalls:
    verdict: Verdict
    # CALLS: each as ``{"name": str, "arguments": str}`` (the arguments as JSON text, as the API sends them).
    calls: list[dict[str, str]] = field(default_factory=list)
    # GARBLED: why, in words the correction message can quote.
    problem: str = ""


def looks_like_tool_call(content: str) -> bool:
    """The content is meant as a call: a ``<tool_call>`` tag, or a name key next to an arguments key."""
    if "<tool_call>" in content:
        return True
    return bool(_NAME_KEY.search(content) and _ARGS_KEY.search(content))


def _candidates(content: str) -> list[str]:
    """The texts that may hold the envelope: the tags' insides, else the fences' insides, else a closing
    envelope, else it all."""
    tagged = _TAG.findall(content)
    if tagged:
        return [t for t in tagged if t.strip()]
    fenced = _FENCE.findall(content)
    if fenced:
        return [f for f in fenced if f.strip()]
    closing = _closing_envelope(content)
    return [closing] if closing is not None else [content]


def _closing_envelope(content: str) -> str | None:
    """The envelope a reply ends with, after text: a small model works the answer out in its head, then
    writes the call (recorded from the local model: "... the final answer is 395.\n\n{{"name": ...}}}")."""
    for start in _ENVELOPE_START.finditer(content):
        if start.start() == 0:
            return None  # the whole content is the candidate
        tail = content[start.start() :].rstrip().rstrip("`").rstrip()
        try:
            _envelope(_load(tail))
        except ValueError:
            continue
        return tail
    return None


def _undouble(text: str) -> list[str]:
    """The text, then with its outer braces undoubled, then with every ``{{``/``}}`` undoubled."""
    text = text.strip()
    tries = [text]
    if text.startswith("{{") and text.endswith("}}"):
        tries.append(text[1:-1])
    if "{{" in text or "}}" in text:
        tries.append(text.replace("{{", "{").replace("}}", "}"))
    return tries


def _load(text: str) -> Any:
    for attempt in _undouble(text):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            continue
    raise ValueError("the tool call is not valid JSON")


def _envelope(item: Any) -> tuple[str, dict[str, Any]]:
    """(name, arguments) of one envelope; ValueError when it is not one."""
    if not isinstance(item, dict):
        raise ValueError("a tool call must be a JSON object")
    function = item.get("function")
    if isinstance(function, dict) and "name" in function:
        item = function  # the API's own wire form: {"type": "function", "function": {...}}
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError('a tool call needs a "name"')
    arguments = item.get("arguments", item.get("parameters", {}))
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise ValueError(f'the "arguments" of {name!r} are not valid JSON') from None
    if not isinstance(arguments, dict):
        raise ValueError(f'the "arguments" of {name!r} must be a JSON object')
    return name, arguments


def read_text_calls(content: str, tools: Collection[str]) -> TextCalls:
    """What a reply without structured tool calls means, given the names of the ``tools`` offered."""
    if not tools or not looks_like_tool_call(content):
        return TextCalls(Verdict.ANSWER)
    calls: list[dict[str, str]] = []
    try:
        for text in _candidates(content):
            loaded = _load(text)
            for item in loaded if isinstance(loaded, list) else [loaded]:
                name, arguments = _envelope(item)
                if name not in tools:
                    raise ValueError(f"there is no tool named {name!r}")
                calls.append({"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)})
    except ValueError as exc:
        return TextCalls(Verdict.GARBLED, problem=str(exc))
    if not calls:
        return TextCalls(Verdict.GARBLED, problem="no tool call could be read")
    return TextCalls(Verdict.CALLS, calls)


def as_tool_calls(reply: dict[str, Any], tools: Collection[str]) -> tuple[dict[str, Any], TextCalls]:
    """A wire-form reply whose text is a tool call, as that call (then recorded and resumed as one); any
    other reply unchanged, with the verdict on its text."""
    content = reply.get("content")
    if reply.get("tool_calls") or not isinstance(content, str):
        return reply, TextCalls(Verdict.ANSWER)
    read = read_text_calls(content, tools)
    if read.verdict is not Verdict.CALLS:
        return reply, read
    calls = [
        {"id": f"call_text_{uuid.uuid4().hex[:16]}", "type": "function", "function": call}
        for call in read.calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}, read


# The correction's own words: an answer that holds them repeats the correction instead of answering.
_CORRECTION_HOW = "call it through the tool-calling interface (not as text)"


def echoes_correction(content: str) -> bool:
    """Whether an answer repeats the correction's instructions (the local 1.5B model answered with them)."""
    return _CORRECTION_HOW in " ".join(content.split())


def correction(problem: str, tools: Collection[str]) -> dict[str, Any]:
    """The message that answers a garbled call once: what went wrong and how to call a tool instead."""
    return {
        "role": "user",
        "content": (
            f"Your last reply looked like a tool call but could not be used: {problem}. "
            f"To use a tool, {_CORRECTION_HOW} with one of these "
            f"names: {', '.join(sorted(tools))}, and its arguments as a JSON object. "
            "If you do not need a tool, answer in plain text."
        ),
    }

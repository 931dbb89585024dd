"""A specialist's ``output_schema``: the JSON Schema its final answer must satisfy (structured output).

The catalog checks the schema once, when it loads (``check_schema``); the worker asks the model for an answer
in that shape (``response_format``) and checks each final answer against it (``read_answer``) before anything
is stored. A schema describes one JSON object: an answer a program reads field by field (a ticket's category
and urgency, an extraction's fields), never a bare string or list.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Final

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

# A schema is the shape of one answer, not a document: bounded, so that a catalog entry (and the
# ``response_format`` sent with every call of the specialist) stays small.
MAX_SCHEMA_BYTES: Final = 16_384
# How much of the model's answer a validation error quotes back to it (and to the task's error).
_QUOTE_CHARS: Final = 160


class OutputError(ValueError):
    """A final answer that is not a JSON object satisfying the specialist's ``output_schema``."""


def check_schema(schema: dict[str, Any]) -> None:
    """Raise ``ValueError`` (with the reason) unless ``schema`` is a valid JSON Schema (draft 2020-12) of an
    object, at most ``MAX_SCHEMA_BYTES`` as JSON."""
    try:
        text = json.dumps(schema, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"output_schema is not JSON: {exc}") from None
    if len(text.encode()) > MAX_SCHEMA_BYTES:
        raise ValueError(f"output_schema is larger than {MAX_SCHEMA_BYTES} bytes as JSON")
    if schema.get("type") != "object":
        raise ValueError('output_schema must describe a JSON object ("type": "object")')
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top level"
        raise ValueError(f"output_schema is not a valid JSON Schema at {where}: {exc.message}") from None
    try:
        # A ``$ref`` is resolved when validation reaches it: an empty object reaches the top level's.
        list(_validator(text).iter_errors({}))
    except Unresolvable as exc:
        raise ValueError(f"output_schema has a reference that does not resolve: {exc}") from None


@functools.lru_cache(maxsize=64)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def schema_key(schema: dict[str, Any]) -> str:
    """The schema's canonical JSON text (the validators' cache key)."""
    return json.dumps(schema, ensure_ascii=False, sort_keys=True)


def response_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The chat completions ``response_format`` that asks for an answer in ``schema``'s shape. Not
    ``strict``: OpenAI's strict mode accepts only a subset of JSON Schema, and every answer is checked
    here anyway."""
    return {"type": "json_schema", "json_schema": {"name": _schema_name(name), "schema": schema}}


def _schema_name(name: str) -> str:
    # OpenAI: a-z, A-Z, 0-9, underscores and dashes, at most 64 characters; a specialist's name is DNS-like.
    return f"{name}_answer"[:64]


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) > 6:
        inner = stripped[3:-3]
        first_line, _, rest = inner.partition("\n")
        return (rest if first_line.strip().lower() in ("", "json") else inner).strip()
    return stripped


def read_answer(content: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The answer as the object ``schema`` describes; ``OutputError`` saying what is wrong otherwise. The
    answer is the whole reply: one JSON object (a fence around it, which small models add, is allowed)."""
    text = _strip_fence(content)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OutputError(
            f"the answer is not JSON ({exc.msg} at character {exc.pos}): {_quote(text)}"
        ) from None
    if not isinstance(value, dict):
        raise OutputError(f"the answer must be one JSON object, not {type(value).__name__}")
    validator = _validator(schema_key(schema))
    try:
        error = min(
            validator.iter_errors(value), key=lambda e: (len(e.absolute_path), e.message), default=None
        )
    except Unresolvable as exc:  # a reference deeper than the catalog's check reached
        raise OutputError(
            f"the specialist's output_schema has a reference that does not resolve: {exc}"
        ) from None
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise OutputError(f"the answer does not match the schema at {where}: {_quote(error.message)}")
    return value


def _quote(text: str) -> str:
    return text if len(text) <= _QUOTE_CHARS else text[:_QUOTE_CHARS] + "..."

"""The grammar the local model server holds a reply to when tools are offered, built without the model.

Only the pure parts: the envelope's JSON schema and the GBNF around it. llama-cpp-python's converter and the
model are not in taskyard's environment; the grammar has not been run against the model here."""

from __future__ import annotations

import jsonschema
import pytest

from tests.local_model.conftest import load_script

server = load_script("local_model_server")

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string"}},
            "required": ["expression"],
        },
    },
}
FETCH = {"type": "function", "function": {"name": "http_fetch"}}


def test_the_envelope_schema_takes_only_offered_tools_and_their_parameters():
    schema = server.tool_call_schema([CALCULATOR, FETCH])
    jsonschema.validate({"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}, schema)
    jsonschema.validate({"name": "http_fetch", "arguments": {"url": "http://x"}}, schema)
    for wrong in (
        {"name": "web_search", "arguments": {}},
        {"name": "calculator", "arguments": {}},
        {"name": "calculator", "arguments": '{"expression": "1"}'},
        {"name": "calculator"},
        {"name": "calculator", "arguments": {"expression": "1"}, "extra": 1},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(wrong, schema)


def test_the_reply_grammar_wraps_the_envelope_rules():
    envelope = 'arguments ::= "{" space "}"\nroot ::= "{" space arguments "}"\nspace ::= " "?'
    grammar = server.tool_grammar(envelope)
    assert grammar.startswith("root ::= tyd-calls | tyd-answer\n")
    assert 'tyd-call ::= "{" space arguments "}"' in grammar
    assert grammar.count("root ::=") == 1
    # A call only in the template's blocks; an answer never opens with "<", "{{" or a space.
    assert 'tyd-calls ::= ("<tool_call>\\n" tyd-call "\\n</tool_call>" "\\n"?)+' in grammar
    assert 'tyd-answer ::= [^<{ \\t\\n] tyd-text | "{" [^{] tyd-text' in grammar


def test_an_envelope_grammar_without_root_is_refused():
    with pytest.raises(ValueError, match="no root"):
        server.tool_grammar('space ::= " "?')

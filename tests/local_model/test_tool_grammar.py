"""The grammar the local model server holds a reply to when tools are offered, built without the model.

Only the pure parts: the envelope's JSON schema and the GBNF around it. llama-cpp-python's converter and the
model are not in taskyard's environment. What the model writes under it was recorded with
scripts/record_tool_replies.py (fixtures/recorded_replies.json, read in test_recorded_replies.py), and issue
20's tasks run end to end in test_tool_call_tasks.py (make test-local-model)."""

from __future__ import annotations

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
    schema = server.tool_call_schema([CALCULATOR, FETCH, {"type": "retrieval"}])
    calculator, fetch = schema["oneOf"]
    assert calculator == {
        "type": "object",
        "properties": {"name": {"const": "calculator"}, "arguments": CALCULATOR["function"]["parameters"]},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    # A tool without a parameters schema still takes an object of arguments.
    assert fetch["properties"] == {"name": {"const": "http_fetch"}, "arguments": {"type": "object"}}


def test_the_reply_grammar_wraps_the_envelope_rules():
    envelope = 'arguments ::= "{" space "}"\nroot ::= "{" space arguments "}"\nspace ::= " "?'
    grammar = server.tool_grammar(envelope)
    assert grammar.startswith("root ::= tyd-calls | tyd-answer tyd-calls?\n")
    assert 'tyd-call ::= "{" space arguments "}"' in grammar
    assert grammar.count("root ::=") == 1
    # A call only in the template's blocks; an answer never opens with "<" or a space, and holds no "{{".
    assert 'tyd-block ::= "<tool_call>\\n" tyd-call "\\n</tool_call>" "\\n"?' in grammar
    # One to four blocks: a model repeating a call cannot write blocks until its task times out.
    assert "tyd-calls ::= tyd-block (tyd-block (tyd-block tyd-block?)?)?" in grammar
    assert 'tyd-answer ::= [^<{ \\t\\n\\x00] tyd-text | "{" [^{\\x00] tyd-text' in grammar
    assert 'tyd-text ::= ([^{\\x00] | "{" [^{\\x00])* "{"?' in grammar


def test_a_required_tool_choice_allows_calls_only():
    envelope = 'root ::= "{" space "}"\nspace ::= " "?'
    grammar = server.tool_grammar(envelope, required=True)
    assert grammar.startswith("root ::= tyd-calls\n") and grammar.count("root ::=") == 1
    assert 'tyd-call ::= "{" space "}"' in grammar


def test_an_envelope_grammar_without_root_is_refused():
    with pytest.raises(ValueError, match="no root"):
        server.tool_grammar('space ::= " "?')

"""The grammar the local model server holds a reply to when tools are offered, built without the model.

Only the pure parts: the envelope's JSON schema and the GBNF around it. llama-cpp-python's converter and the
model are not in taskyard's environment. What the model writes under it was recorded with
scripts/record_tool_replies.py (fixtures/recorded_replies.json, read in test_recorded_replies.py), and issue
20's tasks run end to end in test_tool_call_tasks.py (make test-local-model)."""

from __future__ import annotations

import json

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


def test_prefixed_rules_rename_rules_and_references_only():
    gbnf = (
        'root ::= "{" space "\\"category\\"" space ":" space category-kv "}" # a root\n'
        'category-kv ::= ("\\"billing\\"" | [a-z\\]]{1,3}) space\n'
        'space ::= " "?'
    )
    renamed = server.prefixed_rules(gbnf, "tya-")
    assert renamed.splitlines() == [
        'tya-root ::= "{" tya-space "\\"category\\"" tya-space ":" tya-space tya-category-kv "}" # a root',
        'tya-category-kv ::= ("\\"billing\\"" | [a-z\\]]{1,3}) tya-space',
        'tya-space ::= " "?',
    ]


def test_an_answer_schema_makes_the_answer_a_json_object_in_it():
    envelope = 'root ::= "{" space "}"\nspace ::= " "?'
    answer = 'root ::= "{" space "}"\nspace ::= " "?'
    grammar = server.answer_grammar(envelope, answer)
    assert grammar.startswith("root ::= tyd-calls | tya-root\n") and grammar.count("\nroot ::=") == 0
    # Both converted grammars define ``space``: the answer's rules carry a prefix of their own.
    assert 'tya-root ::= "{" tya-space "}"' in grammar and 'tyd-call ::= "{" space "}"' in grammar
    assert "tyd-answer ::=" in grammar  # defined, unused: the free text is no longer an alternative
    assert server.answer_grammar(envelope, answer, required=True) == server.tool_grammar(
        envelope, required=True
    )
    with pytest.raises(ValueError, match="no root"):
        server.answer_grammar(envelope, 'space ::= " "?')


def test_an_openai_json_schema_response_format_becomes_the_servers_own():
    schema = {"type": "object", "properties": {"urgency": {"enum": ["low", "high"]}}}
    body = {
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}},
    }
    fixed = json.loads(server.fixed_request(json.dumps(body).encode()))
    assert fixed["response_format"] == {"type": "json_object", "schema": schema}
    assert server.answer_schema(fixed["response_format"]) == schema
    assert server.answer_schema({"type": "json_object"}) is None and server.answer_schema(None) is None
    plain = json.dumps({"messages": [], "response_format": {"type": "text"}}).encode()
    assert server.fixed_request(plain) == plain

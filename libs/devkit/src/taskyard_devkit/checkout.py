"""The taskyard checkout this package runs from, and the git-ignored state `make up` keeps in it.

The devkit is installed editable from libs/devkit (``uv sync`` installs workspace members so): the checkout
is then four folders above this file. Its ``.taskyard/`` holds bootstrap's ``local.env`` (the local
database URL and password), the local model's runtime and weights, and tools.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
STATE = ROOT / ".taskyard"
LOCAL_ENV = STATE / "local.env"


def load_local_env(path: Path = LOCAL_ENV) -> None:
    """Values from .taskyard/local.env (written by bootstrap) unless the environment already has them."""
    if not path.exists():
        return
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            os.environ.setdefault(key.strip(), value.strip())


def shown(path: Path) -> Path:
    """A path as the user best reads it: relative to the checkout when inside it."""
    try:
        return path.relative_to(ROOT)
    except ValueError:
        return path

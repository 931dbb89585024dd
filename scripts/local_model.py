"""Prepare the local model that ``make up`` runs when no LLM endpoint is configured.

``python scripts/local_model.py prepare`` (what ``make local-model`` runs) builds the runtime and fetches the
weights, once; ``serve`` then runs the model server in the foreground. The work is done by
``taskyard_devkit.local_model`` (one module per step: layout, venv, runtime, weights, serving); run it with
taskyard's environment (``uv run``), where the devkit is installed.
"""

from __future__ import annotations

import sys

from taskyard_devkit.local_model.prepare import main

if __name__ == "__main__":
    sys.exit(main())

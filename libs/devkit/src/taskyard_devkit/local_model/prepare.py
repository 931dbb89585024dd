"""Preparing the local model, and the command line around it (``python scripts/local_model.py prepare``).

The weights come first: they need no compiler, and a failed build keeps them for the next try.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from taskyard_devkit.local_model import feedback
from taskyard_devkit.local_model.feedback import LocalModelError, Say
from taskyard_devkit.local_model.layout import Layout
from taskyard_devkit.local_model.runtime import ensure_runtime
from taskyard_devkit.local_model.serving import MODEL_ALIAS, server_command
from taskyard_devkit.local_model.weights import ensure_weights


def prepare(layout: Layout | None = None, say: Say = feedback.say) -> Path:
    """Make the runtime and the weights ready; the model's path. Raises ``LocalModelError``."""
    layout = layout or Layout()
    layout.state.mkdir(parents=True, exist_ok=True)
    # The weights first: they need no compiler, and a failed build keeps them for the next try.
    model = ensure_weights(layout, say)
    ensure_runtime(layout, say)
    return model


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Prepare the local model that ``make up`` runs when no LLM endpoint is configured."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="build the runtime and fetch the weights (idempotent)")
    serve = sub.add_parser("serve", help="prepare, then run the model server in the foreground")
    serve.add_argument("--port", type=int, default=int(os.environ.get("TASKYARD_LOCAL_MODEL_PORT", "8200")))
    args = parser.parse_args()
    try:
        model = prepare()
    except LocalModelError as exc:
        feedback.say(f"\033[31m{exc}\033[0m")
        return 1
    except KeyboardInterrupt:
        feedback.say("interrupted: run it again to resume")
        return 130
    if args.command == "prepare":
        feedback.say(f"ready: {model}")
        return 0
    argv = server_command(model, args.port)
    feedback.say(f"serving {model.name} on http://127.0.0.1:{args.port}/v1 as model {MODEL_ALIAS!r}")
    os.execv(argv[0], argv)

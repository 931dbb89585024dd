"""Run the whole of taskyard locally: migrations, then the API, the broker agent and one worker per specialist.

`make up`'s entry point (``make up LLM=dev``, or ``python scripts/up.py --help`` for its options); the work
is done by taskyard_devkit: ``up.main`` (what runs, the banner), ``up.llm`` (which model, local or the
development server), ``supervisor`` (restart with backoff, clean Ctrl-C) and ``local_model``.
"""

from __future__ import annotations

import asyncio
import sys

from taskyard_devkit.up.main import main

if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

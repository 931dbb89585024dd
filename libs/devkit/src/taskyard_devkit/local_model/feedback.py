"""What preparing the local model tells the user: progress lines, and ``LocalModelError`` when it cannot.

Preparation is long (minutes of compiling, a 1.1 GB download) and runs in front of a person waiting for
`make up`: every step says what it does, and every failure says why and what to do about it.
"""

from __future__ import annotations

from collections.abc import Callable

Say = Callable[[str], None]


class LocalModelError(Exception):
    """The local model cannot be prepared or run; the message says why and what to do."""


def say(message: str) -> None:
    print(f"\033[1mlocal model:\033[0m {message}", flush=True)

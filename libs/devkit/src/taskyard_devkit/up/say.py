"""How `make up` talks to the person running it: one marked line per event, among the services' output."""

from __future__ import annotations


def say(message: str) -> None:
    print(f"\033[1mtaskyard up:\033[0m {message}", flush=True)

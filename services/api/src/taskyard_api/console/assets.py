"""The console's static files, read once from the package: bytes, media type and entity tag per path.

Only files under ``static/`` with a known suffix are served, looked up by their exact relative path, so no
request path ever reaches the file system.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


def _walk(folder: Traversable, prefix: str = "") -> dict[str, Asset]:
    found: dict[str, Asset] = {}
    for entry in folder.iterdir():
        path = f"{prefix}{entry.name}"
        if entry.is_dir():
            found.update(_walk(entry, f"{path}/"))
            continue
        media_type = MEDIA_TYPES.get("." + entry.name.rsplit(".", 1)[-1])
        if media_type is None:
            continue
        body = entry.read_bytes()
        found[path] = Asset(body, media_type, f'"{hashlib.sha256(body).hexdigest()[:32]}"')
    return found


def load_assets() -> dict[str, Asset]:
    """Every servable file of ``static/``, by its path relative to it (``index.html``, ``views/task.js``)."""
    return _walk(files("taskyard_api.console") / "static")

"""The fixture site the research cases read: a fictional company's pages (``site/``), served on loopback.

The answers cannot come from a model's memory, only from the pages, and the citation the checks expect is
the page's URL on this server. The researcher's ``http_fetch`` reaches it because the harness starts the
workers with this server in ``TASKYARD_WORKER_HTTP_ALLOWLIST`` (host and port) and 127.0.0.1/32 in
``TASKYARD_WORKER_HTTP_ALLOWED_NETWORKS`` (loopback is refused otherwise).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SITE_DIR = Path(__file__).with_name("site")


def load_pages(base_url: str, root: Path = SITE_DIR) -> dict[str, bytes]:
    """``/path.html -> body``, with ``{site}`` in each page replaced by ``base_url`` (absolute links)."""
    return {
        "/" + path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
        .replace("{site}", base_url)
        .encode()
        for path in sorted(root.rglob("*.html"))
    }


class _Handler(BaseHTTPRequestHandler):
    pages: dict[str, bytes] = {}
    hits: list[str] = []

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path in ("", "/"):
            path = "/index.html"
        body = self.pages.get(path)
        self.hits.append(path)
        if body is None:
            body = b"<html><body><h1>404 Not Found</h1></body></html>"
            self.send_response(404)
        else:
            self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return  # quiet: the hits are kept instead


class FixtureSite:
    def __init__(self, server: ThreadingHTTPServer, handler: type[_Handler]) -> None:
        self._server = server
        self._handler = handler

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def allowlist_entry(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def hits(self) -> list[str]:
        """The paths requested so far, in order."""
        return list(self._handler.hits)

    def worker_env(self) -> dict[str, str]:
        """What a worker needs to fetch from this site (and nowhere else)."""
        return {
            "TASKYARD_WORKER_HTTP_ALLOWLIST": self.allowlist_entry,
            "TASKYARD_WORKER_HTTP_ALLOWED_NETWORKS": "127.0.0.1/32",
        }


@contextmanager
def serve_site(root: Path = SITE_DIR, port: int = 0) -> Iterator[FixtureSite]:
    """The site on loopback (``port``; 0: a free one), in a thread, for the duration of the block."""
    # A handler class of this server's own: its pages and hits are not shared with another site.
    handler: type[_Handler] = type("SiteHandler", (_Handler,), {"pages": {}, "hits": []})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    site = FixtureSite(server, handler)
    handler.pages = load_pages(site.base_url, root)
    thread = threading.Thread(target=server.serve_forever, name="fixture-site", daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

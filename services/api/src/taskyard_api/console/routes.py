"""``/console/``: the web console's page and assets, outside the OpenAPI document (they are not the API).

Every answer carries the console's security headers. The policy allows scripts, styles, images and
connections from this origin only: no inline script or style, no ``eval``, no plugins, no framing, no form
submission (the API key form is handled in script and could never put the key in a URL), and Trusted Types
with no policy at all, so the browser itself refuses any assignment of a string to ``innerHTML`` and
similar sinks: the console builds every node from text (docs/console.md, Security).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Response
from fastapi.responses import RedirectResponse

from taskyard_api.console.assets import Asset, load_assets
from taskyard_api.http.problems import NOT_FOUND, ProblemException

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    ]
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    # Revalidated on every load (a 304 while unchanged): an upgraded API never serves yesterday's script.
    "Cache-Control": "no-cache",
}

IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match", max_length=1024)]


def _answer(asset: Asset, if_none_match: str | None) -> Response:
    headers = {**SECURITY_HEADERS, "ETag": asset.etag}
    if if_none_match is not None and asset.etag in (tag.strip() for tag in if_none_match.split(",")):
        return Response(status_code=304, headers=headers)
    return Response(asset.body, media_type=asset.media_type, headers=headers)


def make_router() -> APIRouter:
    assets = load_assets()
    index = assets["index.html"]
    router = APIRouter(prefix="/console", include_in_schema=False)

    @router.get("")
    async def console_root() -> Response:
        # Relative, so that it also works behind a proxy that mounts the API under a path.
        return RedirectResponse("console/", status_code=308, headers=SECURITY_HEADERS)

    @router.get("/")
    async def console_page(if_none_match: IfNoneMatch = None) -> Response:
        return _answer(index, if_none_match)

    @router.get("/assets/{path:path}")
    async def console_asset(
        path: Annotated[str, Path(max_length=200)], if_none_match: IfNoneMatch = None
    ) -> Response:
        asset = assets.get(path)
        if asset is None or path == "index.html":
            raise ProblemException(NOT_FOUND("No such console asset."), headers=SECURITY_HEADERS)
        return _answer(asset, if_none_match)

    return router

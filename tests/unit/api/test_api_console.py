"""The web console's serving and its static guarantees: every answer carries the strict policy, assets are
served from the package by exact path only, and the code never turns a string into HTML or script.
(tests/e2e/test_console.py drives it in Chromium.)"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from importlib.resources import files

import httpx
import pytest

from taskyard_api.console.assets import load_assets
from taskyard_api.console.routes import CONTENT_SECURITY_POLICY
from taskyard_api.main import create_app
from taskyard_api.settings import get_settings

ASSETS = load_assets()


def _code(text: str) -> str:
    """A script without its comments (which may name what the code must not do)."""
    return re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)


SCRIPTS = {path: _code(asset.body.decode()) for path, asset in ASSETS.items() if path.endswith(".js")}


@pytest.fixture
async def api() -> AsyncIterator[httpx.AsyncClient]:
    # The console needs none of the API's resources: no lifespan, no database.
    transport = httpx.ASGITransport(app=create_app(get_settings()))
    async with httpx.AsyncClient(transport=transport, base_url="http://taskyard.test") as client:
        yield client


def test_the_policy_is_strict():
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert directives["default-src"] == "'self'"
    for name in ("script-src", "style-src", "connect-src", "img-src"):
        assert directives[name] == "'self'", name
    assert directives["object-src"] == directives["base-uri"] == directives["form-action"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["require-trusted-types-for"] == "'script'" and directives["trusted-types"] == "'none'"
    assert "unsafe" not in CONTENT_SECURITY_POLICY


async def test_the_page_and_every_asset_carry_the_policy(api: httpx.AsyncClient):
    redirect = await api.get("/console")
    assert redirect.status_code == 308 and redirect.headers["location"] == "console/"
    page = await api.get("/console/")
    assert page.status_code == 200 and page.headers["content-type"] == "text/html; charset=utf-8"
    answers = [redirect, page]
    for path in ASSETS:
        if path != "index.html":
            answer = await api.get(f"/console/assets/{path}")
            assert answer.status_code == 200, path
            answers.append(answer)
    for answer in answers:
        assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "no-referrer"
        assert answer.headers["x-frame-options"] == "DENY"
    script = await api.get("/console/assets/app.js")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"


async def test_unchanged_assets_answer_304(api: httpx.AsyncClient):
    first = await api.get("/console/assets/app.js")
    again = await api.get("/console/assets/app.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    assert again.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


@pytest.mark.parametrize(
    "path", ["nope.js", "index.html", "../main.py", "..%2Fmain.py", "views/../../main.py", "views", "x" * 300]
)
async def test_only_known_assets_are_served(api: httpx.AsyncClient, path: str):
    answer = await api.get(f"/console/assets/{path}")
    assert answer.status_code in (404, 422), path
    assert answer.headers["content-type"] == "application/problem+json"


async def test_the_console_is_not_part_of_the_api_document(api: httpx.AsyncClient):
    document = (await api.get("/openapi.json")).json()
    assert not [path for path in document["paths"] if path.startswith("/console")]


def test_the_assets_are_the_package_files():
    static = files("taskyard_api.console") / "static"
    assert {"index.html", "app.js", "api.js", "console.css", "views/task.js"} <= set(ASSETS)
    assert ASSETS["index.html"].body == (static / "index.html").read_bytes()


def test_the_page_has_no_inline_code_and_nothing_from_elsewhere():
    page = ASSETS["index.html"].body.decode()
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", page), "inline script"
    assert "<style" not in page and " style=" not in page
    assert not re.search(r"\son[a-z]+=", page), "inline event handler"
    for path, asset in ASSETS.items():
        text = asset.body.decode()
        assert not re.search(
            r"(?<![\w/])(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text.replace("http://www.w3.org/2000/svg", "")
        ), path


@pytest.mark.parametrize("path", sorted(SCRIPTS))
def test_no_string_ever_becomes_html_or_code(path: str):
    code = SCRIPTS[path]
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setTimeout("',
        "srcdoc",
        "javascript:",
        ".style.",
        'setAttribute("style"',
    ):
        assert sink not in code, f"{path} uses {sink}"


def test_every_module_import_is_an_asset():
    for path, code in SCRIPTS.items():
        folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        for target in re.findall(r'from "(\.{1,2}/[^"]+)"', code):
            parts = (folder + target).split("/")
            resolved: list[str] = []
            for part in parts:
                if part == "..":
                    resolved.pop()
                elif part not in (".", ""):
                    resolved.append(part)
            assert "/".join(resolved) in ASSETS, f"{path} imports {target}"


def test_the_key_is_only_ever_sent_as_a_header():
    api_module = SCRIPTS["api.js"]
    assert "Authorization" in api_module and "sessionStorage" in api_module
    assert "localStorage" not in "".join(SCRIPTS.values())
    for path, code in SCRIPTS.items():
        for line in code.splitlines():
            if "searchParams" in line or "location" in line:
                assert "key" not in line.lower() or "hash" in line, f"{path}: {line.strip()}"
    assert "new EventSource" not in "".join(SCRIPTS.values()), "an EventSource cannot send the header"

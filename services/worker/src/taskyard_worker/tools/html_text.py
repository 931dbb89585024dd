"""An HTML page as the text a reader sees, its links written ``[text](absolute URL)``.

A model reading raw HTML spends its context on markup and misses what a page links to: a small local model
answered "start from the home page and find X" from the home page itself instead of following the link to X.
Text with Markdown links (the form models read best) keeps the facts and makes every link a URL the model
can fetch or cite as it stands, relative ``href``s resolved against the page's own address.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

# Elements whose content a reader never sees.
_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "head"})
# Elements that start a line of their own, and those set apart as a block (a blank line around them).
_LINES = frozenset({"br", "dd", "dt", "li", "tr"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "div", "dl", "fieldset", "figcaption", "figure", "footer",
        "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "main", "nav", "ol", "p", "pre", "section",
        "table", "ul",
    }
)  # fmt: skip
_HEADINGS = {f"h{level}": "#" * level + " " for level in range(1, 7)}
_SPACES = re.compile(r"[ \t\r\f\v]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


class _Reader(HTMLParser):
    def __init__(self, base_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self._base = base_url
        self._out: list[str] = []
        self._hidden = 0
        self._link: tuple[str, int] | None = None  # (absolute URL, where its text starts in _out)
        self._pre = 0
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _HIDDEN:
            self._hidden += 1
            return
        if tag in _LINES:
            self._out.append("\n")
        elif tag in _BLOCKS:
            self._out.append("\n\n")
        if tag == "pre":
            self._pre += 1
        if tag == "li":
            self._out.append("- ")
        elif tag in _HEADINGS:
            self._out.append(_HEADINGS[tag])
        elif tag in ("td", "th"):
            self._out.append(" | ")
        elif tag == "a":
            href = dict(attrs).get("href")
            if href and not href.startswith(("#", "javascript:", "mailto:")):
                self._link = (urljoin(self._base, href.strip()), len(self._out))

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
            return
        if tag == "a" and self._link is not None:
            url, start = self._link
            self._link = None
            text = _SPACES.sub(" ", "".join(self._out[start:])).strip()
            del self._out[start:]
            self._out.append(f"[{text}]({url})" if text and text != url else url)
        elif tag in _BLOCKS:
            if tag == "pre":
                self._pre = max(0, self._pre - 1)
            self._out.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        if not self._hidden:
            # Outside <pre> a line break in the source is a space to the reader.
            self._out.append(data if self._pre else data.replace("\n", " "))

    def text(self) -> str:
        lines = (_SPACES.sub(" ", line).strip() for line in "".join(self._out).split("\n"))
        return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def is_html(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind in ("text/html", "application/xhtml+xml")


def html_to_text(html: str, base_url: str) -> str:
    """The page's title (when it has one) and visible text, each link as ``[text](absolute URL)``."""
    reader = _Reader(base_url)
    reader.feed(html)
    reader.close()
    body = reader.text()
    title = " ".join(reader.title.split())
    return f"Title: {title}\n\n{body}" if title else body

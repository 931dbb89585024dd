from taskyard_worker.tools.html_text import html_to_text, is_html

BASE = "https://docs.example.com/guide/intro.html"


def test_visible_text_in_blocks_and_lines_without_markup_scripts_or_styles() -> None:
    html = (
        "<html><head><title> The\n Guide </title><style>h1 {color: red}</style>"
        "<script>alert('x')</script></head><body><h2>Setup</h2><p>Install it\n   first.</p>"
        "<ul><li>one</li><li>two &amp; three</li></ul><noscript>enable JS</noscript>"
        "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
        "<pre>line 1\nline 2</pre></body></html>"
    )
    assert html_to_text(html, BASE) == (
        "Title: The Guide\n\n## Setup\n\nInstall it first.\n\n- one\n- two & three\n\n"
        "| a | b\n| 1 | 2\n\nline 1\nline 2"
    )


def test_links_become_markdown_links_with_absolute_urls() -> None:
    html = (
        '<p><a href="next.html">Next</a>, <a href="/about">About <b>us</b></a>, '
        '<a href="https://other.example.org/x">elsewhere</a>, <a href="#top">top</a>, '
        '<a href="mailto:a@b.c">mail</a>, <a href="../up.html"></a></p>'
    )
    assert html_to_text(html, BASE) == (
        "[Next](https://docs.example.com/guide/next.html), [About us](https://docs.example.com/about), "
        "[elsewhere](https://other.example.org/x), top, mail, https://docs.example.com/up.html"
    )


def test_broken_html_is_read_as_far_as_it_goes() -> None:
    assert html_to_text("<p>open <a href='x'>link <div>after", BASE) == "open link\n\nafter"
    assert html_to_text("", BASE) == ""


def test_only_html_types_are_rendered() -> None:
    assert is_html("text/html; charset=utf-8")
    assert is_html("application/xhtml+xml")
    assert not is_html("text/plain")
    assert not is_html("application/json")

"""What a Markdown client makes of a text: rendered by markdown-it as CommonMark, and as GFM with
auto-links (markdown-it's `gfm-like`: linkify with fuzzy links and e-mails, raw HTML on, and the
same with fuzzy links off, as GitHub links only `www.`, `scheme://` and e-mails).
Imported by the tests that check answers and titles stay inert."""

from __future__ import annotations

import html
import re

from markdown_it import MarkdownIt


def renderers() -> dict[str, MarkdownIt]:
    out = {"commonmark": MarkdownIt("commonmark", {"html": True})}
    try:
        import linkify_it  # noqa: F401
    except ImportError:  # linkify-it-py is in the test extra; without it only CommonMark is checked
        return out
    out["gfm-like"] = MarkdownIt("gfm-like")
    strict = MarkdownIt("gfm-like")
    strict.linkify.set({"fuzzy_link": False})
    out["gfm-like-no-fuzzy"] = strict
    return out


_ALLOWED_TAGS = {"p", "ul", "ol", "li", "code", "em", "strong", "s", "del", "h1", "h2", "h3", "h4", "h5", "h6",
                 "blockquote", "pre", "hr", "br"}


def active_markup(text: str) -> list[str]:
    """Every link, image, autolink, table or piece of raw HTML any renderer makes of `text` (empty
    when it is inert), as `renderer: what`. A table counts: its cell pipes split what was escaped or
    put in a code span before the cells are read as inline text."""
    found: list[str] = []
    for name, md in renderers().items():
        def walk(tokens):
            for t in tokens:
                if t.type in ("link_open", "image", "html_inline", "html_block", "table_open"):
                    found.append(f"{name}: {t.type} {t.attrs or t.content!r}")
                if t.children:
                    walk(t.children)
        walk(md.parse(text))
        rendered = md.render(text)
        for tag in re.findall(r"<\s*/?\s*([a-zA-Z][a-zA-Z0-9]*)", rendered):
            if tag.lower() not in _ALLOWED_TAGS:
                found.append(f"{name}: tag <{tag}>")
    return found


def rendered_text(text: str, renderer: str = "commonmark") -> str:
    """What a reader sees of `text` rendered: the HTML's text, entities decoded."""
    out = renderers()[renderer].render(text)
    return html.unescape(re.sub(r"<[^>]+>", "", out))

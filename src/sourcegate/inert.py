"""Passages are data, not markup. A document can hold a Markdown link or image, raw HTML or a
`javascript:` URL; an agent or chat client that renders an answer as Markdown would turn a quoted
image into a request to its server (a way to leak the conversation) and a link into something to
click. Here they stay text: Markdown's own escapes keep every character visible, and a URL is
kept only when it is http(s).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# `](` opens an inline link or image's destination, `]:` a reference definition (without one, a
# `[label]` is plain text, so citations such as `[1]` keep their shape), `![` an image, `<` an
# autolink or an HTML tag.
_MARKUP = re.compile(r"\]\(|\]:|!\[|<")
_ESCAPED = {"](": "\\](", "]:": "\\]:", "![": "!\\[", "<": "\\<"}


def inert_markup(text: str | None) -> str | None:
    """`text` with Markdown links, images, autolinks and HTML made inert (shown as text when
    rendered as Markdown)."""
    if not text:
        return text
    return _MARKUP.sub(lambda m: _ESCAPED[m.group(0)], text)


def safe_url(url: str | None) -> str | None:
    """`url` if it is an absolute http(s) URL with a host, else None (`javascript:`, `data:`,
    relative paths and junk are dropped)."""
    if not isinstance(url, str):
        return None
    url = url.strip()
    if not url or any(ord(ch) < 32 or ch in " <>\"'`" for ch in url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url

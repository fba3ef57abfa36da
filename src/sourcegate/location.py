"""Where a passage sits in its document: the page (PDF), the heading path (DOCX, Markdown, HTML)
and a link that opens the document there, for citations.

Ingest keeps a chunk's page and heading path (`Chunk.page`, `Chunk.heading`); only PDFs have
pages, so a page means a PDF. The link adds a fragment to the document's URL: `#page=N`, which
PDF viewers in browsers open at that page, or the heading's anchor as Markdown renderers (GitHub,
GitLab, MkDocs) and most HTML generators write it: the heading's text in lower case, punctuation
dropped, spaces as hyphens. A URL that already has a fragment, or a document of a format with no
anchors (DOCX, plain text: told by the document's own name, or the URL's path), keeps its URL as it
is: Word and Word Online open a DOCX at its start, whatever the fragment (a SharePoint URL ends in
`Doc.aspx?...`, not `.docx`).
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

# Formats a browser opens with no heading anchors: the URL is linked as it is.
_NO_ANCHORS = (".docx", ".doc", ".txt", ".odt", ".rtf", ".json")
HEADING_SEPARATOR = " > "


def heading_anchor(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (GitHub's rule): `Bearings: grease` ->
    `bearings-grease`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def deep_link(url: str | None, page: int | None = None, heading: str | None = None,
              name: str | None = None) -> str | None:
    """The document's URL opened at the passage's page (PDF) or heading, or the URL as it is. `name`
    is the document's id or file name: its format decides whether a heading has an anchor."""
    if not url:
        return None
    parts = urlsplit(url)
    if parts.fragment or url.endswith("#"):
        return url
    if page is not None:
        return f"{url}#page={int(page)}"
    no_anchors = parts.path.lower().endswith(_NO_ANCHORS) or (name or "").lower().endswith(_NO_ANCHORS)
    if heading and not no_anchors:
        last = heading.split(HEADING_SEPARATOR)[-1]
        anchor = heading_anchor(last)
        if anchor:
            return f"{url}#{quote(anchor, safe='-_')}"
    return url


def location_label(page: int | None = None, heading: str | None = None) -> str | None:
    """`p. 7`, `§ Maintenance > Bearings`, both, or None: what a citation shows of the place."""
    parts = []
    if page is not None:
        parts.append(f"p. {int(page)}")
    if heading:
        parts.append(f"§ {heading}")
    return ", ".join(parts) or None

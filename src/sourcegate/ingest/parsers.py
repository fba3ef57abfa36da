"""Parsers: one function per format, each returning `Document`s or raising `IngestError` with a
reason a person can act on."""

from __future__ import annotations

import json
import os
import re
import time
import shutil
import stat
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path

from ..models import Document

SUPPORTED = {".pdf", ".docx", ".md", ".markdown", ".html", ".htm", ".txt", ".json"}

# Hostile input: past these, a file is refused or read as plain text rather than parsed for its
# structure (parsers of nested structures are quadratic or recursive on such input).
MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024  # a DOCX (zip) that inflates past this is refused
# python-docx loads the document's XML whole, as a tree of about 7 times its size: past this,
# the file is refused (a long manual's text is a few MB of XML).
MAX_DOCX_XML_BYTES = 64 * 1024 * 1024
MAX_NESTING = 256  # HTML elements or Markdown quotes and lists nested deeper: read as text
MAX_MARKUP_LINE = 20_000  # a Markdown line longer than this: the file is read as text
# markdown-it tries each `[` as the start of a link label: a line of thousands of them is slow
# (linear, but ~40 µs each). Past this many on one line, the file is read as text.
MAX_BRACKETS_PER_LINE = 1_000


class IngestError(Exception):
    """A file that cannot be ingested; the message is the reason shown to the user."""


# -- text decoding ---------------------------------------------------------------------------

def decode_text(data: bytes) -> str:
    """Decode bytes as text: UTF-8 (with or without BOM) first, then a detected encoding.
    Binary content is refused rather than indexed as garbage."""
    if not data.strip():
        raise IngestError("empty file")
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise IngestError("binary content, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None:
        raise IngestError("binary content or unknown text encoding")
    text = str(best)
    controls = sum(1 for ch in text[:20000] if ord(ch) < 32 and ch not in "\n\r\t\f")
    if controls > 0.01 * min(len(text), 20000):
        raise IngestError("binary content, not text")
    return text


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u00a0", " ")
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _require_text(text: str, what: str) -> str:
    if not text.strip():
        raise IngestError(f"no text found in this {what}")
    return text


# -- formats ----------------------------------------------------------------------------------

def parse_txt(path: Path, doc_id: str) -> list[Document]:
    text = _clean(decode_text(path.read_bytes()))
    _require_text(text, "text file")
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), path.stem)
    title = first if len(first) <= 120 else path.stem
    return [Document(id=doc_id, title=title, text=text)]


def _markdown_is_pathological(source: str) -> bool:
    """Lines too long or structures too deep for markdown-it's inline and block parsers, which
    take minutes on such input."""
    for line in source.splitlines():
        if len(line) > MAX_MARKUP_LINE or line.count("[") > MAX_BRACKETS_PER_LINE:
            return True
        stripped = line.lstrip(" \t>")
        if len(line) - len(stripped) > MAX_NESTING // 4 and line.strip():
            return True
    return False


def _inline_text(tok) -> str:
    """The text of an inline token: words, code, link texts and image alt texts."""
    if not tok.children:
        return tok.content
    parts: list[str] = []
    for child in tok.children:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append("\n" if child.type == "hardbreak" else " ")
        elif child.type == "image":
            parts.append(_inline_text(child))
    return "".join(parts)


def parse_markdown(path: Path, doc_id: str) -> list[Document]:
    from markdown_it import MarkdownIt

    from .metadata import apply, split_front_matter

    meta, source = split_front_matter(decode_text(path.read_bytes()))
    if _markdown_is_pathological(source):
        # its HTML elements that hide on their own left out, and the tags (not the text) of the rest
        text = _clean(_TAG.sub(" ", _drop_hidden_elements(_drop_hidden_blocks(source))) if "<" in source else source)
        _require_text(text, "Markdown file")
        heading = re.search(r"^#{1,6}[ \t]+(\S[^\n]{0,118})$", text, re.M)
        doc = Document(id=doc_id, title=heading.group(1).strip(" #") if heading else path.stem, text=text)
        apply(doc, meta)
        return [doc]
    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(source)
    if any(t.type == "html_block" or (t.type == "inline" and any(c.type == "html_inline" for c in t.children or ()))
           for t in tokens):
        # HTML in the Markdown: read as a browser shows the rendered page (its tables and
        # paragraphs kept, what its styles hide left out, Markdown inside a hidden block included)
        rendered = md.render(source)
        if _html_depth(rendered) > MAX_NESTING:  # too deep for a tree: its text, as an HTML page's
            docs = _html_as_text(rendered, path, doc_id)
            apply(docs[0], meta)
            return docs
        blocks, headings = _rendered_markdown_blocks(rendered)
        text = "\n\n".join(blocks)
        _require_text(text, "Markdown file")
        title = next((h.split(" > ")[-1] for _, h in headings), None)
        doc = Document(id=doc_id, title=title or path.stem, text=text, headings=headings)
        apply(doc, meta)
        return [doc]
    blocks: list[str] = []
    headings: list[tuple[int, str]] = []
    stack: list[tuple[int, str]] = []
    pos = 0
    i = 0
    title = None
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == "heading_open":
            level = int(tok.tag[1])
            text = _inline_text(tokens[i + 1]).strip()
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, text)]
            headings.append((pos, " > ".join(t for _, t in stack)))
            title = title or text
            blocks.append(text)
            pos += len(text) + 2
            i += 3
            continue
        if tok.type == "tr_open":
            # a table row is one line, its cells joined by " | ": a label and its value stay together
            cells = []
            i += 1
            while i < len(tokens) and tokens[i].type != "tr_close":
                if tokens[i].type == "inline":
                    cells.append(_inline_text(tokens[i]).strip())
                i += 1
            text = " | ".join(cells).strip(" |")
            if text:
                blocks.append(text)
                pos += len(text) + 2
            i += 1
            continue
        if tok.type == "inline" or tok.type in ("fence", "code_block"):
            # The words of links and images, without their targets or the emphasis marks: taken
            # from the parsed inline tokens (linear), not by regexes over the line.
            text = (_inline_text(tok) if tok.type == "inline" else tok.content).strip()
            if text:
                blocks.append(text)
                pos += len(text) + 2
        i += 1
    text = "\n\n".join(blocks)
    _require_text(text, "Markdown file")
    doc = Document(id=doc_id, title=title or path.stem, text=text, headings=headings)
    apply(doc, meta)  # front matter wins over the first heading
    return [doc]


# Elements that start a block of their own in a rendered page (the rest flow inside a line).
_RENDERED_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "body", "caption", "center", "dd", "details", "dialog", "div", "dl",
    "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr",
    "html", "legend", "li", "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "ul"})
_LINE_BREAK = "\x00"  # a <br> while a block's words are joined


def _line_text(el) -> str:
    """The words of an element as one line (a <br> a line break), as it reads in a browser."""
    text = " ".join(el.get_text("").split())
    return re.sub(rf" ?{_LINE_BREAK} ?", "\n", text).strip(f"\n {_LINE_BREAK}")


def _rendered_markdown_blocks(markup: str) -> tuple[list[str], list[tuple[int, str]]]:
    """Blocks and heading paths of a Markdown file rendered to HTML, read as `parse_markdown` reads
    Markdown: a heading, a paragraph or list item, a code block as written, a table row as one line
    of ` | `-joined cells; what a browser would not show is left out (`visibility.drop_invisible`)."""
    from bs4 import BeautifulSoup, NavigableString, Tag

    from .visibility import drop_invisible

    soup = BeautifulSoup(markup, "lxml")
    drop_invisible(soup)
    for tag in soup(["script", "style", "noscript", "template", "svg"]):
        tag.decompose()
    for br in soup.find_all("br"):
        br.replace_with(NavigableString(_LINE_BREAK))
    for img in soup.find_all("img"):
        alt = img.get("alt")
        img.replace_with(NavigableString(alt if isinstance(alt, str) else ""))
    holds_blocks: set[int] = set()  # elements with a block inside, found bottom-up in one pass
    for el in reversed(soup.find_all(True)):
        if (el.name in _RENDERED_BLOCKS or id(el) in holds_blocks) and isinstance(el.parent, Tag):
            holds_blocks.add(id(el.parent))
    blocks: list[str] = []
    headings: list[tuple[int, str]] = []
    stack: list[tuple[int, str]] = []
    pos = 0

    def add(text: str, level: int | None = None) -> None:
        nonlocal pos, stack
        if not text:
            return
        if level is not None:
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, text)]
            headings.append((pos, " > ".join(t for _, t in stack)))
        blocks.append(text)
        pos += len(text) + 2

    def read(el) -> None:
        if el.name == "tr":
            cells = [_line_text(c) for c in el.find_all(["td", "th"], recursive=False)]
            for line in table_lines([cells]):
                add(line)
            return
        if el.name == "pre":
            add(el.get_text().replace(_LINE_BREAK, "\n").strip("\n"))
            return
        if id(el) not in holds_blocks:
            add(_line_text(el), int(el.name[1]) if re.fullmatch(r"h[1-6]", el.name) else None)
            return
        run: list[str] = []  # words between the blocks inside `el`

        def flush() -> None:
            if run:
                text = " ".join("".join(run).split())
                add(re.sub(rf" ?{_LINE_BREAK} ?", "\n", text).strip(f"\n {_LINE_BREAK}"))
                run.clear()

        for child in list(el.children):
            if isinstance(child, Tag) and (child.name in _RENDERED_BLOCKS or id(child) in holds_blocks):
                flush()
                read(child)
            elif isinstance(child, Tag):
                run.append(child.get_text(""))
            elif isinstance(child, NavigableString) and type(child) is NavigableString:
                run.append(str(child))
        flush()

    read(soup.body or soup)
    return blocks, headings


_HTML_BLOCKS = ["h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "td", "th", "blockquote", "dt", "dd", "figcaption"]


# `[^<>]` rather than `[^>]`: a scan for a tag's end stops at the next `<`, so `<a ` repeated
# without a `>` is read in one pass instead of once per `<` (quadratic).
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)\b[^<>]*?(/?)>")
_ANY_TAG = re.compile(r"<[^<>]*>")
_HIDDEN_OPEN = re.compile(r"<(script|style|noscript|template|svg)\b", re.I)
_VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def _html_depth(markup: str) -> int:
    """The deepest element nesting, from one regex pass (unclosed tags count as open)."""
    depth = deepest = 0
    for m in _TAG.finditer(markup):
        if m.group(2).lower() in _VOID_TAGS or m.group(3):
            continue
        if m.group(1):
            depth = max(0, depth - 1)
        else:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    break
    return deepest


# What a browser does not show of an element and all it holds, for markup read without a tree: the
# `hidden` attribute, and an inline style of `display: none`, `visibility: hidden` (or `collapse`) or
# one that hides on its own (`visibility.hides_on_its_own`: transparent, tiny, off the page, clipped).
# A page can say one thing to its readers and another, hidden, to whatever quotes it; hidden text is
# not indexed. With a tree, the cascade decides (`visibility.drop_invisible`).
_HIDDEN_STYLE = re.compile(
    r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse))\s*(?:!important\s*)?(?:;|$)", re.I)
# The same in a start tag's attributes, for markup too deep for a tree: `hidden` as an attribute
# name (not inside a quoted value) or a style attribute that hides.
_HIDDEN_TAG_ATTRS = re.compile(
    r"""^(?:[^"'>]|"[^"]*"|'[^']*')*?\s(?:hidden(?=[\s/>=]|$)|style\s*=\s*(?:"([^"]*)"|'([^']*)'))""", re.I)


def _style_hides(style: str | None) -> bool:
    from .visibility import hides_on_its_own

    return bool(style) and (_HIDDEN_STYLE.search(style.replace("\n", " ")) is not None or hides_on_its_own(style))


def _hidden_by_attrs(tag_markup: str) -> bool:
    """Whether a start tag's markup (`<div hidden class=x>`) hides the element."""
    rest = tag_markup
    while True:
        m = _HIDDEN_TAG_ATTRS.match(rest)
        if m is None:
            return False
        style = m.group(1) if m.group(1) is not None else m.group(2)
        if style is None or _style_hides(style):
            return True
        rest = rest[m.end():]


def _drop_hidden_elements(markup: str) -> str:
    """Markup without the elements its attributes hide, in one pass over the tags (for markup too
    deep for a tree): from a hidden element's start tag to its matching end tag."""
    out: list[str] = []
    pos = 0
    hidden_name, depth = None, 0
    for m in _TAG.finditer(markup):
        name = m.group(2).lower()
        if name in _VOID_TAGS or m.group(3):
            continue
        if hidden_name is None:
            if not m.group(1) and _hidden_by_attrs(m.group(0)):
                out.append(markup[pos:m.start()])
                hidden_name, depth = name, 1
        elif name == hidden_name:
            depth += -1 if m.group(1) else 1
            if depth == 0:
                hidden_name, pos = None, m.end()
    if hidden_name is None:
        out.append(markup[pos:])
    return " ".join(out)


def _drop_hidden_blocks(markup: str) -> str:
    """Markup without script, style and the like, in one pass: each block's end is searched
    once, from its start, and an unclosed block drops the rest of the page."""
    out: list[str] = []
    pos = 0
    lower = markup.lower()
    while True:
        m = _HIDDEN_OPEN.search(markup, pos)
        if m is None:
            out.append(markup[pos:])
            return " ".join(out)
        out.append(markup[pos:m.start()])
        end = lower.find("</" + m.group(1).lower(), m.end())
        if end < 0:
            return " ".join(out)
        close = lower.find(">", end)
        pos = len(markup) if close < 0 else close + 1


def _html_title(markup: str) -> str | None:
    lower = markup.lower()
    start = lower.find("<title")
    if start < 0:
        return None
    open_end = lower.find(">", start)
    close = lower.find("</title", open_end) if open_end >= 0 else -1
    return markup[open_end + 1:close].strip() if close >= 0 else None


def _html_as_text(markup: str, path: Path, doc_id: str) -> list[Document]:
    import html as html_lib

    title = _html_title(markup)
    text = _drop_hidden_elements(_drop_hidden_blocks(markup))
    text = html_lib.unescape(_ANY_TAG.sub("\n", text))
    text = _clean("\n".join(line.strip() for line in text.splitlines() if line.strip()))
    _require_text(text, "HTML page")
    return [Document(id=doc_id, title=title or path.stem, text=text)]


def parse_html(path: Path, doc_id: str) -> list[Document]:
    from bs4 import BeautifulSoup

    markup = decode_text(path.read_bytes())
    if _html_depth(markup) > MAX_NESTING:  # too deep for a tree walk: keep the text, not the structure
        return _html_as_text(markup, path, doc_id)
    # lxml's HTML parser (libxml2) is linear on broken markup; html.parser is quadratic on
    # unclosed tags (`<a <a <a ...`).
    soup = BeautifulSoup(markup, "lxml")
    # what a browser would not show (hidden, transparent, tiny, off the page, clipped, coloured
    # like its background: `visibility.drop_invisible`), read with the page's own <style> rules
    from .visibility import drop_invisible

    drop_invisible(soup)
    for tag in soup(["script", "style", "noscript", "nav", "header", "footer", "template", "svg"]):
        tag.decompose()
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    meta = _html_metadata(soup)
    blocks, headings, stack, pos = [], [], [], 0
    for el in soup.find_all(_HTML_BLOCKS):
        if el.find_parent(_HTML_BLOCKS):  # nested block: its text is taken with the parent
            continue
        text = el.get_text(" ", strip=True)
        if not text:
            continue
        if el.name[0] == "h" and el.name[1:].isdigit():
            level = int(el.name[1:])
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, text)]
            headings.append((pos, " > ".join(t for _, t in stack)))
            title = title or text
        blocks.append(text)
        pos += len(text) + 2
    if not blocks:  # a page with text outside block elements
        body = soup.body or soup
        blocks = [t for t in (s.strip() for s in body.get_text("\n").split("\n")) if t]
    text = _clean("\n\n".join(blocks))
    _require_text(text, "HTML page")
    doc = Document(id=doc_id, title=title or path.stem, text=text, headings=headings)
    from .metadata import apply

    apply(doc, meta)
    return [doc]


# <meta name=...> (or property=...) names read as document fields; a `dc.`, `dcterms.`, `og:` or
# `sourcegate:` prefix is dropped (`dcterms.modified`, `og:title`, `sourcegate:status`).
_HTML_META_NAMES = {"title": "title", "status": "status", "version": "version", "url": "url",
                    "effective_date": "updated_at", "effective-date": "updated_at", "modified": "updated_at",
                    "updated_at": "updated_at", "date": "updated_at", "source_type": "source_type", "type": None,
                    "readers": "readers"}


# <meta> names that are the page's plumbing (for browsers, search engines, social cards), not
# facts about the document: neither read as metadata nor said to be unread.
_HTML_PLUMBING = re.compile(
    r"viewport|generator|robots|googlebot|bingbot|referrer|theme-color|color-scheme|format-detection|description"
    r"|keywords|csrf-token|csrf-param|handheldfriendly|mobileoptimized|application-name|apple-.*|msapplication-.*"
    r"|google-.*|(?:og|twitter|fb|al|article|profile|book):.*")


def _html_metadata(soup) -> dict[str, str]:
    """The document's fields from `<link rel=canonical>` and `<meta>` tags; other `<meta>` names
    (`model`, `product`, `dc.site`, `sourcegate:line`) are metadata as front-matter keys are, and a
    name ingest cannot read is returned as unread (`metadata.normalize`)."""
    from .metadata import normalize

    raw: dict[str, str] = {}
    other: dict[str, str] = {}
    canonical = soup.find("link", rel="canonical", href=True)
    if canonical is not None:
        raw["url"] = canonical["href"]
    for tag in soup.find_all("meta", content=True, limit=500):
        name = " ".join((tag.get("name") or tag.get("property") or "").split()).lower()
        plumbing = not name or _HTML_PLUMBING.fullmatch(name)
        for prefix in ("dcterms.", "dc.", "og:", "sourcegate:"):
            name = name.removeprefix(prefix)
        if name in _HTML_META_NAMES:
            field = _HTML_META_NAMES[name]
            if field and field not in raw:
                raw[field] = tag["content"]
        elif not plumbing:
            other.setdefault(name, tag["content"])
    if raw.get("title") and soup.title and soup.title.get_text(strip=True):
        del raw["title"]  # <title> wins over og:title
    fields = normalize(other, extra=True)
    fields.update(normalize(raw))
    return fields


def table_lines(rows: list[list[str | None]]) -> list[str]:
    """A table read row by row, as Markdown tables are: one line per row, its cells joined by
    ` | ` (the header row first), so a label and its value stay together. A cell spanning several
    columns (merged in DOCX, or repeated by the extractor) is said once; empty rows are left out."""
    out = []
    for row in rows:
        cells = [" ".join((c or "").split()) for c in row]
        cells = [c for c in cells if c]
        if cells:
            out.append(" | ".join(dict.fromkeys(cells)))
    return out


def parse_docx(path: Path, doc_id: str) -> list[Document]:
    if not zipfile.is_zipfile(path):
        raise IngestError("not a valid DOCX file (not a zip archive)")
    try:
        with zipfile.ZipFile(path) as z:
            inflated = sum(info.file_size for info in z.infolist())
            xml = max((info.file_size for info in z.infolist() if info.filename.lower().endswith(".xml")), default=0)
    except Exception as e:
        raise IngestError(f"not a valid DOCX file ({type(e).__name__}: {e})") from None
    if inflated > MAX_UNCOMPRESSED_BYTES:
        raise IngestError(f"the DOCX inflates to {inflated / 1e6:.0f} MB, over the "
                          f"{MAX_UNCOMPRESSED_BYTES / 1e6:.0f} MB limit (a zip bomb?)")
    if xml > MAX_DOCX_XML_BYTES:
        raise IngestError(f"the DOCX holds {xml / 1e6:.0f} MB of XML, over the {MAX_DOCX_XML_BYTES / 1e6:.0f} MB "
                          "that can be read safely: split the document, or save it again from Word")
    try:
        import docx

        d = docx.Document(str(path))
        return _docx_document(d, path, doc_id)
    except IngestError:
        raise
    except Exception as e:
        raise IngestError(f"not a valid DOCX file ({type(e).__name__}: {str(e)[:160]})") from None


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


# Elements whose runs are not shown in the document as it reads: tracked deletions and moves away,
# the fallback copy of an alternate content (its choice is read), and a nested paragraph's (a text box).
_DOCX_UNSHOWN = {f"{_W}del", f"{_W}moveFrom", "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"}
# Wrappers whose content Word shows as if it stood in their place: content controls, custom XML,
# smart tags, tracked insertions, simple fields, hyperlinks.
_DOCX_WRAPPERS = {f"{_W}sdt", f"{_W}customXml", f"{_W}smartTag", f"{_W}ins", f"{_W}moveTo", f"{_W}fldSimple",
                  f"{_W}hyperlink", f"{_W}sdtContent", f"{_W}dir", f"{_W}bdo"}


def _docx_paragraph_text(p, styles, behind) -> str:
    """A paragraph's text as Word shows it: its runs wherever they stand (in hyperlinks, content
    controls, fields, insertions), each kept only where it is seen (`DocxStyles.run_shows`: not
    `w:vanish`, not too small, a colour that stands out from its shading, its cell's or the page)."""
    ppr = p.find(f"{_W}pPr")
    p_style_el = ppr.find(f"{_W}pStyle") if ppr is not None else None
    p_style = p_style_el.get(f"{_W}val") if p_style_el is not None else None
    behind = styles.paragraph_shading(p_style, ppr) or behind
    out = []
    stack = list(reversed(p))
    while stack:  # the paragraph's content in document order, wrappers opened
        el = stack.pop()
        if el.tag == f"{_W}r":
            rpr = el.find(f"{_W}rPr")
            r_style_el = rpr.find(f"{_W}rStyle") if rpr is not None else None
            r_style = r_style_el.get(f"{_W}val") if r_style_el is not None else None
            if styles.run_shows(p_style, r_style, rpr, behind):
                out.append(el.text)
        elif el.tag in _DOCX_WRAPPERS:
            stack.extend(reversed(el))
    return "".join(out)


def _docx_blocks(container):
    """The paragraphs and tables of a body, cell or content control, in order, through the
    content controls and custom XML that wrap them."""
    stack = list(reversed(container))
    while stack:
        el = stack.pop()
        if el.tag in (f"{_W}p", f"{_W}tbl"):
            yield el
        elif el.tag in (f"{_W}sdt", f"{_W}sdtContent", f"{_W}customXml"):
            stack.extend(reversed(el))


def _docx_children(el, tag: str):
    """`el`'s children of `tag`, through content controls and custom XML (rows and cells can be
    wrapped as paragraphs can)."""
    stack = list(reversed(el))
    while stack:
        child = stack.pop()
        if child.tag == tag:
            yield child
        elif child.tag in (f"{_W}sdt", f"{_W}sdtContent", f"{_W}customXml"):
            stack.extend(reversed(child))


def _docx_table_lines(tbl, styles, behind, depth: int = 0) -> list[str]:
    """A table read row by row (`table_lines`), in one pass over its XML: a cell merged down a
    column (`w:vMerge`) is read once, in the row where it starts; a table nested in a cell is read
    row by row after the row that holds it."""
    from .visibility import shading

    lines: list[str] = []
    for tr in _docx_children(tbl, f"{_W}tr"):
        cells, nested = [], []
        for tc in _docx_children(tr, f"{_W}tc"):
            tcpr = tc.find(f"{_W}tcPr")
            merge = tcpr.find(f"{_W}vMerge") if tcpr is not None else None
            if merge is not None and merge.get(f"{_W}val", "continue") != "restart":
                cells.append("")  # the merged cell's text was read in the row where it starts
                continue
            cell_behind = (shading(tcpr) if tcpr is not None else None) or behind
            parts = []
            for el in _docx_blocks(tc):
                if el.tag == f"{_W}p":
                    parts.append(_docx_paragraph_text(el, styles, cell_behind))
                elif depth < MAX_NESTING:
                    nested += _docx_table_lines(el, styles, cell_behind, depth + 1)
            cells.append("\n".join(parts).strip())
        lines += table_lines([cells]) + nested
    return lines


def _docx_document(d, path: Path, doc_id: str) -> list[Document]:
    from docx.enum.style import WD_STYLE_TYPE

    blocks, headings, stack, pos = [], [], [], 0
    props = d.core_properties
    title = (props.title or "").strip() or None
    # Style names by id, resolved once: `Paragraph.style` searches every style for each paragraph.
    names = {s.style_id: s.name or "" for s in d.styles}
    default_style = d.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    default_name = (default_style.name or "") if default_style is not None else ""
    from .visibility import DocxStyles

    styles = DocxStyles(d.styles.element, d.element)
    # Paragraphs and tables in the order they are in the document (through content controls): a
    # table stays under its heading. Text hidden from readers is left out of both.
    for item in _docx_blocks(d.element.body):
        if item.tag == f"{_W}tbl":
            for line in _docx_table_lines(item, styles, None):
                blocks.append(line)
                pos += len(line) + 2
            continue
        text = _docx_paragraph_text(item, styles, None).strip()
        if not text:
            continue
        style_id = item.style
        style = names.get(style_id, default_name) if style_id else default_name
        m = re.match(r"(?:Heading|Titre)\s*(\d)", style)
        if m or style == "Title":
            level = int(m.group(1)) if m else 0
            stack = [(lv, t) for lv, t in stack if lv < level] + [(level, text)]
            headings.append((pos, " > ".join(t for _, t in stack)))
            title = title or text
        blocks.append(text)
        pos += len(text) + 2
    text = "\n\n".join(blocks)
    _require_text(text, "DOCX file")
    from .metadata import apply, normalize

    doc = Document(id=doc_id, title=title or path.stem, text=text, headings=headings)
    # core properties: Status (content status), Version, Identifier (a URL) and Category
    identifier = (props.identifier or "").strip()
    apply(doc, normalize({"status": props.content_status, "version": props.version,
                          "url": identifier if re.match(r"https?://", identifier) else None,
                          "source_type": props.category}))
    # custom properties (File > Properties > Custom): Readers, who may read it (docs/readers.md)
    custom = _docx_custom_properties(d)
    if "readers" in custom:
        apply(doc, normalize({"readers": custom["readers"]}, origin="custom property Readers"))
    return [doc]


def _docx_custom_properties(d) -> dict[str, str]:
    """The text values of a DOCX's custom properties (docProps/custom.xml), by lower-cased name."""
    from lxml import etree

    out: dict[str, str] = {}
    for part in d.part.package.iter_parts():
        if str(part.partname) != "/docProps/custom.xml":
            continue
        try:
            root = etree.fromstring(part.blob, etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError:
            return out
        for prop in root:
            name = (prop.get("name") or "").strip().lower()
            value = "".join(prop.itertext()).strip()
            if name and value:
                out.setdefault(name, value)
    return out


def _ocr_pdf(path: Path) -> list[str]:
    """OCR each page with tesseract. Needs the tesseract binary and the `ocr` extra."""
    if shutil.which("tesseract") is None:
        raise IngestError(
            "no text layer (scanned PDF?). To OCR it, install tesseract (apt-get install tesseract-ocr) "
            "and the OCR extra (pip install 'sourcegate[ocr]')"
        )
    try:
        import pypdfium2 as pdfium
        import pytesseract
    except ImportError:
        raise IngestError(
            "no text layer (scanned PDF?). tesseract is installed; add the OCR extra: pip install 'sourcegate[ocr]'"
        ) from None
    pdf = pdfium.PdfDocument(str(path))
    pages = []
    for page in pdf:
        image = page.render(scale=300 / 72).to_pil()
        pages.append(pytesseract.image_to_string(image))
    return pages


def parse_pdf(path: Path, doc_id: str) -> list[Document]:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            try:
                ok = reader.decrypt("")
            except Exception:
                ok = 0
            if not ok:
                raise IngestError("encrypted PDF (a password is required); decrypt it first")
        read = [_visible_page_text(p, reader, lazy=True) for p in reader.pages]
        page_texts: list[str | None] = [t for t, _, _ in read]
        # a page that hides text keeps its text layer as read without it: the table extractor would
        # read the hidden text again
        ruled = [n for n, (_, hides, lines) in enumerate(read) if lines and not hides]
        info: dict = {}
        try:
            info = {str(k).lstrip("/"): v for k, v in (reader.metadata or {}).items()}
        except Exception:  # a damaged information dictionary: the text is still worth having
            pass
        heading = None
        if reader.pages:
            try:
                heading = _pdf_first_heading(reader.pages[0])
            except Exception:
                pass
    except IngestError:
        raise
    except (PdfReadError, Exception) as e:
        raise IngestError(f"corrupt or unreadable PDF ({type(e).__name__}: {str(e)[:120]})") from None
    if not page_texts:
        raise IngestError("empty PDF (no pages)")

    def text_layer(n: int) -> str:  # a ruled page's text layer, read when it is needed
        if page_texts[n] is None:
            try:
                page_texts[n] = reader.pages[n].extract_text() or ""
            except Exception as e:
                raise IngestError(f"corrupt or unreadable PDF ({type(e).__name__}: {str(e)[:120]})") from None
        return page_texts[n]

    if not any(text_layer(n).strip() for n in range(len(page_texts))):
        page_texts = _ocr_pdf(path)
    elif ruled:
        for n, text in _pdf_pages_with_tables(path, ruled).items():
            page_texts[n] = text
        for n in ruled:  # those the table reader left: their text layer
            text_layer(n)
    parts, pages, pos = [], [], 0
    for n, t in enumerate(page_texts, start=1):
        t = _clean(t)
        if not t:
            continue
        pages.append((pos, n))
        parts.append(t)
        pos += len(t) + 2
    text = "\n\n".join(parts)
    _require_text(text, "PDF")
    from .metadata import apply, is_placeholder_title, normalize

    meta = normalize({k: v for k, v in info.items() if k.lower() not in ("title", "creationdate", "moddate")})
    meta_title = _text_of(info.get("Title"))
    if is_placeholder_title(meta_title, path):  # reportlab's "untitled", "Microsoft Word - x.docx", ...
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), path.stem)
        meta_title = heading or (first if len(first) <= 120 else path.stem)
    doc = Document(id=doc_id, title=meta_title, text=text, pages=pages)
    apply(doc, meta)
    return [doc]


# A content stream that draws a rectangle (`x y w h re`) or a line (`x y l`): the only pages where
# a ruled table can be, and the only ones handed to the table reader.
# Seconds one file may spend in the table reader (about 6 ms a page of ruled table, about half the
# text layer's time), checked inside each page too: past it, that page and the remaining ones keep
# their text layer, so a book of tables is still read within SOURCEGATE_PARSE_TIMEOUT_S.
PDF_TABLE_BUDGET_S = 20.0
_DRAWS_LINES = re.compile(rb"(?:-?[\d.]+\s+){3}-?[\d.]+\s+re\b|(?:-?[\d.]+\s+)-?[\d.]+\s+l\b")


def _pdf_pages_with_tables(path: Path, page_numbers: list[int]) -> dict[int, str]:
    """The text of the pages (0-based numbers) that hold ruled tables, with each table read row
    by row (`table_lines`) where it stands on the page, between the text above and below it, from
    one pdfium parse of each page (`pdf_tables`); pages without a table, and those the budget
    did not reach, are left out."""
    from .pdf_tables import pages_with_tables

    return pages_with_tables(path, page_numbers, PDF_TABLE_BUDGET_S, table_lines)


# Text a PDF draws but nobody sees, from the graphics state when it is shown: render mode 3
# (neither filled nor stroked) or 7 (a clip only); a fill (modes 0, 4) or stroke (1, 5) colour, or
# both (2, 6), that does not stand out from the white page where nothing else was painted before it
# (`visibility.stands_out`: white, near-white); glyphs under MIN_TEXT_PT high or wide after the
# font size, the text matrix, the horizontal scaling (`0 Tz`) and the transformation matrix; and
# where it is drawn: off the page (outside the MediaBox or CropBox), outside the clip (the
# bounding box of each clipping path, intersected), or under an opaque rectangle of the page's
# white (or near-white) painted after it. A page whose only text is invisible and that draws an
# image is a scan's OCR layer (the image shows that text): it is kept; without an image it is not.
# Text inside form XObjects is not looked at. Any page with text sets a font (`Tf`): it is walked.
_MAY_HIDE = re.compile(rb"\b[1-7]\s+Tr\b|\bg\b|\brg\b|\bk\b|\bscn?\b|\bTz\b|\bTf\b|\bcm\b")
_SHOW_TEXT = (b"Tj", b"TJ", b"'", b'"')
_FILLS = (b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*")


def _pdf_rgb(operands):
    """The colour set by g/rg/k (sc/scn with as many operands), as rgb; None for a pattern."""
    try:
        values = [float(v) for v in operands]
    except (TypeError, ValueError):  # a pattern's name: painted, not known
        return None
    if len(values) == 1:
        return (values[0],) * 3
    if len(values) == 3:
        return tuple(values)
    if len(values) == 4:
        c, m, y, k = values
        return ((1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k))
    return None


def _matrix(operands):
    try:
        return tuple(float(v) for v in operands[:6]) if len(operands) >= 6 else None
    except (TypeError, ValueError):
        return None


def _mul(m, n):
    """m x n of PDF matrices (a b c d e f)."""
    a, b, c, d, e, f = m
    A, B, C, D, E, F = n
    return (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F)


# Where text is drawn. A show's box is estimated from the glyph widths its font gives (`/Widths`,
# a CID font's `/W` and `/DW`); where the font gives none (the standard 14 fonts), 0.4 em a glyph
# for the box a later shape must cover, 0.8 em (more than the average of any text but a row of Ws)
# for the box that must lie off the page or outside the clip: text partly shown is kept.
# Vertically, the box a shape must cover is the glyphs' core (baseline to 0.6 em), the one that
# must lie outside is -0.3 to 1 em.
# Later white rectangles are tested against earlier shows, the MAX_COVERS largest on a page.
MAX_COVERS = 64
_NOWHERE = (float("inf"), float("inf"), float("-inf"), float("-inf"))  # an empty clip


def _apply(m, x: float, y: float) -> tuple[float, float]:
    return m[0] * x + m[2] * y + m[4], m[1] * x + m[3] * y + m[5]


def _box(m, x0: float, y0: float, x1: float, y1: float) -> tuple[float, float, float, float]:
    """The device-space bounding box of the rectangle (x0, y0)-(x1, y1) under matrix m (its corners
    computed as `_apply` does, inline: a page calls this for every shape and every text show)."""
    a, b, c, d, e, f = m
    xs = (a * x0 + c * y0 + e, a * x0 + c * y1 + e, a * x1 + c * y0 + e, a * x1 + c * y1 + e)
    ys = (b * x0 + d * y0 + f, b * x0 + d * y1 + f, b * x1 + d * y0 + f, b * x1 + d * y1 + f)
    return min(xs), min(ys), max(xs), max(ys)


def _meet(a, b):
    """The intersection of two boxes; _NOWHERE when they do not overlap."""
    x0, y0, x1, y1 = max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])
    return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else _NOWHERE


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _contains(outer, inner, slack: float = 0.01) -> bool:
    return (outer[0] <= inner[0] + slack and outer[1] <= inner[1] + slack and inner[2] <= outer[2] + slack
            and inner[3] <= outer[3] + slack)


def _font_metrics(font) -> tuple[int, dict, float | None]:
    """(bytes a glyph code, widths by code in 1/1000 em, the width of codes not listed or None)."""
    font = font.get_object()
    if font.get("/Subtype") == "/Type0":
        widths: dict = {}
        desc = font["/DescendantFonts"][0].get_object()
        w = desc.get("/W")
        w = list(w.get_object()) if w is not None else []
        i, listed = 0, 0
        while i < len(w) and listed < 65536:
            first = int(w[i])
            nxt = w[i + 1].get_object() if i + 1 < len(w) else None
            if isinstance(nxt, list):
                for k, v in enumerate(nxt[:65536]):
                    widths[first + k] = float(v)
                listed += len(nxt)
                i += 2
            else:
                last = min(int(nxt), first + 65535) if nxt is not None else first
                for code in range(first, last + 1):
                    widths[code] = float(w[i + 2])
                listed += last - first + 1
                i += 3
        return 2, widths, float(desc.get("/DW", 1000))
    first, listed = int(font.get("/FirstChar", 0)), font.get("/Widths")
    # a Type3 font's widths are in its own glyph space, its FontMatrix maps them to text space
    scale = abs(float(font["/FontMatrix"][0])) * 1000 if font.get("/Subtype") == "/Type3" else 1.0
    widths = {first + k: float(v) * scale for k, v in enumerate(listed.get_object())} if listed is not None else {}
    missing = font.get("/FontDescriptor")
    missing = missing.get_object().get("/MissingWidth") if missing is not None else None
    return 1, widths, float(missing) * scale if missing is not None else None


def _page_fonts(page):
    """A lookup of the page's fonts by resource name (None for one it cannot read)."""
    cache: dict = {}

    def font(name):
        if name not in cache:
            try:
                cache[name] = _font_metrics(page["/Resources"]["/Font"][name])
            except Exception:
                cache[name] = None
        return cache[name]

    return font


def _page_box(page):
    """The visible page: the MediaBox within the CropBox."""
    try:
        media, crop = page.mediabox, page.cropbox
        box = lambda r: (min(float(r.left), float(r.right)), min(float(r.bottom), float(r.top)),  # noqa: E731
                         max(float(r.left), float(r.right)), max(float(r.bottom), float(r.top)))
        page_box = _meet(box(media), box(crop))
        if page_box == _NOWHERE:  # a crop box off the media box: viewers show the media box
            page_box = box(media)
        return page_box if page_box[0] < page_box[2] and page_box[1] < page_box[3] else None
    except Exception:
        return None


def _page_gstates(page) -> dict:
    """The page's ExtGState dictionaries by name: what each says of fill opacity (alpha, blend
    mode, soft mask), only the keys it sets."""
    try:
        states = page["/Resources"]["/ExtGState"]
    except Exception:
        return {}
    out = {}
    for name, ref in list(states.items())[:1000]:
        try:
            d, said = ref.get_object(), {}
            if "/ca" in d:
                said["alpha"] = float(d["/ca"])
            if "/BM" in d:
                bm = d["/BM"]
                bm = bm[0] if isinstance(bm, list) and bm else bm
                said["blend"] = str(bm) in ("/Normal", "/Compatible")
            if "/SMask" in d:
                said["smask"] = str(d["/SMask"]) != "/None"
            out[str(name)] = said
        except Exception:
            continue
    return out


def _advance(shown, font, size: float, tc: float, tw: float, th: float) -> tuple[float, float]:
    """How far a string moves the text position (text space, before the matrices): (at least, at
    most) where the font gives no widths, the same number twice where it does."""
    if hasattr(shown, "original_bytes"):  # a string as the content stream holds it
        data = shown.original_bytes
    elif isinstance(shown, bytes):
        data = bytes(shown)
    else:
        data = str(shown).encode("latin-1", "replace")
    from functools import reduce
    from operator import add

    per, widths, default = font if font else (1, {}, None)
    codes = data if per == 1 else [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data) - 1, 2)]
    # each distinct code's step computed once, the steps then added in order (the same sums)
    lo_step, hi_step = {}, {}
    for code in set(codes):
        w = widths.get(code, default)
        spacing = tc + (tw if per == 1 and code == 32 else 0.0)
        lo_step[code] = ((0.4 if w is None else w / 1000) * size + spacing) * th
        hi_step[code] = ((0.8 if w is None else w / 1000) * size + spacing) * th
    return reduce(add, map(lo_step.__getitem__, codes), 0.0), reduce(add, map(hi_step.__getitem__, codes), 0.0)


def _num(value, default: float = 0.0) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _left_out(operands, op) -> list:
    """What a text show left out still does: `'` moves to the next line, `"` sets spacing too."""
    if op == b'"' and len(operands) >= 2:
        return [([operands[0]], b"Tw"), ([operands[1]], b"Tc"), ([], b"T*")]
    if op in (b"'", b'"'):
        return [([], b"T*")]
    return []


def _invisible_text_ops(operations, images: frozenset = frozenset(), page_box=None, fonts=None,
                        gstates: dict | None = None) -> tuple[list, int, int]:
    """(the operations without text drawn invisibly, visible text operations, invisible ones);
    `images`: the names of the page's image XObjects (`Do` of one paints a picture); `page_box`:
    the visible page (`_page_box`), `fonts`: its fonts' widths (`_page_fonts`), `gstates`: its
    ExtGState opacities (`_page_gstates`)."""
    import heapq
    from functools import lru_cache

    from .visibility import MIN_TEXT_PT, WHITE, stands_out

    @lru_cache(maxsize=256)
    def on_white(colour) -> bool:  # a colour seen on the white page (a page sets few colours)
        return stands_out(colour, 1.0, WHITE)

    kept, visible, invisible = [], 0, 0
    # graphics state: render mode, fill and stroke colours, transformation, font size, horizontal
    # scale, the text state (font, spacing, leading, rise), the clip's bounding box (None: the
    # page; exact when it is one rectangle) and what makes a fill see-through
    gs = {"mode": 0, "fill": (0.0, 0.0, 0.0), "stroke": (0.0, 0.0, 0.0), "ctm": (1, 0, 0, 1, 0, 0), "size": 0.0, "tz": 100.0,
          "font": None, "tc": 0.0, "tw": 0.0, "tl": 0.0, "rise": 0.0, "clip": None, "clip_exact": True,
          "alpha": 1.0, "blend": True, "smask": False}
    stack, painted, tm = [], False, (1, 0, 0, 1, 0, 0)
    tlm, adv = tm, (0.0, 0.0)  # the line's start, and how far the shows since moved along it
    path_box, path_rect, path_rects, path_other, clipping = None, None, 0, False, False
    # runs: (index in `kept`, the box a shape must cover to hide it); covers: (how many runs were
    # drawn before it, its box), for each opaque white rectangle painted
    runs: list = []
    covers: list = []

    def add_to_path(box):
        nonlocal path_box
        path_box = box if path_box is None else (min(path_box[0], box[0]), min(path_box[1], box[1]),
                                                 max(path_box[2], box[2]), max(path_box[3], box[3]))

    for operands, op in operations:
        if op == b"q":
            stack.append(dict(gs))
        elif op == b"Q":
            if stack:
                gs = stack.pop()
        elif op == b"Tr" and operands:
            try:
                gs["mode"] = int(operands[0])
            except (TypeError, ValueError):
                pass
        elif op in (b"g", b"rg", b"k", b"sc", b"scn"):
            gs["fill"] = _pdf_rgb(operands)
        elif op in (b"G", b"RG", b"K", b"SC", b"SCN"):
            gs["stroke"] = _pdf_rgb(operands)
        elif op == b"cm":
            m = _matrix(operands)
            if m:
                gs["ctm"] = _mul(m, gs["ctm"])
        elif op == b"Tm":
            tm = tlm = _matrix(operands) or tm
            adv = (0.0, 0.0)
        elif op == b"BT":
            tm = tlm = (1, 0, 0, 1, 0, 0)
            adv = (0.0, 0.0)
        elif op in (b"Td", b"TD") and len(operands) >= 2:
            if op == b"TD":
                gs["tl"] = -_num(operands[1])
            tm = tlm = _mul((1, 0, 0, 1, _num(operands[0]), _num(operands[1])), tlm)
            adv = (0.0, 0.0)
        elif op == b"T*":
            tm = tlm = _mul((1, 0, 0, 1, 0, -gs["tl"]), tlm)
            adv = (0.0, 0.0)
        elif op in (b"Tc", b"Tw", b"TL", b"Ts") and operands:
            gs[{b"Tc": "tc", b"Tw": "tw", b"TL": "tl", b"Ts": "rise"}[op]] = _num(operands[0])
        elif op == b"gs" and operands and gstates:
            gs.update(gstates.get(str(operands[0]), {}))
        elif op == b"Tf" and len(operands) >= 2:
            gs["font"] = fonts(str(operands[0])) if fonts else None
            try:
                gs["size"] = float(operands[1])
            except (TypeError, ValueError):
                pass
        elif op == b"Tz" and operands:
            try:
                gs["tz"] = float(operands[0])
            except (TypeError, ValueError):
                pass
        elif op == b"re" and len(operands) >= 4:
            x, y, w, h = (_num(v) for v in operands[:4])
            box = _box(gs["ctm"], x, y, x + w, y + h)
            a, b, c, d = gs["ctm"][:4]
            aligned = (abs(b) < 1e-9 and abs(c) < 1e-9) or (abs(a) < 1e-9 and abs(d) < 1e-9)
            add_to_path(box)
            path_rect, path_rects = (box if aligned else None), path_rects + 1
        elif op in (b"m", b"l", b"c", b"v", b"y"):
            values = [_num(v) for v in operands]
            for i in range(0, len(values) - 1, 2):
                x, y = _apply(gs["ctm"], values[i], values[i + 1])
                add_to_path((x, y, x, y))
            path_other = True
        elif op in (b"W", b"W*"):
            clipping = True
        elif op in _FILLS or op in (b"n", b"S", b"s"):
            exact = path_rect is not None and path_rects == 1 and not path_other
            if op in _FILLS:
                coloured = gs["fill"] is None or on_white(gs["fill"])
                painted = painted or coloured
                opaque = gs["alpha"] >= 0.99 and gs["blend"] and not gs["smask"]
                if runs and exact and opaque and not coloured:
                    cover = path_rect if page_box is None else _meet(path_rect, page_box)
                    if gs["clip"] is not None:
                        cover = _meet(cover, gs["clip"]) if gs["clip_exact"] else _NOWHERE
                    if cover != _NOWHERE:
                        covers.append((len(runs), cover))
            if clipping and path_box is not None:  # the clip holds from the next operation on
                gs["clip"] = path_box if gs["clip"] is None else _meet(gs["clip"], path_box)
                gs["clip_exact"] = gs["clip_exact"] and exact
            path_box, path_rect, path_rects, path_other, clipping = None, None, 0, False, False
        elif op in (b"sh", b"INLINE IMAGE", b"BI") or (op == b"Do" and operands and str(operands[0]) in images):
            painted = True
        elif op in _SHOW_TEXT:
            if op == b'"' and len(operands) >= 3:
                gs["tw"], gs["tc"] = _num(operands[0]), _num(operands[1])
            if op in (b"'", b'"'):
                tm = tlm = _mul((1, 0, 0, 1, 0, -gs["tl"]), tlm)
                adv = (0.0, 0.0)
            mode = gs["mode"]
            m = _mul(tm, gs["ctm"])
            # where it is drawn: from the line's start, as far as the widths say it moves
            size, th, start = gs["size"], gs["tz"] / 100, adv[0]
            lo, hi = adv
            xs = [lo, hi]
            for part in (operands[0] if op == b"TJ" and operands and isinstance(operands[0], list) else operands[-1:]):
                if isinstance(part, (int, float)):
                    lo -= float(part) / 1000 * size * th
                    hi -= float(part) / 1000 * size * th
                else:
                    more = _advance(part, gs["font"], size, gs["tc"], gs["tw"], th)
                    lo, hi = lo + more[0], hi + more[1]
                xs += [lo, hi]
            adv, rise = (lo, hi), gs["rise"]
            outer = _box(m, min(xs), rise - 0.3 * size, max(xs), rise + size)
            placed = ((page_box is None or _overlaps(outer, page_box))
                      and (gs["clip"] is None or _overlaps(outer, gs["clip"])))
            wide = abs(gs["size"]) * (m[0] ** 2 + m[1] ** 2) ** 0.5 * abs(gs["tz"]) / 100
            high = abs(gs["size"]) * (m[2] ** 2 + m[3] ** 2) ** 0.5

            def seen(colour) -> bool:
                return colour is None or painted or on_white(colour)

            if mode in (0, 4):
                shown = seen(gs["fill"])
            elif mode in (1, 5):
                shown = seen(gs["stroke"])
            elif mode in (2, 6):
                shown = seen(gs["fill"]) or seen(gs["stroke"])
            else:
                shown = False
            if not shown or min(wide, high) < MIN_TEXT_PT or not placed:
                invisible += 1
                kept += _left_out(operands, op)  # sets spacing and moves to the next line, as kept text would
                continue
            visible += 1
            runs.append((len(kept), _box(m, start, rise, lo, rise + 0.6 * size)))
        kept.append((operands, op))
    # text under an opaque white rectangle painted after it: each run against the largest later ones
    covers = heapq.nlargest(MAX_COVERS, covers, key=lambda c: (c[1][2] - c[1][0]) * (c[1][3] - c[1][1]))
    hidden = {at for n, (at, box) in enumerate(runs)
              if any(after > n and _contains(cover, box) for after, cover in covers)}
    if hidden:
        kept = [step for i, (o, op) in enumerate(kept) for step in (_left_out(o, op) if i in hidden else [(o, op)])]
        visible, invisible = visible - len(hidden), invisible + len(hidden)
    return kept, visible, invisible


# A content stream's operations, read by one regular expression instead of pypdf's byte-by-byte
# parser (which took more time than the rest of a page's reading): operands as plain values
# (numbers as floats, bytes for strings, "/Name" for names, lists, dicts), the way pypdf reads them,
# for `_invisible_text_ops` to decide whether a page hides text. Whatever this does not read
# exactly as pypdf would (an inline image, a string with unescaped parentheses inside, a name with
# `#` escapes or bytes outside ASCII, a malformed number, a boolean inside an array, a stray
# delimiter) gives None: the page then goes through pypdf's parser.
_TOKENS = re.compile(
    rb"(?:[\x00\t\n\x0c\r ]+|%[^\r\n]*)*"  # whitespace and comments before a token
    # an operator and the numbers before it (the most of a page), or a token alone
    rb"(?:((?:[+-]?(?:\d+\.?\d*|\.\d+)(?![+,\-.0-9])[\t\n\x0c\r ]*)*)([A-Za-z'\"][^\t\n\x0b\x0c\r ()<>\[\]{}/%]*)"
    rb"|([+-]?(?:\d+\.?\d*|\.\d+))(?![+,\-.0-9])"  # a number
    rb"|(/[^\t\n\x0b\x0c\r ()<>\[\]{}/%]*)"  # a name
    rb"|(\((?:[^()\\]|\\.)*\))"  # a string without parentheses inside but escaped ones
    rb"|(<<|\[)|(>>|\])"  # a dictionary or an array opens or closes
    rb"|(<[0-9A-Fa-f\x00\t\n\x0c\r ]*>)"  # a hexadecimal string
    rb"|(.)"  # anything else: left to pypdf
    rb"|\Z)", re.S)
_HEX_SPACE = re.compile(rb"[\x00\t\n\x0c\r ]+")
_ESCAPES = {ord(c): ord(v) for c, v in zip("nrtbf()/\\ %<>[]#_&$", "\n\r\t\b\f()/\\ %<>[]#_&$")}


def _unescaped(literal: bytes) -> bytes | None:
    """The bytes of a literal string `(...)` (parentheses included) with its escapes read as pypdf
    reads them: `\\n`, `\\(`, octal `\\ddd` (over 255: the backslash kept, the digits read again),
    an escaped line break dropped, an unknown escape kept with its backslash."""
    out, i, n = bytearray(), 1, len(literal) - 1
    while i < n:
        c = literal[i]
        i += 1
        if c == 0x5C:
            if i >= n:
                return None
            c = literal[i]
            i += 1
            if c in _ESCAPES:
                out.append(_ESCAPES[c])
                continue
            if 0x30 <= c <= 0x37:
                digits = bytes([c])
                while len(digits) < 3 and i < n and 0x30 <= literal[i] <= 0x37:
                    digits += literal[i:i + 1]
                    i += 1
                value = int(digits, 8)
                if value > 255:
                    out.append(0x5C)
                    i -= len(digits)
                else:
                    out.append(value)
                continue
            if c in (0x0A, 0x0D):  # an escaped line break (both bytes of a two-byte one)
                if i < n and literal[i] in (0x0A, 0x0D):
                    i += 1
                continue
            out.append(0x5C)
        out.append(c)
    return bytes(out)


def _content_operations(data: bytes) -> list | None:
    """[(operands, operator)] of a content stream, or None where pypdf must read it (see above)."""
    ops: list = []
    operands: list = []
    stack: list = []  # (opening delimiter, items so far) of the arrays and dictionaries open
    for numbers, word, number, name, string, opened, closed, hexa, other in _TOKENS.findall(data):
        if word:
            if stack or word == b"BI":  # a boolean or null inside an array or dictionary, an inline image
                return None
            if numbers:
                operands.extend(map(float, numbers.split()))
            if word in (b"Tf", b"gs", b"Do") and operands and not isinstance(operands[0], str):
                return None  # a resource named by a string: pypdf's string objects read as its name
            ops.append((operands, word))
            operands = []
            continue
        elif number:
            value = float(number)
        elif name:
            if b"#" in name or not name.isascii():
                return None
            value = name.decode("ascii")
        elif string:
            if b"\\" in string:
                value = _unescaped(string)
                if value is None:
                    return None
            else:
                value = string[1:-1]
        elif opened:
            stack.append((opened, []))
            continue
        elif closed:  # an array's items, or a dictionary's keys (names) and values in turn
            if not stack or stack[-1][0] != (b"[" if closed == b"]" else b"<<"):
                return None
            kind, value = stack.pop()
            if kind == b"<<":
                keys, values = value[0::2], value[1::2]
                if len(keys) != len(values) or not all(isinstance(k, str) for k in keys):
                    return None
                value = dict(zip(keys, values))
        elif hexa:
            digits = _HEX_SPACE.sub(b"", hexa[1:-1])
            value = bytes.fromhex((digits + b"0" if len(digits) % 2 else digits).decode("ascii"))
        elif other:
            return None
        else:  # the end of the stream
            continue
        if stack:
            stack[-1][1].append(value)
        else:
            operands.append(value)
    # operands left without an operator at the end are dropped, as pypdf drops them
    return None if stack else ops


def _image_names(page) -> frozenset:
    """The names of the page's XObjects that are images."""
    try:
        xobjects = page["/Resources"]["/XObject"]
        return frozenset(str(name) for name, ref in xobjects.items() if ref.get_object().get("/Subtype") == "/Image")
    except Exception:
        return frozenset()


def _visible_page_text(page, reader, lazy: bool = False) -> tuple[str | None, bool, bool]:
    """The page's text without what it draws invisibly (see _MAY_HIDE), whether it drew any, and
    whether it draws lines (`_DRAWS_LINES`). `lazy`: the text of a page that hides nothing and
    draws lines is None, for the caller to read only if the table reader does not (that page's
    content stream is then parsed once, by the fast reader, instead of twice by pypdf)."""
    from pypdf.generic import ContentStream, NameObject, NumberObject

    contents = page.get_contents()
    if contents is None:
        return page.extract_text() or "", False, False
    try:
        data = contents.get_data()
        lines = _DRAWS_LINES.search(data) is not None
    except Exception:
        return page.extract_text() or "", False, False

    def text_layer() -> str | None:
        return None if lazy and lines else page.extract_text() or ""

    try:
        if _MAY_HIDE.search(data) is None:
            return text_layer(), False, lines
        images = _image_names(page)
        facts = {"page_box": _page_box(page), "fonts": _page_fonts(page), "gstates": _page_gstates(page)}
        fast = _content_operations(data)
        # the fast reader only decides that nothing is hidden: a page that hides something is read
        # again by pypdf below, whose operations make its text layer
        if fast is not None and _invisible_text_ops(fast, images, **facts)[2] == 0:
            return text_layer(), False, lines
        stream = ContentStream(contents, reader)
        kept, visible, invisible = _invisible_text_ops(stream.operations, images, **facts)
    except Exception:  # a stream pypdf cannot take apart: its own extraction decides
        return text_layer(), False, lines
    # the text layer reads the operations parsed above instead of parsing the stream again
    # (in memory only: the file is not written)
    page[NameObject("/Contents")] = stream
    if not invisible:
        return text_layer(), False, lines
    plain = page.extract_text() or ""
    if not visible and any(op in (b"INLINE IMAGE", b"BI") or (op == b"Do" and o and str(o[0]) in images)
                           for o, op in stream.operations):
        # only invisible text over an image: a scan's OCR layer is kept (read as drawn); white text is not
        kept, _, _ = _invisible_text_ops([([NumberObject(0)], b"Tr") if op == b"Tr" and o and str(o[0]) in ("3", "7")
                                          else (o, op) for o, op in stream.operations], images, **facts)
    stream.operations = kept
    page[NameObject("/Contents")] = stream  # in memory only: the file is not written
    seen = page.extract_text() or ""
    return seen, seen != plain, lines


def _text_of(value) -> str | None:
    try:
        return " ".join(str(value).split()) if value is not None else None
    except Exception:
        return None


def _pdf_first_heading(page) -> str | None:
    """The first line of the largest type among the first lines of a page (a PDF marks no
    headings; the title is usually the biggest text at the top)."""
    runs: list[tuple[float, str]] = []

    def visit(text, cm, tm, font_dict, font_size):
        if len(runs) < 40 and text.strip():
            scale = (tm[0] ** 2 + tm[1] ** 2) ** 0.5 * (cm[0] ** 2 + cm[1] ** 2) ** 0.5
            runs.append((round(float(font_size) * (scale or 1.0), 1), " ".join(text.split())))

    page.extract_text(visitor_text=visit)
    if not runs:
        return None
    body = sorted(size for size, _ in runs)[len(runs) // 2]
    biggest = max(size for size, _ in runs)
    if biggest <= body * 1.15:  # no text stands out: no heading to take
        return None
    heading = next(t for size, t in runs if size == biggest)
    return heading if 0 < len(heading) <= 160 else None


def parse_json_export(path: Path, doc_id: str) -> list[Document]:
    """A JSON passage export: an array of {id, title, text, url?, source_type?, version?, status?,
    updated_at? (or effective_date?)}; also {"passages": [...]} or {"documents": [...]}."""
    try:
        data = json.loads(decode_text(path.read_bytes()))
    except json.JSONDecodeError as e:
        raise IngestError(f"invalid JSON (line {e.lineno}, column {e.colno}: {e.msg})") from None
    except RecursionError:
        raise IngestError("invalid passage export: JSON nested too deeply") from None
    except ValueError as e:  # e.g. a number with more digits than Python converts
        raise IngestError(f"invalid JSON ({str(e)[:120]})") from None
    if isinstance(data, dict) and isinstance(data.get("passages") or data.get("documents"), list):
        data = data.get("passages") or data.get("documents")
    if not isinstance(data, list):
        raise IngestError("JSON is not a passage export: expected an array of objects with id, title and text")
    docs, seen = [], set()
    for n, item in enumerate(data):
        if not isinstance(item, dict) or not {"id", "text"} <= item.keys():
            raise IngestError(f"item {n} of the export lacks 'id' or 'text'")
        if not str(item["text"]).strip():
            raise IngestError(f"item {n} ({item['id']}) of the export has empty text")
        # an id and a title are one line, as every other field is (`metadata.normalize`): a newline
        # in a title could start a Markdown block (a table) in an answer's `Sources:`
        from ..normalize import clean_id, id_key

        pid = clean_id(str(item["id"]))
        if not pid:
            raise IngestError(f"item {n} of the export has an empty 'id'")
        if id_key(pid) in seen:
            raise IngestError(f"duplicate id {pid!r} in the export (item {n})")
        suffix = Path(id_key(pid)).suffix.lower()
        if suffix in SUPPORTED:
            # Files get their path as id (`docs/z1.md`): an export item may not take one, or the file
            # that sorts first would own it and the other be refused for good.
            raise IngestError(f"item {n}: id {pid!r} has the form of a file's document id (a path ending in "
                              f"{suffix}): the ids of an export are its own; rename it (for example without "
                              f"{suffix})")
        seen.add(id_key(pid))
        from .metadata import normalize

        fields = normalize({k: item[k] for k in ("url", "source_type", "version", "status", "updated_at", "effective_date",
                                                 "readers")
                            if k in item}, origin=f"item {n} ({pid})")
        docs.append(Document(
            id=pid, title=" ".join(str(item.get("title") or "").split()) or pid, text=_clean(str(item["text"])),
            url=fields.get("url"), source_type=fields.get("source_type"), version=fields.get("version"),
            status=fields.get("status") or "current", updated_at=fields.get("updated_at"),
            readers=fields["readers"].split(",") if fields.get("readers") else [],
        ))
    if not docs:
        raise IngestError("empty passage export")
    return docs


PARSERS = {
    ".pdf": parse_pdf, ".docx": parse_docx, ".md": parse_markdown, ".markdown": parse_markdown,
    ".html": parse_html, ".htm": parse_html, ".txt": parse_txt, ".json": parse_json_export,
}


def _opened_path(fd: int) -> str | None:
    """The path of the file open at `fd` as the kernel sees it (links resolved), where it says."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:
        import fcntl

        if hasattr(fcntl, "F_GETPATH"):  # macOS
            return fcntl.fcntl(fd, fcntl.F_GETPATH, bytes(1024)).rstrip(b"\0").decode()
    except (OSError, ValueError, ImportError):
        pass
    return None


def _inside(path: str, folder: str) -> bool:
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:  # another drive
        return False


@contextmanager
def checked_copy(path: Path, within: Path):
    """A private copy of the file at `path`, read through one open file whose real path is checked
    to lie inside `within`: a file replaced by a link leading out (or a folder on its path
    replaced) after the folder was listed is refused, and what is parsed is what was checked."""
    folder = os.path.realpath(within)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise IngestError(f"cannot be read: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise IngestError("not a regular file (a device, a pipe or a socket): not read")
        real = _opened_path(fd) or os.path.realpath(path)
        if not _inside(real, folder):
            raise IngestError(f"it leads to {real}, outside {within} (it became a link after the folder was "
                              "listed?): not read (--follow-symlinks to ingest links that lead out)")
        tmp = Path(tempfile.mkdtemp(prefix="sourcegate-parse-"))  # 0700
        try:
            copy = tmp / path.name
            out = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                while chunk := os.read(fd, 1 << 20):
                    os.write(out, chunk)
            finally:
                os.close(out)
            os.close(fd)
            fd = -1
            yield copy
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        if fd >= 0:
            os.close(fd)


def parse_file(path: Path, doc_id: str, within: Path | None = None, named: bool = False) -> list[Document]:
    """The documents of one file, with the fields of its sidecar or folder manifest applied (see
    `metadata`); a JSON passage export carries its own fields. With `within` (a folder ingested
    without following links out of it), the file is read only if it still lies inside it when it
    is opened (`checked_copy`), unless it was `named` on the command line (then it is read where
    it leads); its metadata files are read only inside `within` either way."""
    from .metadata import apply, is_metadata_file, sidecar_metadata

    if is_metadata_file(path):
        raise IngestError("a metadata file (it describes the file of the same name; it is not a document)")
    parser = PARSERS.get(path.suffix.lower())
    if parser is None:
        raise IngestError(unsupported_type(path))
    if within is None or named:
        docs = parser(path, doc_id)
    else:
        with checked_copy(path, within) as copy:
            docs = parser(copy, doc_id)
    if parser is not parse_json_export:
        fields = sidecar_metadata(path, within)
        for doc in docs:
            apply(doc, fields)
    return docs


def supported_types() -> str:
    return ", ".join(sorted(SUPPORTED))


def unsupported_type(path: Path) -> str:
    kind = repr(path.suffix) if path.suffix else "(no extension)"
    return f"unsupported file type {kind}: sourcegate reads {supported_types()}"

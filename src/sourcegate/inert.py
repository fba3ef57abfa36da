"""Passages are data, not markup. A document can hold a Markdown link or image, raw HTML, a bare URL
or a `javascript:` URL; an agent or chat client that renders an answer as Markdown would turn a
quoted image into a request to its server (a way to leak the conversation) and a link into
something to click. Here they stay text:

- `inert_markup` escapes what opens a link, an image, an autolink or HTML (`](`, `]:`, `![`, `<`),
  every backslash that would escape the next character (so `\\](` cannot turn an escape back into
  a live link) and every backtick (so no code span can be opened around the escapes), and puts
  anything a linkifier would turn into a link (`scheme://...`, `www.`, `user@host`, `name.tld`) in a
  code span, where no renderer makes links. A line that could be a GFM table's delimiter row (only
  `|`, `-`, `:` and spaces, after any quote or list marker) has its first mark escaped, so no table
  is built: a table's cell pipes would split a code span or an escape before the cells are read
  (a title holding newlines and pipes made a live image that way). Rendered as CommonMark or GFM
  (tables and auto-links on), the text reads as it was written and holds no link, image, table or
  HTML (`tests/test_inert_render.py`).
- `visible_text` removes what a reader cannot see but a renderer obeys: control characters (NUL
  included), bidirectional overrides and isolates (a title stored "gnitset" behind U+202E displays
  "testing"), zero-width characters and the other format characters (tag characters can hide text
  from a person while an agent reads it), and the blanks outside that category: variation
  selectors, the combining grapheme joiner, Hangul fillers, the braille blank.

A URL is kept as a citation's `url` only when it is http(s) (`safe_url`).
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

# `](` opens an inline link or image's destination, `]:` a reference definition (without one, a
# `[label]` is plain text, so citations such as `[1]` keep their shape), `![` an image, `<` an
# autolink or an HTML tag, a backtick a code span; a backslash before ASCII punctuation escapes it,
# so it is escaped itself (one `\\` renders as the backslash that was written), and so is one that
# ends a piece of text (a code span may follow).
_MARKUP = re.compile(r"\]\(|\]:|!\[|<|`|\\(?=[!-/:-@\[-`{-~]|$)")
_ESCAPED = {"](": "\\](", "]:": "\\]:", "![": "!\\[", "<": "\\<", "`": "\\`", "\\": "\\\\"}

# What a linkifier (GFM's extended autolinks, markdown-it's linkify with fuzzy links and e-mails)
# may turn into a link: a scheme followed by `//` (also `//host`), `www.`, an `@` before a word
# character, or a dot before two letters after anything but a space (`p200.md`, `evil.example`,
# and `href=.com`, which linkify-it takes for a host too).
_LINKABLE = re.compile(r"://|//|(?i:www)\.|@[^\W_]|\S[.．。｡][^\W\d_]{2}")
# Where a code span around a URL starts: after the last of these before it (else the word's start).
_OPENERS = "([{<\"'`"
_WORD = re.compile(r"\S+")
# A GFM delimiter row (`---|:-:`, `-|-`, `---`) is made of these, after what may open a block quote
# or a list item (over-reading a prefix as a container costs one more escape, never a missed row).
_ROW_CHARS = frozenset(" \t|:-")
_CONTAINER_CHARS = frozenset(" \t>*+-0123456789.)")
_TRAIL = ")]}>\"'.,;:!?*_~"

# Unicode format characters (category Cf: bidi controls, zero-width space and joiners, word joiner,
# BOM, soft hyphen, tag characters) and control characters (Cc) other than tab and newline.
_INVISIBLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


# Invisible characters outside the format category: variation selectors (U+FE00-FE0F and
# U+E0100-E01EF), the combining grapheme joiner, Mongolian free variation selectors, Hangul
# fillers, the braille blank and Khmer inherent vowels. Each shows nothing (or a blank) and can
# hide text or make two ids look the same.
_BLANKS = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u2800\u3164\uffa0")


def _invisible(ch: str) -> bool:
    return (unicodedata.category(ch) == "Cf" or ch in _BLANKS or "\ufe00" <= ch <= "\ufe0f"
            or "\U000e0100" <= ch <= "\U000e01ef")


def visible_text(text: str | None) -> str | None:
    """`text` without control characters (but tab and newline), bidirectional controls, zero-width
    and other invisible format characters; a carriage return or a line or paragraph separator
    becomes a newline. What remains is what a person sees and what an agent reads."""
    if not text:
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\u2028", "\n").replace("\u2029", "\n")
    text = _INVISIBLE.sub("", text)
    if text.isascii():
        return text
    return "".join(ch for ch in text if not _invisible(ch))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _shown(ch: str) -> str:
    code = ord(ch)
    if code > 0xFFFF:  # as a surrogate pair: one form that is also a valid JSON string escape
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def terminal_text(text: str) -> str:
    """`text` safe to print on an operator's terminal, piped or not: control characters (ESC opens
    the sequences that write hyperlinks, clear the screen or set the window title; the C1 range
    holds an 8-bit CSI) and the invisible characters `visible_text` removes are shown as `\\uXXXX`
    escapes (valid inside a JSON string too); newline and tab are kept."""
    if text.isascii() and not _CONTROL.search(text):
        return text
    return "".join(_shown(ch) if ch not in "\n\t" and (unicodedata.category(ch) == "Cc" or _invisible(ch)) else ch
                   for ch in text)


def _escape(text: str) -> str:
    return _MARKUP.sub(lambda m: _ESCAPED[m.group(0)], text)


def _code_span(text: str) -> str:
    """`text` as a CommonMark code span: a fence one backtick longer than any run inside, padded
    with a space where the text starts or ends with a backtick or a space."""
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _inert_word(word: str) -> str:
    m = _LINKABLE.search(word)
    if not m:
        return _escape(word)
    # The code span starts where the URL does (its scheme, host or user name) and ends before the
    # punctuation after it; the text around stays text.
    start = m.start()
    while start > 0 and word[start - 1] not in _OPENERS:
        start -= 1
    end = len(word)
    while end > m.end() and word[end - 1] in _TRAIL:
        end -= 1
    return _escape(word[:start]) + _code_span(word[start:end]) + _escape(word[end:])


def inert_markup(text: str | None) -> str | None:
    """`text` with Markdown links, images, autolinks, HTML and auto-linked URLs made inert (shown as
    text when rendered as Markdown), and invisible characters removed (`visible_text`)."""
    text = visible_text(text)
    if not text:
        return text
    out: list[str] = []
    pos = 0
    for m in _WORD.finditer(text):
        out.append(text[pos:m.start()])
        out.append(_inert_word(m.group(0)))
        pos = m.end()
    out.append(text[pos:])
    return "\n".join(_no_delimiter_row(line) for line in "".join(out).split("\n"))


def _no_delimiter_row(line: str) -> str:
    """`line` with a backslash before the first mark of a delimiter row it ends with, if any."""
    row = len(line)
    while row > 0 and line[row - 1] in _ROW_CHARS:
        row -= 1
    prefix = 0
    while prefix < len(line) and line[prefix] in _CONTAINER_CHARS:
        prefix += 1
    # the row may start anywhere from `row` to `prefix`: the earliest mark there is escaped, so no
    # container read before it leaves a row behind
    for i in range(row, min(prefix, len(line) - 1) + 1):
        if line[i] in "|:-":
            return line[:i] + "\\" + line[i:] if "-" in line[i:] else line
    return line


def plain_text(text: str | None) -> str | None:
    """`inert_markup`'s output as a person reads it where no Markdown is rendered (a terminal):
    code spans unwrapped and backslash escapes removed (`Posted by \\`k.lee\\`` reads
    `Posted by `k.lee``). Invisible and control characters stay removed: nothing drives the terminal."""
    if not text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "\\`<[]!":
            out.append(text[i + 1])
            i += 2
            continue
        if ch == "`":
            j = i
            while j < n and text[j] == "`":
                j += 1
            fence = text[i:j]
            close = re.compile("(?<!`)" + fence + "(?!`)").search(text, j)
            if close is None:
                out.append(fence)
                i = j
                continue
            inner = text[j:close.start()]
            if len(inner) >= 2 and inner[0] == " " and inner[-1] == " " and inner.strip():
                inner = inner[1:-1]
            out.append(inner)
            i = close.end()
            continue
        out.append(ch)
        i += 1
    return visible_text("".join(out))


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

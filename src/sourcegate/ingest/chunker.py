"""Deterministic chunking: about `size` characters with `overlap` characters carried over,
cutting at paragraph boundaries first, then sentence boundaries, then spaces.

The same text always yields the same chunks and the same chunk ids.
"""

from __future__ import annotations

import bisect
import hashlib
import re

from ..models import Chunk, Document

_PARA = re.compile(r"\n\s*\n")
# A sentence ends with . ! ? or ; followed by space, unless the dot belongs to a number or a
# short abbreviation ("Rev. 2", "e.g. this").
_SENT = re.compile(r"(?<=[.!?;:])\s+(?=[A-Z0-9À-ÖØ-Þ\"'(\[«])|\n")


def _spans(text: str, pattern: re.Pattern, start: int, end: int) -> list[tuple[int, int]]:
    out, pos = [], start
    for m in pattern.finditer(text, start, end):
        if m.start() > pos:
            out.append((pos, m.start()))
        pos = m.end()
    if pos < end:
        out.append((pos, end))
    trimmed = []
    for a, b in out:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            trimmed.append((a, b))
    return trimmed


def _split_long(text: str, a: int, b: int, size: int) -> list[tuple[int, int]]:
    """Cut a span longer than `size` at spaces (or hard, if there are none)."""
    out = []
    while b - a > size:
        cut = text.rfind(" ", a + size // 2, a + size)
        if cut <= a:
            cut = a + size
        out.append((a, cut))
        a = cut
        while a < b and text[a] == " ":
            a += 1
    if b > a:
        out.append((a, b))
    return out


def segments(text: str, size: int) -> list[tuple[int, int, bool]]:
    """Sentence-sized spans (start, end, starts_paragraph) covering the text."""
    segs: list[tuple[int, int, bool]] = []
    for pa, pb in _spans(text, _PARA, 0, len(text)):
        first = True
        for sa, sb in _spans(text, _SENT, pa, pb):
            for xa, xb in _split_long(text, sa, sb, size):
                segs.append((xa, xb, first))
                first = False
    return segs


def chunk_spans(text: str, size: int = 800, overlap: int = 120) -> list[tuple[int, int]]:
    segs = segments(text, size)
    if not segs:
        return []
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(segs):
        start = segs[i][0]
        j = i
        # Greedy packing; a paragraph boundary is preferred once the chunk is reasonably full.
        while j + 1 < len(segs) and segs[j + 1][1] - start <= size:
            if segs[j + 1][2] and segs[j][1] - start >= size * 0.6 and segs[j + 1][1] - start > size * 0.9:
                break
            j += 1
        spans.append((start, segs[j][1]))
        if j + 1 >= len(segs):
            break
        # Carry over whole trailing sentences worth at most `overlap` characters.
        k = j + 1
        while k - 1 > i and segs[j][1] - segs[k - 1][0] <= overlap:
            k -= 1
        i = k if k <= j else j + 1
    return spans


def chunk_id(doc_id: str, ordinal: int, text: str) -> str:
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    return f"{doc_id}#{ordinal:04d}-{digest}"


def _breaks(doc: Document) -> list[int]:
    """Where a chunk must start: each page (PDF) and each heading with text of its own under it
    (DOCX, Markdown, HTML), so that every sentence of a chunk has the chunk's page and heading path
    and a citation points to the place of the sentence it quotes. A heading followed directly by
    a deeper one starts the chunk of the deeper one."""
    heads = sorted({h[0] for h in doc.headings})
    pages = {p[0] for p in doc.pages}
    marks = sorted(pages | set(heads))
    keep: set[int] = set(pages)
    for n, pos in enumerate(marks):
        if pos in pages:
            continue
        # A heading's section runs to the next mark; keep the mark where the previous section (a
        # heading alone) has text of its own, else that heading's chunk starts here.
        prev = marks[n - 1] if n else None
        if prev is None or prev in pages or _has_body(doc.text, prev, pos):
            keep.add(pos)
    return sorted(p for p in keep if 0 < p < len(doc.text))


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _has_body(text: str, heading_pos: int, end: int) -> bool:
    return bool(text[_line_end(text, heading_pos):end].strip())


def _section_spans(doc: Document, size: int, overlap: int) -> list[tuple[int, int]]:
    breaks = _breaks(doc)
    if not breaks:
        return chunk_spans(doc.text, size, overlap)
    bounds = [0, *breaks, len(doc.text)]
    spans: list[tuple[int, int]] = []
    for a, b in zip(bounds, bounds[1:]):
        spans += [(a + x, a + y) for x, y in chunk_spans(doc.text[a:b], size, overlap)]
    return spans


def _body_start(doc: Document, a: int, head_starts: set[int]) -> int:
    """The chunk's first position past the heading lines it opens with."""
    while a in head_starts:
        a = _line_end(doc.text, a)
        while a < len(doc.text) and doc.text[a].isspace():
            a += 1
    return a


def chunk_document(doc: Document, size: int = 800, overlap: int = 120) -> list[Chunk]:
    page_starts = [p[0] for p in doc.pages]
    head_starts = [h[0] for h in doc.headings]
    head_set = set(head_starts)
    chunks = []
    for n, (a, b) in enumerate(_section_spans(doc, size, overlap)):
        text = doc.text[a:b].strip()
        page = heading = None
        if doc.pages:
            k = bisect.bisect_right(page_starts, a) - 1
            page = doc.pages[max(k, 0)][1]
        if doc.headings:
            k = bisect.bisect_right(head_starts, min(_body_start(doc, a, head_set), b - 1)) - 1
            heading = doc.headings[k][1] if k >= 0 else None
        chunks.append(Chunk(id=chunk_id(doc.id, n, text), doc_id=doc.id, ordinal=n, text=text, start=a, page=page, heading=heading))
    return chunks

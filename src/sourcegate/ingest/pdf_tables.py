"""Ruled tables in PDF pages, read row by row where they stand, from one pdfium parse of the page
that gives both the lines it draws and its text.

A table is a grid of ruled cells: the horizontal and vertical lines a page draws (strokes, and the
edges of rectangles, so a table of one rectangle a cell is found as well as one drawn as a grid of
lines) are snapped together, their crossings found, and each smallest rectangle whose four corners
cross and whose four sides are drawn is a cell (the way pdfplumber's "lines" strategy reads them).
Cells that touch make one table; a table needs two cells at least (a framed paragraph is not one).
Each cell's text is the page's text inside it; the text above, beside and below the tables is read
from the same text page, so a page's words are each read once.

Everything here is bounded by a deadline checked inside each page as well as between pages: a
page whose reading runs past it keeps its text layer, and so do the pages after it.
"""

from __future__ import annotations

import ctypes
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from pathlib import Path

# Coordinates closer than this (points) are one line: the two edges of a hairline rectangle, a
# cell border drawn twice by two neighbouring cells.
SNAP = 3.0
# Shorter strokes are ticks, underlines of a letter or glyph parts, not a table's lines.
MIN_EDGE = 3.0
# pdfium is not thread-safe: one page at a time in a process.
_LOCK = threading.Lock()


class OutOfTime(Exception):
    """The table budget ran out inside a page."""


def _check(deadline: float) -> None:
    if time.monotonic() > deadline:
        raise OutOfTime


def _clusters(values: list[float]) -> dict[float, float]:
    """Each value mapped to the mean of its run of values at most SNAP apart."""
    out: dict[float, float] = {}
    run: list[float] = []
    for v in sorted(set(values)):
        if run and v - run[-1] > SNAP:
            mean = sum(run) / len(run)
            out.update((r, mean) for r in run)
            run = []
        run.append(v)
    if run:
        mean = sum(run) / len(run)
        out.update((r, mean) for r in run)
    return out


def _merged(edges: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Edges (position, start, end) snapped to shared positions, overlapping or touching edges of
    one position joined into one (a dashed line is one edge), those shorter than MIN_EDGE left out."""
    snap = _clusters([e[0] for e in edges])
    by_pos: dict[float, list[tuple[float, float]]] = {}
    for pos, a, b in edges:
        by_pos.setdefault(snap[pos], []).append((a, b))
    out = []
    for pos, spans in by_pos.items():
        spans.sort()
        start, end = spans[0]
        for a, b in spans[1:]:
            if a <= end + SNAP:
                end = max(end, b)
            else:
                out.append((pos, start, end))
                start, end = a, b
        out.append((pos, start, end))
    return [e for e in out if e[2] - e[1] >= MIN_EDGE]


def _path_edges(raw, obj, matrix, h: list, v: list) -> None:
    """The horizontal and vertical straight segments of a path object, in page space."""
    a, b, c, d, e, f = matrix
    x, y = ctypes.c_float(), ctypes.c_float()
    px, py = ctypes.byref(x), ctypes.byref(y)
    # pdfium's functions bound once: a ruled page has a few hundred paths of five segments each
    segment, point_of, kind_of, closes = (raw.FPDFPath_GetPathSegment, raw.FPDFPathSegment_GetPoint,
                                          raw.FPDFPathSegment_GetType, raw.FPDFPathSegment_GetClose)
    moveto, lineto = raw.FPDF_SEGMENT_MOVETO, raw.FPDF_SEGMENT_LINETO
    segments = []
    cur = start = None
    for i in range(raw.FPDFPath_CountSegments(obj)):
        seg = segment(obj, i)
        if not point_of(seg, px, py):
            continue
        point = (a * x.value + c * y.value + e, b * x.value + d * y.value + f)
        kind = kind_of(seg)
        if kind == moveto or cur is None:
            start = point
        elif kind == lineto:
            segments.append((cur, point))
        cur = point  # a curve's points are not a line: only followed
        if closes(seg) and start is not None:
            segments.append((cur, start))
            cur = start
    for (x0, y0), (x1, y1) in segments:
        if abs(y1 - y0) <= 0.5 and x0 != x1:
            h.append(((y0 + y1) / 2, min(x0, x1), max(x0, x1)))
        elif abs(x1 - x0) <= 0.5 and y0 != y1:
            v.append(((x0 + x1) / 2, min(y0, y1), max(y0, y1)))


def _compose(inner, outer):
    a, b, c, d, e, f = inner
    A, B, C, D, E, F = outer
    return (a * A + b * C, a * B + b * D, c * A + d * C, c * B + d * D, e * A + f * C + E, e * B + f * D + F)


def _page_edges(raw, page, deadline: float) -> tuple[list, list]:
    """The page's horizontal and vertical edges (y, x0, x1) and (x, y0, y1), form XObjects
    included (their matrices applied)."""
    h: list = []
    v: list = []
    m = raw.FS_MATRIX()

    def visit(count: int, get: Callable, outer) -> None:
        for i in range(count):
            if i % 256 == 0:
                _check(deadline)
            obj = get(i)
            kind = raw.FPDFPageObj_GetType(obj)
            if kind not in (raw.FPDF_PAGEOBJ_PATH, raw.FPDF_PAGEOBJ_FORM):
                continue
            matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
            if raw.FPDFPageObj_GetMatrix(obj, m):
                matrix = (m.a, m.b, m.c, m.d, m.e, m.f)
            matrix = _compose(matrix, outer)
            if kind == raw.FPDF_PAGEOBJ_PATH:
                _path_edges(raw, obj, matrix, h, v)
            else:
                visit(raw.FPDFFormObj_CountObjects(obj), lambda j, o=obj: raw.FPDFFormObj_GetObject(o, j), matrix)

    visit(raw.FPDFPage_CountObjects(page), lambda j: raw.FPDFPage_GetObject(page, j), (1.0, 0.0, 0.0, 1.0, 0.0, 0.0))
    return h, v


def _cells(h: list, v: list, deadline: float) -> list[tuple[float, float, float, float]]:
    """Cells (left, bottom, right, top) in PDF space (y upwards): for each crossing taken as a
    top-left corner, the nearest crossing below it and the nearest to its right, joined by drawn
    lines, whose bottom-right corner crosses and is joined to both."""
    h, v = _merged(h), _merged(v)
    v.sort()
    v_x = [e[0] for e in v]
    # crossing (x, y) -> the ids of the vertical and horizontal edges through it
    points: dict[tuple[float, float], tuple[set, set]] = {}
    for hi, (y, x0, x1) in enumerate(h):
        _check(deadline)
        for vi in range(bisect_left(v_x, x0 - SNAP), bisect_right(v_x, x1 + SNAP)):
            x, y0, y1 = v[vi]
            if y0 - SNAP <= y <= y1 + SNAP:
                vs, hs = points.setdefault((x, y), (set(), set()))
                vs.add(vi)
                hs.add(hi)
    column: dict[float, list[float]] = {}
    row: dict[float, list[float]] = {}
    for x, y in points:
        column.setdefault(x, []).append(y)
        row.setdefault(y, []).append(x)
    for ys in column.values():
        ys.sort(reverse=True)  # downwards
    for xs in row.values():
        xs.sort()
    cells = []
    for n, (x, y) in enumerate(sorted(points, key=lambda p: (-p[1], p[0]))):
        if n % 64 == 0:
            _check(deadline)
        vs, hs = points[(x, y)]
        below = [yb for yb in column[x] if yb < y]
        right = [xr for xr in row[y] if xr > x]
        found = False
        for yb in below:
            if not vs & points[(x, yb)][0]:
                break  # the line down from this corner ends above
            bh = points[(x, yb)][1]
            for xr in right:
                if not hs & points[(xr, y)][1]:
                    break
                corner = points.get((xr, yb))
                if corner and corner[0] & points[(xr, y)][0] and corner[1] & bh:
                    cells.append((x, yb, xr, y))
                    found = True
                    break
            if found:
                break
    return cells


def _tables(cells: list) -> list[list[tuple[float, float, float, float]]]:
    """Cells that share a corner, grouped: the tables, each of two cells at least."""
    parent = list(range(len(cells)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[float, float], int] = {}
    for i, (x0, y0, x1, y1) in enumerate(cells):
        for corner in ((x0, y0), (x0, y1), (x1, y0), (x1, y1)):
            j = owner.setdefault(corner, i)
            parent[root(i)] = root(j)
    groups: dict[int, list] = {}
    for i, cell in enumerate(cells):
        groups.setdefault(root(i), []).append(cell)
    return [g for g in groups.values() if len(g) >= 2]


_BUFFER = 4096
# One buffer for the bounded text of every cell (pages are read one at a time, under _LOCK): a
# new one a cell, copied whole to bytes, cost more than the text it held.
_TEXT_BUFFER = (ctypes.c_ushort * _BUFFER)()


def _text(textpage, left: float, bottom: float, right: float, top: float) -> str:
    """The text page's text inside a rectangle, each line's spaces collapsed."""
    if right - left <= 0 or top - bottom <= 0:
        return ""
    import pypdfium2.raw as raw

    buffer = _TEXT_BUFFER
    n = raw.FPDFText_GetBoundedText(textpage.raw, left, top, right, bottom, buffer, _BUFFER)
    if n < _BUFFER - 1:
        text = ctypes.string_at(buffer, 2 * max(n, 0)).decode("utf-16-le", errors="replace").replace("\x00", "")
    else:  # more text than the buffer holds: the wrapper sizes its own
        text = textpage.get_text_bounded(left, bottom, right, top)
    return "\n".join(" ".join(line.split()) for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
                     if line.strip())


def _upright(raw, textpage, sample: int = 64) -> bool:
    """Whether the page's text runs left to right in page space (its first characters unturned):
    on a page whose text is turned (a landscape table drawn turned on a portrait page), the
    rows of the drawing are not the rows of the text, and the text layer is kept."""
    count = raw.FPDFText_CountChars(textpage.raw)
    for i in range(min(count, sample)):
        angle = raw.FPDFText_GetCharAngle(textpage.raw, i)
        if angle >= 0 and 0.01 < angle < 6.27:  # radians, -1 for a character without one
            return False
    return True


def _page_text(raw, page, textpage, deadline: float, table_lines: Callable) -> str | None:
    """The page's text with its tables read row by row where they stand; None without a table."""
    h, v = _page_edges(raw, page, deadline)
    if not h or not v or not _upright(raw, textpage):
        return None
    tables = _tables(_cells(h, v, deadline))
    if not tables:
        return None
    box = raw.FS_RECTF()
    if raw.FPDF_GetPageBoundingBox(page, box):
        left, bottom, right, top = box.left, box.bottom, box.right, box.top
    else:
        left, bottom, right, top = 0.0, 0.0, raw.FPDF_GetPageWidthF(page), raw.FPDF_GetPageHeightF(page)
    boxes = [(min(c[0] for c in t), min(c[1] for c in t), max(c[2] for c in t), max(c[3] for c in t), t) for t in tables]
    boxes.sort(key=lambda b: (-b[3], b[0]))
    # tables side by side (overlapping heights) are one band of the page
    bands: list[list] = []
    for b in boxes:
        if bands and b[3] > min(x[1] for x in bands[-1]):
            bands[-1].append(b)
        else:
            bands.append([b])
    parts, cursor = [], top
    for band in bands:
        _check(deadline)
        band_top, band_bottom = max(b[3] for b in band), min(b[1] for b in band)
        if cursor > band_top:
            parts.append(_text(textpage, left, band_top, right, cursor))
        for x0, y0, x1, y1, cells in sorted(band, key=lambda b: b[0]):
            rows: dict[float, list] = {}
            for cell in cells:
                rows.setdefault(round(cell[3], 1), []).append(cell)
            grid = []
            for n, row_top in enumerate(sorted(rows, reverse=True)):
                if n % 16 == 0:
                    _check(deadline)
                grid.append([_text(textpage, *cell) for cell in sorted(rows[row_top])])
            parts.append("\n\n".join(table_lines(grid)))
        # beside the tables, within the band
        x = left
        for x0, _, x1, _, _ in sorted(band, key=lambda b: b[0]):
            if x0 > x:
                parts.append(_text(textpage, x, band_bottom, x0, min(cursor, band_top)))
            x = max(x, x1)
        if right > x:
            parts.append(_text(textpage, x, band_bottom, right, min(cursor, band_top)))
        cursor = min(cursor, band_bottom)
    if cursor > bottom:
        parts.append(_text(textpage, left, bottom, right, cursor))
    return "\n\n".join(p for p in parts if p.strip())


def pages_with_tables(path: Path, page_numbers: list[int], budget_s: float,
                      table_lines: Callable) -> dict[int, str]:
    """The text of the pages (0-based numbers) that hold ruled tables; pages without one, those
    read when the budget ran out, and those after, are left out (they keep their text layer)."""
    try:
        import pypdfium2 as pdfium
        import pypdfium2.raw as raw
    except ImportError:
        return {}
    deadline = time.monotonic() + budget_s
    out: dict[int, str] = {}
    with _LOCK:
        try:
            pdf = pdfium.PdfDocument(str(path))
        except Exception:
            return {}
        try:
            for n in page_numbers:
                if time.monotonic() > deadline:
                    break
                try:
                    page = pdf[n]
                except Exception:
                    continue
                textpage = None
                try:
                    textpage = page.get_textpage()
                    text = _page_text(raw, page.raw, textpage, deadline, table_lines)
                except OutOfTime:
                    break
                except Exception:  # a page pdfium cannot take apart keeps its text layer
                    text = None
                finally:
                    if textpage is not None:
                        textpage.close()
                    page.close()
                if text is not None:
                    out[n] = text
        finally:
            pdf.close()
    return out

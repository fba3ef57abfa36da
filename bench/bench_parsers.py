"""Parse time against file size for every format, on ordinary and adversarial content, from
10 kB to 10 MB: a parser linear in its input takes about 10 times longer for a file 10 times
bigger; a quadratic one, about 100 times.

    python bench/bench_parsers.py [--sizes 10000,100000,1000000,10000000] [--formats md,html,...]

Each row is the best of `--repeats` parses (in this process, with no budget). `growth` is the
time ratio between consecutive sizes divided by their size ratio (of the content: DOCX and PDF
files are compressed): about 1 for linear growth, about 10 for quadratic growth at 10x steps.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, procedure_text  # noqa: E402

from sourcegate.ingest.parsers import IngestError, parse_file  # noqa: E402


def _prose(size: int, seed: int = 3) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out, total = [], 0
    while total < size:
        title, body = procedure_text(rng)
        out.append((title, body))
        total += len(title) + len(body) + 4
    return out


def _repeat(unit: str, size: int, head: str = "", tail: str = "") -> str:
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def _with_body(template: bytes, body: str) -> bytes:
    """A copy of the DOCX `template` whose document body is `body` (WordprocessingML paragraphs)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(template)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "word/document.xml":
                xml = data.decode("utf-8")
                start = xml.index("<w:body>") + len("<w:body>")
                data = (xml[:start] + body + xml[xml.index("<w:sectPr", start):]).encode("utf-8")
            dst.writestr(item, data)
    return out.getvalue()


def ordinary(fmt: str, size: int) -> bytes:
    docs = _prose(size)
    if fmt == "txt":
        return "\n\n".join(f"{t}\n\n{b}" for t, b in docs).encode()
    if fmt == "md":
        return "\n\n".join(f"## {t}\n\n{b.replace('Note.', '**Note.** See [the manual](http://x/m.pdf).')}"
                           for t, b in docs).encode()
    if fmt == "html":
        body = "".join(f"<h2>{t}</h2>" + "".join(f"<p>{p}</p>" for p in b.split("\n\n")) for t, b in docs)
        return f"<html><head><title>Procedures</title></head><body>{body}</body></html>".encode()
    if fmt == "json":
        return json.dumps([{"id": f"P-{i}", "title": t, "text": b} for i, (t, b) in enumerate(docs)]).encode()
    if fmt == "docx":  # python-docx's template, its body replaced (add_paragraph is too slow for 10 MB)
        import docx
        from xml.sax.saxutils import escape

        buf = io.BytesIO()
        docx.Document().save(buf)
        body = "".join(f'<w:p><w:pPr><w:pStyle w:val="Heading2"/></w:pPr><w:r><w:t>{escape(t)}</w:t></w:r></w:p>'
                       + "".join(f'<w:p><w:r><w:t xml:space="preserve">{escape(p)}</w:t></w:r></w:p>'
                                 for p in b.split("\n\n"))
                       for t, b in docs)
        return _with_body(buf.getvalue(), body)
    if fmt == "pdf":
        from reportlab.pdfgen import canvas

        buf = io.BytesIO()
        c = canvas.Canvas(buf)
        text = " ".join(b for _, b in docs)
        for start in range(0, len(text), 3000):  # ~3 kB of text per page, 30 lines of 100
            y = 800
            for line in range(start, min(start + 3000, len(text)), 100):
                c.drawString(30, y, text[line:line + 100])
                y -= 25
            c.showPage()
        c.save()
        return buf.getvalue()
    raise ValueError(fmt)


def adversarial(fmt: str, size: int) -> bytes | None:
    """Content that makes naive parsers quadratic or recursive, `size` bytes of it."""
    if fmt == "md":  # lines of unclosed link brackets (19,000 a line, under the long-line cap)
        return _repeat("[" * 19_000 + "\n", size, head="# Brackets\n\nGrease the pump.\n\n").encode()
    if fmt == "html":  # unclosed tags
        return _repeat("<a ", size, head="<p>Grease the pump.</p>").encode()
    if fmt == "txt":  # not UTF-8: the encoding is detected
        return _repeat("Graissez la pompe tous les trois mois, vérifiez l'étanchéité. ", size).encode("latin-1")
    if fmt == "json":  # one passage whose text is one long line of brackets and quotes
        return json.dumps([{"id": "x", "title": "x", "text": _repeat('[("', size - 40)}]).encode()
    if fmt == "docx":  # one paragraph of tiny runs (the shape of the 248 MB DOCX)
        import docx

        buf = io.BytesIO()
        docx.Document().save(buf)
        return _with_body(buf.getvalue(), "<w:p>" + _repeat("<w:r><w:t>x </w:t></w:r>", size) + "</w:p>")
    if fmt == "pdf":  # every page one ruled table of 30 rows (each page goes to the table extractor)
        from reportlab.pdfgen import canvas

        buf = io.BytesIO()
        c = canvas.Canvas(buf)
        text = _repeat("Replace the seal | every 250 runs | 0.5 g ", size)
        for start in range(0, len(text), 3000):
            cells = [text[i:i + 33] for i in range(start, min(start + 3000, len(text)), 33)]
            rows = [cells[i:i + 3] for i in range(0, len(cells), 3)]
            for r, row in enumerate(rows):
                y = 800 - 25 * r
                for col, cell in enumerate(row):
                    c.rect(30 + 180 * col, y - 7, 180, 25)
                    c.drawString(34 + 180 * col, y, cell)
            c.showPage()
        c.save()
        return buf.getvalue()
    return None


def timed_parse(path: Path, repeats: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        try:
            docs = parse_file(path, path.name)
            outcome = f"{sum(len(d.text) for d in docs):,} chars"
        except IngestError as e:
            outcome = f"refused: {e}"
        best = min(best, time.perf_counter() - t0)
    return best, outcome


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000,10000000")
    ap.add_argument("--formats", default="txt,md,html,json,docx,pdf")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="sg-bench-parsers-"))
    for fmt in args.formats.split(","):
        for kind, make in (("ordinary", ordinary), ("adversarial", adversarial)):
            prev = None
            for size in sizes:
                data = make(fmt, size)
                if data is None:
                    break
                path = tmp / f"{kind}-{size}.{fmt}"
                path.write_bytes(data)
                seconds, outcome = timed_parse(path, args.repeats)
                # Against the content's size: a DOCX or PDF file is compressed.
                growth = None
                if prev is not None and prev[1] > 0.002:
                    growth = round((seconds / prev[1]) / (size / prev[0]), 2)
                rows.append({"format": fmt, "kind": kind, "size": size, "bytes": len(data), "seconds": round(seconds, 4),
                             "mb_per_s": round(len(data) / 1e6 / seconds, 2) if seconds else None,
                             "growth": growth, "outcome": outcome[:80]})
                prev = (size, seconds)
                print(f"{fmt:5} {kind:11} {size:>11,} ({len(data):>11,} B) {seconds:8.3f} s  growth {growth}  {outcome[:60]}",
                      file=sys.stderr, flush=True)
                path.unlink()
    growths = [r["growth"] for r in rows if r["growth"] is not None]
    emit("parsers", {"rows": rows}, f"{len(rows)} parses; worst growth per 10x size {max(growths):.2f} "
                                    f"(1 = linear, 10 = quadratic)")


if __name__ == "__main__":
    main()

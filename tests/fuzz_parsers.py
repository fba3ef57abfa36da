"""Fuzzing the parsers: seeds of every format, mutations, and a time and memory budget per file.

Shared by the short run in the test suite (tests/test_parsers_fuzz.py) and the longer one
(bench/bench_fuzz.py). A parser may return documents or raise IngestError; anything else, or a
file that takes longer than the time budget or more than the memory budget, is a failure,
reported as one line naming the saved file.
"""

from __future__ import annotations

import functools
import io
import json
import signal
import threading
import time
import tracemalloc
import zipfile
from dataclasses import dataclass
from pathlib import Path

from sourcegate.ingest.parsers import IngestError, parse_file

TIME_BUDGET_S = 10.0
MEMORY_BUDGET_MB = 256


@functools.lru_cache(maxsize=1)
def seeds() -> dict[str, bytes]:
    """One small valid file per format (suffix -> bytes)."""
    out = {
        ".txt": "Pump P-200\n\nGrease the bearings every 2,000 hours.\nCheck the seal for leaks.\n".encode(),
        ".md": b"# Pump P-200\n\n## Lubrication\n\nGrease the *bearings* every [2,000 h](x).\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
        ".html": (b"<html><head><title>P-200</title></head><body><h1>Pump</h1><p>Grease the bearings.</p>"
                  b"<ul><li>Check the seal</li></ul><table><tr><td>25 N.m</td></tr></table></body></html>"),
        ".json": json.dumps([{"id": "P-1", "title": "Pump", "text": "Grease the bearings.", "status": "current"},
                             {"id": "P-2", "title": "Valve", "text": "Exercise the valve.", "version": 2}]).encode(),
    }
    import docx

    d = docx.Document()
    d.add_heading("Pump P-200", level=1)
    d.add_paragraph("Grease the bearings every 2,000 hours.")
    table = d.add_table(rows=1, cols=2)
    table.rows[0].cells[0].text, table.rows[0].cells[1].text = "torque", "25 N.m"
    buf = io.BytesIO()
    d.save(buf)
    out[".docx"] = buf.getvalue()
    try:
        from reportlab.pdfgen import canvas

        buf = io.BytesIO()
        c = canvas.Canvas(buf)
        c.drawString(72, 720, "Pump P-200: grease the bearings every 2,000 hours.")
        c.showPage()
        c.drawString(72, 720, "Page two: check the seal.")
        c.save()
        out[".pdf"] = buf.getvalue()
    except ImportError:  # the test extra brings reportlab
        pass
    return out


@functools.lru_cache(maxsize=1)
def hostile() -> dict[str, tuple[str, bytes]]:
    """Named hostile files: name -> (suffix, bytes)."""
    files: dict[str, tuple[str, bytes]] = {}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"<w:document>" + b" " * (1024 * 1024) + b"</w:document>")
    bomb = bytearray(buf.getvalue())
    # Declare 3.9 GB inflated in the central directory (as a real bomb does), without spending the
    # CPU to deflate that much here.
    at = bomb.rfind(b"PK\x01\x02")
    bomb[at + 24:at + 28] = (0xF0000000).to_bytes(4, "little")
    files["zip-bomb"] = (".docx", bytes(bomb))
    files["nested-html"] = (".html", b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000 + b"</body></html>")
    files["unclosed-nested-html"] = (".html", b"<p><b><i><span>" * 50_000 + b"text")
    files["huge-line-txt"] = (".txt", b"grease " * 1_000_000)
    files["huge-line-md"] = (".md", b"*" * 2_000_000 + b"grease")
    files["md-nested-quotes"] = (".md", b">" * 100_000 + b" deep\n")
    files["md-nested-lists"] = (".md", b"".join(b"  " * i + b"- item\n" for i in range(2000)))
    files["invalid-utf8"] = (".txt", b"Grease \xff\xfe\xfd the \xc3\x28 bearings \xa0\xa1 " * 2000)
    files["utf16-no-bom"] = (".txt", "Grease the bearings every 2,000 hours. ".encode("utf-16-le") * 200)
    files["utf16-no-bom-html"] = (".html", "<p>Grease the bearings.</p>".encode("utf-16-be") * 200)
    files["md-link-brackets"] = (".md", b"# Brackets\n\n" + (b"[" * 19_000 + b"\n") * 10)
    files["md-link-targets"] = (".md", b"# Targets\n\n" + (b"[a](" * 4_000 + b"\n") * 10)
    files["html-unclosed-anchors"] = (".html", b"<p>x</p>" + b"<a " * 10_000)
    files["html-unclosed-scripts"] = (".html", b"<p>x</p>" + b"<script>" * 10_000 + b"<title>" * 10_000)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("word/document.xml", b"<w:document>" + b"<w:r><w:t>x</w:t></w:r>" * 40_000 + b"</w:document>")
    huge_xml = bytearray(buf.getvalue())
    # The document's XML declared at 248 MB, under the zip-bomb cap (as in a real DOCX that
    # python-docx would load whole, at 1.7 GB).
    at = huge_xml.rfind(b"PK\x01\x02")
    huge_xml[at + 24:at + 28] = (248 * 1024 * 1024).to_bytes(4, "little")
    files["docx-huge-xml"] = (".docx", bytes(huge_xml))
    files["deep-json"] = (".json", b"[" * 100_000 + b"]" * 100_000)
    files["json-huge-number"] = (".json", b'[{"id": 1, "text": "x", "version": 1' + b"0" * 100_000 + b"}]")
    pdf = seeds().get(".pdf")
    if pdf:
        head, _, _ = pdf.rpartition(b"xref")
        files["pdf-broken-xref"] = (".pdf", head + b"xref\n0 9999999\nnot a table\ntrailer\n<< /Size 3 /Root 99 0 R >>\n"
                                           b"startxref\n12\n%%EOF\n")
        files["pdf-truncated"] = (".pdf", pdf[: len(pdf) // 2])
        files["pdf-loop"] = (".pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
                                     b"2 0 obj << /Type /Pages /Kids [2 0 R] /Count 1 >> endobj\n"
                                     b"trailer << /Root 1 0 R >>\n%%EOF\n")
    return files


# Bodies of POST /v1/ask: valid ones to mutate, and hostile ones (deep, huge, invalid Unicode).
ASK_BODY_SEEDS = [
    b'{"query": "How often should I grease the bearings on pump P-200?"}',
    b'{"query": "P-200 \\u00e9 \\ud83d\\ude00", "extra": [1, 2.5, null, true, {"a": "b"}]}',
]
HOSTILE_ASK_BODIES = {
    "nested-arrays": b'{"query": "x", "n": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
    "nested-objects": b'{"query": "x", "n": ' + b'{"a":' * 30_000 + b"1" + b"}" * 30_000 + b"}",
    "huge-integer": b'{"query": "pump", "n": ' + b"9" * 5_000 + b"}",
    "huge-float": b'{"query": "pump", "n": 1e999999}',
    "lone-surrogate": b'{"query": "P-200 \\ud800"}',
    "low-surrogate": b'{"query": "\\udfff bearings"}',
    "invalid-utf8": b'{"query": "P-200 \xff\xfe"}',
    "nul-bytes": b'{"query": "P-200\\u0000\\u0000"}',
    "bom": b'\xef\xbb\xbf{"query": "P-200"}',
    "utf16": '{"query": "P-200"}'.encode("utf-16"),
    "top-level-string": b'"P-200"',
    "empty": b"",
}


def mutate(data: bytes, ops: list[tuple[int, int, int, bytes]]) -> bytes:
    """Apply (kind, position, length, payload) mutations: flip, insert, delete, truncate, repeat."""
    out = bytearray(data)
    for kind, pos, length, payload in ops:
        if not out:
            out += payload
            continue
        pos %= len(out)
        if kind == 0:
            out[pos] ^= (length % 255) + 1
        elif kind == 1:
            out[pos:pos] = payload
        elif kind == 2:
            del out[pos:pos + length]
        elif kind == 3:
            del out[pos:]
        else:
            out[pos:pos] = bytes(out[pos:pos + length]) * 8
    return bytes(out)


class _OverTime(BaseException):
    pass


@dataclass
class Outcome:
    ok: bool
    line: str
    seconds: float
    peak_mb: float


def run_one(path: Path, time_budget_s: float = TIME_BUDGET_S, memory_budget_mb: float = MEMORY_BUDGET_MB) -> Outcome:
    """Parse `path` within the budgets. The time budget is CPU time (a busy machine does not make
    a parser fail), enforced with SIGPROF in the main thread and only measured elsewhere."""
    main = threading.current_thread() is threading.main_thread()

    def on_alarm(signum, frame):
        raise _OverTime

    previous = signal.signal(signal.SIGPROF, on_alarm) if main else None
    tracemalloc.start()
    t0 = time.process_time()
    error: str | None = None
    try:
        if main:
            signal.setitimer(signal.ITIMER_PROF, time_budget_s)
        try:
            parse_file(path, path.name)
        finally:
            if main:
                signal.setitimer(signal.ITIMER_PROF, 0)
    except IngestError:
        pass
    except _OverTime:
        error = f"over the {time_budget_s:g} s CPU time budget"
    except RecursionError:
        error = "crash: RecursionError"
    except Exception as e:  # noqa: BLE001 - the point is to catch every crash
        error = f"crash: {type(e).__name__}: {str(e)[:160]}"
    finally:
        seconds = time.process_time() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        if main:
            signal.signal(signal.SIGPROF, previous)
    peak_mb = peak / 1e6
    if error is None and seconds > time_budget_s:
        error = f"over the {time_budget_s:g} s CPU time budget ({seconds:.1f} s)"
    if error is None and peak_mb > memory_budget_mb:
        error = f"over the {memory_budget_mb:g} MB memory budget ({peak_mb:.0f} MB)"
    line = f"{path}: " + (error or f"ok in {seconds:.2f} s CPU, {peak_mb:.0f} MB")
    return Outcome(error is None, line, seconds, peak_mb)

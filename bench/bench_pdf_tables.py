"""Ruled-table PDFs: the time to parse a ~1 MB PDF whose every page is a ruled table, and
whether every row comes out as a row.

    python bench/bench_pdf_tables.py [--rows 14000] [--repeats 1] [--keep FILE.pdf]

The PDF is drawn with reportlab: each page a title line, a table of 30 rows of four ruled cells
(one rectangle a cell, as reportlab's canvas and many report writers draw them) and a note under
it. Each row starts with its own id (`R-00042`), so the rows read back as rows (`R-00042 | Replace
the seal | ...`) are counted exactly. Prints the text layer alone (pypdf, the floor any table
reading adds to), the whole `parse_file` (text layer, hidden text, tables), best of `--repeats`,
and the rows found against the rows drawn.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit  # noqa: E402

from sourcegate.ingest.parsers import parse_file  # noqa: E402

TASKS = ["Replace the seal", "Grease the bearing", "Check the belt tension", "Clean the strainer",
         "Inspect the impeller", "Test the trip relay", "Drain the condensate", "Torque the flange bolts"]
INTERVALS = ["every 250 runs", "every 500 hours", "monthly", "every 2,000 hours", "weekly", "yearly"]
AMOUNTS = ["0.5 g NLGI 2", "12 N·m", "2 L ISO VG 68", "none", "3 mm deflection", "40 bar test"]
ROWS_A_PAGE = 30


def row(i: int) -> list[str]:
    return [f"R-{i:05d}", TASKS[i % len(TASKS)], INTERVALS[i % len(INTERVALS)], AMOUNTS[i % len(AMOUNTS)]]


def build(path: Path, rows: int) -> None:
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    widths = [80, 170, 130, 130]
    for start in range(0, rows, ROWS_A_PAGE):
        c.setFont("Helvetica-Bold", 14)
        c.drawString(30, 805, f"Maintenance schedule, sheet {start // ROWS_A_PAGE + 1}")
        c.setFont("Helvetica", 10)
        y = 770
        for i in range(start, min(start + ROWS_A_PAGE, rows)):
            x = 30
            for w, cell in zip(widths, row(i)):
                c.rect(x, y - 7, w, 24)
                c.drawString(x + 4, y, cell)
                x += w
            y -= 24
        c.drawString(30, y - 10, "Record each task in the log book of the station.")
        c.showPage()
    c.save()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=14000, help="table rows in all (30 a page; 14,000 give ~1 MB)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--keep", help="also write the PDF here")
    args = ap.parse_args()
    path = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="sg-bench-pdf-")) / "ruled.pdf"
    build(path, args.rows)
    from pypdf import PdfReader

    t0 = time.perf_counter()
    reader = PdfReader(str(path))
    for page in reader.pages:
        page.extract_text()
    text_layer = time.perf_counter() - t0
    best, text = float("inf"), ""
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        text = parse_file(path, path.name)[0].text
        best = min(best, time.perf_counter() - t0)
    found = re.findall(r"^R-(\d{5}) \| ", text, flags=re.M)
    drawn = [r for r in (row(i) for i in range(args.rows))]
    whole = sum(1 for r in drawn if " | ".join(r) in text)
    data = {"bytes": path.stat().st_size, "pages": len(reader.pages), "rows_drawn": args.rows,
            "rows_found": len(set(found)), "rows_whole": whole, "text_layer_s": round(text_layer, 3),
            "parse_s": round(best, 3)}
    emit("pdf_tables", data, f"{data['bytes'] / 1e6:.2f} MB, {data['pages']} pages: parse {best:.2f} s "
                             f"(text layer alone {text_layer:.2f} s); rows read as rows {whole:,} of {args.rows:,}")


if __name__ == "__main__":
    main()

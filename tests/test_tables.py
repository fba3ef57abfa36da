"""Tables in DOCX and PDF read row by row like Markdown's (`Task | Interval`, then `Oil change |
5,000 operating hours`), where they stand in the document, and a row quoted word for word with its
header after it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sourcegate.answer import is_label, quote_text, quoted, table_header
from sourcegate.cli import cli
from sourcegate.ingest import parsers
from sourcegate.ingest.chunker import chunk_document
from sourcegate.ingest.parsers import parse_file, table_lines
from sourcegate.judges.base import JudgeInput, Judgement, PassageJudgement
from sourcegate.models import Candidate, PassageScores
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

DOCX_ROWS = [("Task", "Interval"), ("Oil change", "5,000 operating hours"),
             ("Air filter replacement", "2,000 operating hours"), ("Belt tension check", "500 operating hours")]
PDF_ROWS = [("Task", "Interval"), ("Fuel filter replacement", "750 operating hours"),
            ("Coolant change", "3,000 operating hours"), ("Battery check", "250 operating hours")]


def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Compressor AC-300 service manual", level=1)
    d.add_paragraph("This manual covers the AC-300 air-cooled screw compressor of the workshop.")
    d.add_heading("Maintenance schedule", level=2)
    d.add_paragraph("Service the compressor at the intervals below.")
    table = d.add_table(rows=0, cols=2)
    for a, b in DOCX_ROWS:
        row = table.add_row()
        row.cells[0].text, row.cells[1].text = a, b
    d.add_heading("Safety", level=2)
    d.add_paragraph("Isolate the compressor from the mains before opening any panel.")
    d.core_properties.title = "Compressor AC-300 service manual"
    d.save(str(path))
    return path


def make_pdf(path: Path) -> Path:
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer, Table, TableStyle

    st = getSampleStyleSheet()
    table = Table([list(r) for r in PDF_ROWS])
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black)]))
    SimpleDocTemplate(str(path), pagesize=A4, title="Generator G-5 maintenance").build([
        Paragraph("Generator G-5 maintenance", st["Title"]),
        Paragraph("Service the G-5 generator at the intervals in the table below.", st["Normal"]),
        Spacer(1, 12), table, Spacer(1, 12),
        Paragraph("Record every service in the generator log book.", st["Normal"])])
    return path


def test_table_lines():
    assert table_lines([["Task", "Interval"], [" Oil\nchange ", "5,000 h"], ["", None], ["Merged", "Merged"]]) == [
        "Task | Interval", "Oil change | 5,000 h", "Merged"]


def test_a_docx_table_is_read_row_by_row_under_its_heading(tmp_path):
    doc = parse_file(make_docx(tmp_path / "ac300.docx"), "ac300.docx")[0]
    assert ("Service the compressor at the intervals below.\n\nTask | Interval\n\nOil change | 5,000 operating hours\n\n"
            "Air filter replacement | 2,000 operating hours\n\nBelt tension check | 500 operating hours\n\nSafety") in doc.text
    table_chunk = next(c for c in chunk_document(doc) if "Oil change" in c.text)
    assert table_chunk.heading == "Compressor AC-300 service manual > Maintenance schedule"


def test_a_ruled_pdf_table_is_read_row_by_row_where_it_stands(tmp_path):
    doc = parse_file(make_pdf(tmp_path / "g5.pdf"), "g5.pdf")[0]
    assert ("Service the G-5 generator at the intervals in the table below.\n\nTask | Interval\n\n"
            "Fuel filter replacement | 750 operating hours\n\nCoolant change | 3,000 operating hours\n\n"
            "Battery check | 250 operating hours\n\nRecord every service in the generator log book.") in doc.text


def test_pages_without_lines_never_reach_the_table_extractor(tmp_path, monkeypatch):
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(tmp_path / "plain.pdf"))
    c.drawString(40, 800, "Replace the seal every 250 runs.")
    c.showPage()
    c.save()
    monkeypatch.setattr(parsers, "_pdf_pages_with_tables", lambda *a: pytest.fail("table extractor called"))
    assert "every 250 runs" in parse_file(tmp_path / "plain.pdf", "plain.pdf")[0].text


def test_a_row_is_quoted_with_its_header():
    text = "Maintenance schedule\n\nTask | Interval\n\nOil change | 5,000 operating hours\n\nBelt check | 500 hours"
    assert is_label("Task | Interval") and not is_label("Oil change | 5,000 operating hours")
    assert table_header(text, "Belt check | 500 hours") == "Task | Interval"
    assert table_header(text, "Maintenance schedule") is None
    c = Candidate(id="m#0", doc_id="m", title="Manual", text=text)
    assert quoted("What is the oil change interval?", c, 1) == ["Oil change | 5,000 operating hours"]
    # the row word for word between quotation marks, its header after them
    assert quote_text(c, "Oil change | 5,000 operating hours") == '"Oil change | 5,000 operating hours" (Task | Interval)'
    assert quote_text(c, "Maintenance schedule") == '"Maintenance schedule"'


class RowJudge:
    """Evidence for the passages that hold the asked row."""

    name = "row-test"

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        word = "Oil change" if "oil" in query else "Coolant change"
        return Judgement(model="row-test-1", results=[PassageJudgement(p.id, PassageScores(
            is_relevant=0.95 if word in p.text else 0.05, contains_answer_evidence=0.9 if word in p.text else 0.05,
            contradicts_query_premise=0.02, contains_prompt_injection=0.02, is_superseded=0.02)) for p in passages])


@pytest.mark.parametrize("question, quote, where", [
    ("What is the oil change interval of the AC-300?", "Oil change | 5,000 operating hours",
     "§ Compressor AC-300 service manual > Maintenance schedule"),
    ("What is the coolant change interval of the G-5 generator?", "Coolant change | 3,000 operating hours",
     "p. 1"),
])
def test_a_table_row_answers_a_question_about_its_value(tmp_path, question, quote, where):
    lib = tmp_path / "lib"
    lib.mkdir()
    make_docx(lib / "ac300.docx")
    make_pdf(lib / "g5.pdf")
    r = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "ingest", str(lib)])
    assert r.exit_code == 0, r.output
    gate = SourceGate(Settings(_env_file=None, home=tmp_path / "home", audit_log_path=tmp_path / "a.jsonl"),
                      judge=RowJudge())
    try:
        result = gate.ask(question)
    finally:
        gate.close()
    assert result.status == "answer_from_evidence"
    first = next(line for line in result.answer.splitlines() if line.startswith("- "))
    assert first == f'- "{quote}" (Task | Interval) [1]'
    assert where in result.answer


def _row_id(i: int) -> str:
    return f"R-{i:04d}"


def _cells_a_rectangle_each(path: Path, rows: int) -> Path:
    """Pages of a ruled table drawn one rectangle a cell (reportlab's canvas, many report writers),
    a title above each and a note below."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    for start in range(0, rows, 30):
        c.drawString(30, 805, "Strainer schedule")
        y = 770
        for i in range(start, min(start + 30, rows)):
            x = 30
            for w, cell in zip([80, 170, 130], [_row_id(i), "Clean the strainer", f"every {i} days"]):
                c.rect(x, y - 7, w, 24)
                c.drawString(x + 4, y, cell)
                x += w
            y -= 24
        c.drawString(30, y - 10, "Record each cleaning in the log book.")
        c.showPage()
    c.save()
    return path


def _platypus_grid(path: Path, rows: int) -> Path:
    """A reportlab table over several pages: its header repeated, some cells wrapped on two lines."""
    from reportlab.lib import colors
    from reportlab.lib.styles import getSampleStyleSheet
    from reportlab.platypus import Paragraph, SimpleDocTemplate, Table, TableStyle

    st = getSampleStyleSheet()
    data = [["Id", "Task", "Interval"]] + [
        [_row_id(i), Paragraph(f"Replace the seal of pump P-{i} and check the coupling alignment after the first run",
                               st["Normal"]) if i % 7 == 0 else "Grease the bearing", f"{i} hours"]
        for i in range(rows)]
    table = Table(data, repeatRows=1, colWidths=[60, 250, 100])
    table.setStyle(TableStyle([("GRID", (0, 0), (-1, -1), 0.5, colors.black),
                               ("BACKGROUND", (0, 0), (-1, 0), colors.lightgrey)]))
    SimpleDocTemplate(str(path)).build([Paragraph("Pump schedule", st["Title"]), table,
                                        Paragraph("End of the schedule.", st["Normal"])])
    return path


def _lines_on_a_turned_page(path: Path, rows: int) -> Path:
    """A grid of stroked lines on a page shown turned a quarter (/Rotate 90), its text drawn
    upright in the page's own space."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    c.setPageRotation(90)
    # the grid within the page's MediaBox as reportlab writes it for a turned page (842 x 595): text
    # drawn outside it is off the page, and a viewer does not show it
    xs, top = [30, 110, 280, 410], 570
    ys = [top - 15 * i for i in range(rows + 1)]
    for y in ys:
        c.line(xs[0], y, xs[-1], y)
    for x in xs:
        c.line(x, ys[-1], x, top)
    for i in range(rows):
        for x, cell in zip(xs, [_row_id(i), "Clean the strainer", f"{i} days"]):
            c.drawString(x + 4, ys[i] - 11, cell)
    c.showPage()
    c.save()
    return path


@pytest.mark.parametrize("make, rows", [(_cells_a_rectangle_each, 95), (_platypus_grid, 130),
                                        (_lines_on_a_turned_page, 36)])
def test_no_ruled_table_row_is_lost(tmp_path, make, rows):
    text = parse_file(make(tmp_path / "t.pdf", rows), "t.pdf")[0].text
    read = [line for line in text.split("\n\n") if line.startswith("R-")]
    # every row read once, as a row: its id, then its other cells on the same line
    assert sorted(line.split(" | ")[0] for line in read) == [_row_id(i) for i in range(rows)]
    assert all(line.count(" | ") == 2 for line in read)
    assert "R-0007 | Replace the seal of pump P-7 and check the coupling alignment after the first run | 7 hours" in text \
        or make is not _platypus_grid


def test_the_pdf_table_budget_is_checked_inside_a_page(tmp_path, monkeypatch):
    """A page whose table reading runs past the budget keeps its text layer: the budget is not
    only looked at between pages."""
    import time

    calls = []
    real = parsers._pdf_pages_with_tables

    def clock() -> float:  # the budget is set and the first page begins at 0; then time is up
        calls.append(1)
        return 0.0 if len(calls) <= 2 else 1e6

    def with_clock(*args):
        monotonic, time.monotonic = time.monotonic, clock
        try:
            return real(*args)
        finally:
            time.monotonic = monotonic

    monkeypatch.setattr(parsers, "_pdf_pages_with_tables", with_clock)
    text = parse_file(make_pdf(tmp_path / "g5.pdf"), "g5.pdf")[0].text
    assert "Task | Interval" not in text
    assert "Fuel filter replacement" in text and "Coolant change" in text  # the text layer
    assert len(calls) > 2

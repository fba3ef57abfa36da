"""Text a person cannot see is not indexed, so it is never quoted: a document that says "every
2,000 hours" to its readers and "every 20,000 hours" in hidden text is answered from what it shows.
Real files of each format: HTML (`hidden`, `display: none`, `visibility: hidden`, in a tree and in
markup too deep for one), DOCX (`w:vanish` on a run, a character style, a paragraph style, a table
cell) and PDF (render mode 3, white text on the white page); what stays visible is kept (a scan's
OCR layer, white text on a coloured box, a class merely named "hidden")."""

from __future__ import annotations

import json

import pytest
from test_server_fixtures import KeywordJudge

from sourcegate.cli import run_ingest
from sourcegate.ingest.parsers import parse_docx, parse_html, parse_pdf
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

SHOWN = "Grease the P-300 bearings every 2,000 hours."
HIDDEN = "Grease the P-300 bearings every 20,000 hours."


def _html(path, deep: bool = False):
    body = f"""<p>{SHOWN}</p>
<p style="color: red; display:none">{HIDDEN} (display)</p>
<div hidden><p>{HIDDEN} (attribute)</p></div>
<span style='visibility: hidden !important'>{HIDDEN} (visibility)</span>
<section style="DISPLAY : NONE"><div><p>{HIDDEN} (nested)</p></div></section>
<p class="hidden-sm" data-note="x hidden y">Stop the pump first.</p>"""
    if not deep:  # a class hidden by the page's stylesheet (read with the tree only)
        body = ("<style>/* x */ .muted { color: grey } .sr, #legal > p { visibility : hidden } "
                f"@media print {{ .x {{ display: block }} }}</style>{body}<p class='sr'>{HIDDEN} (class)</p>"
                f"<div id='legal'><p>{HIDDEN} (id)</p></div><p class='muted'>Check the seals.</p>")
    if deep:  # past the nesting limit the page is read as text, without a tree
        body = "<div>" * 300 + body + "</div>" * 300
    path.write_text(f"<html><head><title>P-300</title></head><body>{body}</body></html>", encoding="utf-8")
    return path


@pytest.mark.parametrize("deep", [False, True])
def test_hidden_html_is_not_read(tmp_path, deep):
    text = parse_html(_html(tmp_path / "p.html", deep), "p.html")[0].text
    assert SHOWN in text and "Stop the pump first." in text
    assert deep or "Check the seals." in text
    assert "20,000" not in text, text


def _docx(path):
    import docx

    d = docx.Document()
    p = d.add_paragraph(SHOWN)
    p.add_run(f" {HIDDEN} (run)").font.hidden = True
    char = d.styles.add_style("SecretChars", 2)  # character style
    char.font.hidden = True
    d.add_paragraph().add_run(f"{HIDDEN} (character style)", style="SecretChars")
    para = d.styles.add_style("SecretParagraph", 1)
    para.font.hidden = True
    based = d.styles.add_style("SecretToo", 1)
    based.base_style = para
    d.add_paragraph(f"{HIDDEN} (paragraph style)", style="SecretParagraph")
    d.add_paragraph(f"{HIDDEN} (based on a hidden style)", style="SecretToo")
    shown = d.add_paragraph(style="SecretParagraph").add_run("Stop the pump first.")
    shown.font.hidden = False  # the run says otherwise: shown
    table = d.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Interval"
    cell = table.cell(0, 1).paragraphs[0]
    cell.add_run("2,000 h")
    cell.add_run(" 20,000 h").font.hidden = True
    d.save(path)
    return path


def test_hidden_docx_runs_are_not_read(tmp_path):
    text = parse_docx(_docx(tmp_path / "p.docx"), "p.docx")[0].text
    assert SHOWN in text and "Stop the pump first." in text and "Interval | 2,000 h" in text
    assert "20,000" not in text, text


def _pdf(path):
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    c.drawString(72, 720, SHOWN)
    c.saveState()
    t = c.beginText(72, 700)
    t.setTextRenderMode(3)
    t.textLine(f"{HIDDEN} (render mode 3)")
    c.drawText(t)
    c.restoreState()
    c.setFillColorRGB(1, 1, 1)
    c.drawString(72, 680, f"{HIDDEN} (white)")
    c.setFillColorRGB(0, 0, 0)
    c.drawString(72, 660, "Stop the pump first.")
    c.showPage()
    t = c.beginText(72, 700)  # a scan's OCR layer: the only text of its page, invisible over the image
    t.setTextRenderMode(3)
    t.textLine("Scanned: drain the casing before service.")
    c.drawText(t)
    c.showPage()
    c.setFillColorRGB(0, 0, 0.5)
    c.rect(60, 690, 300, 30, fill=1)
    c.setFillColorRGB(1, 1, 1)
    c.drawString(72, 700, "White on a blue banner: P-300 service.")
    c.save()
    return path


def test_invisible_pdf_text_is_not_read(tmp_path):
    text = parse_pdf(_pdf(tmp_path / "p.pdf"), "p.pdf")[0].text
    assert SHOWN in text and "Stop the pump first." in text
    assert "Scanned: drain the casing" in text and "White on a blue banner" in text
    assert "20,000" not in text, text


def test_a_hidden_value_is_never_quoted(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    _html(lib / "p300.html")
    _docx(lib / "p300.docx")
    _pdf(lib / "p300.pdf")
    settings = Settings(_env_file=None, home=tmp_path / "home", audit_log_path=tmp_path / "audit.jsonl")
    report = run_ingest(settings, [lib], prune=False, quiet=True)
    assert not report.failed, report.failed
    gate = SourceGate(settings, judge=KeywordJudge())
    try:
        result = gate.ask("How often should I grease the P-300 bearings?")
    finally:
        gate.close()
    assert result.status == "answer_from_evidence"
    shown = json.dumps(result.model_dump())
    assert "2,000" in shown and "20,000" not in shown

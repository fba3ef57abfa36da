"""Text a person cannot see is not indexed, so it is never quoted: a document that says "every
2,000 hours" to its readers and "every 20,000 hours" in hidden text is answered from what it shows.
Real files of each format: HTML (`hidden`, `display: none`, `visibility: hidden`, in a tree and in
markup too deep for one), DOCX (`w:vanish` on a run, a character style, a paragraph style, a table
cell) and PDF (render mode 3, white text on the white page); what stays visible is kept (a scan's
OCR layer, white text on a coloured box, a class merely named "hidden")."""

from __future__ import annotations

import json
import re

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
    from PIL import Image

    c.drawInlineImage(Image.new("L", (40, 10), 200), 60, 650, width=400, height=100)  # the scan
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


# -- what a renderer shows: the effective style of each piece of text ----------------------------

# Each style hides the text it holds on a white page (the inline style, or inherited from an
# ancestor): what a browser draws is nothing, or a blank, or something too small or too faint to read.
HTML_HIDING = {
    "opacity": '<p style="opacity:0">{}</p>',
    "opacity of an ancestor": '<div style="opacity: 0.02"><section><p>{}</p></section></div>',
    "font-size 0": '<p style="font-size:0">{}</p>',
    "font-size 1px": '<p style="font-size: 1px">{}</p>',
    "font-size in em of a tiny parent": '<div style="font-size:2px"><p style="font-size:0.5em">{}</p></div>',
    "white on white": '<p style="color:#fff">{}</p>',
    "near white on white": '<p style="color: rgb(250, 250, 252)">{}</p>',
    "named white": '<p style="color: WhiteSmoke">{}</p>',
    "transparent": '<p style="color:transparent">{}</p>',
    "text coloured like its box": '<div style="background:#123456"><p style="color:#123456">{}</p></div>',
    "off-screen left": '<p style="position:absolute; left:-9999px">{}</p>',
    "off-screen top": '<div style="position: fixed; top: -5000px"><p>{}</p></div>',
    "clip": '<p style="position:absolute;clip:rect(0 0 0 0)">{}</p>',
    "clip-path": '<p style="clip-path: inset(50%)">{}</p>',
    "height 0 overflow hidden": '<div style="height:0;overflow:hidden"><p>{}</p></div>',
    "1px box, overflow hidden": '<span style="width:1px;height:1px;overflow:hidden;display:block">{}</span>',
    "scale(0)": '<p style="transform:scale(0)">{}</p>',
    "scaleY(0.01)": '<p style="transform: rotate(2deg) scaleY(0.01)">{}</p>',
    "text-indent": '<p style="text-indent:-9999px">{}</p>',
    "a stylesheet class": '<style>.fine-print {{ font-size: 0.5px }}</style><p class="fine-print">{}</p>',
}


@pytest.mark.parametrize("how", sorted(HTML_HIDING))
def test_html_text_a_renderer_does_not_show_is_not_read(tmp_path, how):
    body = f"<p>{SHOWN}</p>" + HTML_HIDING[how].format(HIDDEN)
    path = tmp_path / "p.html"
    path.write_text(f"<html><head><title>P-300</title></head><body>{body}</body></html>", encoding="utf-8")
    text = parse_html(path, "p.html")[0].text
    assert SHOWN in text
    assert "20,000" not in text, (how, text)


# The same properties with values a reader sees: kept.
HTML_SHOWING = [
    '<p style="opacity:0.85">Check the seals (faded a little).</p>',
    '<p style="font-size: 9px">Check the seals (small print).</p>',
    '<div style="font-size:0"><p style="font-size:14px">Check the seals (size set again).</p></div>',
    '<p style="color:#666">Check the seals (grey).</p>',
    '<div style="background-color:#003366"><p style="color:white">Check the seals (white on blue).</p></div>',
    '<div style="color:#fff"><p style="color:#111">Check the seals (dark inside a white parent).</p></div>',
    '<p style="position:relative; left:-4px">Check the seals (nudged).</p>',
    '<p style="height:0">Check the seals (height 0, overflow visible).</p>',
    '<p style="transform: scale(1.2) translateX(10px)">Check the seals (scaled up).</p>',
    '<p style="text-indent:2em">Check the seals (indented).</p>',
    '<p style="clip: rect(0, 400px, 40px, 0); position:absolute">Check the seals (clipped to a box).</p>',
    '<p style="background:url(x.png); color:#fff">Check the seals (white on an image).</p>',
    '<table><tr><td style="font-size:11pt">Oil</td><td>ISO VG 220</td></tr></table>',
]


def test_html_text_a_renderer_shows_is_read(tmp_path):
    path = tmp_path / "p.html"
    path.write_text(f"<html><body><p>{SHOWN}</p>{''.join(HTML_SHOWING)}</body></html>", encoding="utf-8")
    text = parse_html(path, "p.html")[0].text
    for shown in HTML_SHOWING:
        words = re.sub(r"<[^>]+>", " ", shown).split()
        assert " ".join(words[-3:]) in " ".join(text.split()), (shown, text)


ALONE = ["opacity", "font-size 0", "font-size 1px", "transparent", "off-screen left", "off-screen top", "clip",
         "height 0 overflow hidden", "scale(0)", "text-indent"]


@pytest.mark.parametrize("how", ALONE)
def test_html_too_deep_for_a_tree_drops_styles_that_hide_on_their_own(tmp_path, how):
    body = "<div>" * 300 + f"<p>{SHOWN}</p>" + HTML_HIDING[how].format(HIDDEN) + \
        '<p style="font-size:10pt;color:#222">Stop the pump first.</p>' + "</div>" * 300
    path = tmp_path / "p.html"
    path.write_text(f"<html><body>{body}</body></html>", encoding="utf-8")
    text = parse_html(path, "p.html")[0].text
    assert SHOWN in text and "Stop the pump first." in text
    assert "20,000" not in text, (how, text)


MARKDOWN_HIDING = [
    "<span hidden>{}</span>",
    '<span style="font-size:0">{}</span>',
    '<span style="color: #ffffff">{}</span>',
    '<span style="position:absolute;left:-10000px">{}</span>',
    '<div style="display:none">\n\n{}\n\n</div>',  # Markdown inside a hidden HTML block: hidden too
    '\n\n<details hidden><summary>Old</summary>\n\n- {}\n\n</details>',
]


@pytest.mark.parametrize("how", MARKDOWN_HIDING)
def test_markdown_html_a_renderer_does_not_show_is_not_read(tmp_path, how):
    from sourcegate.ingest.parsers import parse_markdown

    path = tmp_path / "p.md"
    path.write_text(f"# P-300\n\n{SHOWN} " + how.format(HIDDEN) + "\n\nStop the *pump* first.\n", encoding="utf-8")
    doc = parse_markdown(path, "p.md")[0]
    assert SHOWN in doc.text and "Stop the pump first." in doc.text and doc.title == "P-300"
    assert "20,000" not in doc.text, (how, doc.text)


def _docx_styled(path, how: str):
    """A DOCX whose first paragraph is shown, and whose second holds HIDDEN made invisible `how`."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls
    from docx.shared import Pt, RGBColor

    d = docx.Document()
    shown = d.add_paragraph().add_run(SHOWN)
    hidden_p = d.add_paragraph()
    hidden = hidden_p.add_run(HIDDEN)
    if how in ("docDefaults", "Normal style"):
        rpr = (d.styles.element.find(qn("w:docDefaults")).find(qn("w:rPrDefault")).find(qn("w:rPr"))
               if how == "docDefaults" else d.styles["Normal"].element.get_or_add_rPr())
        rpr.append(parse_xml(f"<w:vanish {nsdecls('w')}/>"))
        shown.font.hidden = False  # said otherwise on the run: shown
    elif how == "white":
        hidden.font.color.rgb = RGBColor(0xFF, 0xFF, 0xFF)
    elif how == "near white":
        hidden.font.color.rgb = RGBColor(0xFA, 0xFB, 0xF8)
    elif how == "white by its style":
        st = d.styles.add_style("Ghost", 2)
        st.font.color.rgb = RGBColor(0xFF, 0xFF, 0xFF)
        hidden.style = st
    elif how == "coloured like its shading":
        hidden_p._p.get_or_add_pPr().append(parse_xml(f'<w:shd {nsdecls("w")} w:val="clear" w:fill="1F3864"/>'))
        hidden.font.color.rgb = RGBColor(0x1F, 0x38, 0x64)
    elif how == "0.5 pt":
        hidden.font.size = Pt(0.5)
    elif how == "1 pt by docDefaults":
        d.styles.element.find(qn("w:docDefaults")).find(qn("w:rPrDefault")).find(qn("w:rPr")).append(
            parse_xml(f'<w:sz {nsdecls("w")} w:val="2"/>'))
        shown.font.size = Pt(11)
    d.save(path)
    return path


def qn(tag):
    from docx.oxml.ns import qn as _qn

    return _qn(tag)


DOCX_HIDING = ["docDefaults", "Normal style", "white", "near white", "white by its style", "coloured like its shading",
               "0.5 pt", "1 pt by docDefaults"]


@pytest.mark.parametrize("how", DOCX_HIDING)
def test_docx_text_word_does_not_show_is_not_read(tmp_path, how):
    text = parse_docx(_docx_styled(tmp_path / "p.docx", how), "p.docx")[0].text
    assert SHOWN in text
    assert "20,000" not in text, (how, text)


def test_docx_text_word_shows_is_read(tmp_path):
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls
    from docx.shared import Pt, RGBColor

    d = docx.Document()
    d.add_paragraph().add_run("Grey: check the seals.").font.color.rgb = RGBColor(0x77, 0x77, 0x77)
    d.add_paragraph().add_run("Small: 7 pt print.").font.size = Pt(7)
    p = d.add_paragraph()
    p._p.get_or_add_pPr().append(parse_xml(f'<w:shd {nsdecls("w")} w:val="clear" w:fill="1F3864"/>'))
    p.add_run("White on a dark band.").font.color.rgb = RGBColor(0xFF, 0xFF, 0xFF)
    table = d.add_table(rows=1, cols=2)
    cell = table.cell(0, 1)
    cell._tc.get_or_add_tcPr().append(parse_xml(f'<w:shd {nsdecls("w")} w:val="clear" w:fill="000000"/>'))
    cell.paragraphs[0].add_run("White in a black cell.").font.color.rgb = RGBColor(0xFF, 0xFF, 0xFF)
    table.cell(0, 0).text = "Auto colour."
    d.save(tmp_path / "s.docx")
    text = parse_docx(tmp_path / "s.docx", "s.docx")[0].text
    for shown in ("Grey: check the seals.", "Small: 7 pt print.", "White on a dark band.", "White in a black cell.",
                  "Auto colour."):
        assert shown in text, (shown, text)


def _pdf_hiding(path, how: str):
    """A PDF page with SHOWN and, drawn `how`, HIDDEN; a second page shown."""
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path))
    c.drawString(72, 720, SHOWN)
    t = c.beginText(72, 700)
    if how == "0 Tz":
        t.setHorizScale(0)
    elif how == "white stroke only":
        t.setTextRenderMode(1)
        c.setStrokeColorRGB(1, 1, 1)
    elif how == "near white":
        c.setFillColorRGB(0.97, 0.97, 0.98)
    elif how == "1 pt":
        t.setFont("Helvetica", 1)
    elif how == "scaled to nothing":
        c.saveState()
        c.scale(1, 0.01)
    if how != "an OCR layer without a scan":
        t.textLine(HIDDEN)
        c.drawText(t)
    c.showPage()
    if how == "an OCR layer without a scan":  # the page's only text, invisible, and no image under it
        t = c.beginText(72, 700)
        t.setFont("Helvetica", 12)
        t.setTextRenderMode(3)
        t.textLine(HIDDEN)
        c.drawText(t)
        c.showPage()
    c.drawString(72, 720, "Stop the pump first.")
    c.save()
    return path


PDF_HIDING = ["0 Tz", "white stroke only", "near white", "1 pt", "scaled to nothing", "an OCR layer without a scan"]


@pytest.mark.parametrize("how", PDF_HIDING)
def test_pdf_text_a_viewer_does_not_show_is_not_read(tmp_path, how):
    text = parse_pdf(_pdf_hiding(tmp_path / "p.pdf", how), "p.pdf")[0].text
    assert SHOWN in text and "Stop the pump first." in text
    assert "20,000" not in text, (how, text)


# -- where PDF text is drawn: on the page, inside the clip, not under a later white shape ------------

def _pdf_placed(path, how: str):
    """A PDF page with SHOWN and, hidden by where it is drawn `how`, HIDDEN; a second page shown."""
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=(612, 792))
    c.drawString(72, 720, SHOWN)
    width = stringWidth(HIDDEN, "Helvetica", 12)
    if how == "under a white rectangle":  # painted after the text, just over it, as a viewer draws it
        c.drawString(72, 700, HIDDEN)
        c.setFillColorRGB(1, 1, 1)
        c.rect(70, 696, width + 4, 15, stroke=0, fill=1)
    elif how == "under a white rectangle, moved by cm":
        c.drawString(72, 700, HIDDEN)
        c.saveState()
        c.translate(70, 696)
        c.setFillColorRGB(1, 1, 1)
        c.rect(0, 0, width + 4, 15, stroke=1, fill=1)  # a white box with a black outline
        c.restoreState()
    elif how == "under a near-white rectangle in a TJ line":
        t = c.beginText(72, 700)
        t.textOut("Grease the P-300 bearings ")
        t.textOut("every 20,000 hours.")  # a second show on the line: placed after the first one
        c.drawText(t)
        c.setFillColorRGB(0.98, 0.98, 0.98)
        c.rect(70, 696, width + 4, 15, stroke=0, fill=1)
    elif how == "clipped away":
        c.saveState()
        p = c.beginPath()
        p.rect(300, 100, 200, 200)
        c.clipPath(p, stroke=0, fill=0)
        c.drawString(72, 700, HIDDEN)
        c.restoreState()
    elif how == "clipped away by two clips":  # each clip holds the text; where they overlap does not
        c.saveState()
        for box in ((60, 690, 150, 30), (260, 690, 150, 30)):
            p = c.beginPath()
            p.rect(*box)
            c.clipPath(p, stroke=0, fill=0)
        c.drawString(72, 700, HIDDEN)
        c.restoreState()
    elif how == "off the page, left":
        c.drawString(-500, 700, HIDDEN)
    elif how == "off the page, above":
        c.drawString(72, 1500, HIDDEN)
    elif how == "off the page, moved by cm":
        c.saveState()
        c.translate(0, -2000)
        c.drawString(72, 700, HIDDEN)
        c.restoreState()
    elif how == "outside the crop box":
        c.setCropBox((0, 0, 612, 760))
        c.drawString(72, 770, HIDDEN)
    c.showPage()
    c.drawString(72, 720, "Stop the pump first.")
    c.save()
    return path


PDF_PLACED_HIDING = ["under a white rectangle", "under a white rectangle, moved by cm",
                     "under a near-white rectangle in a TJ line", "clipped away", "clipped away by two clips",
                     "off the page, left", "off the page, above", "off the page, moved by cm", "outside the crop box"]


@pytest.mark.parametrize("how", PDF_PLACED_HIDING)
def test_pdf_text_drawn_where_a_viewer_does_not_show_it_is_not_read(tmp_path, how):
    text = parse_pdf(_pdf_placed(tmp_path / "p.pdf", how), "p.pdf")[0].text
    assert SHOWN in text and "Stop the pump first." in text
    assert "20,000" not in text, (how, text)


def test_pdf_text_drawn_where_a_viewer_shows_it_is_read(tmp_path):
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(tmp_path / "s.pdf"), pagesize=(612, 792))
    c.saveState()  # the whole page clipped to itself, as many producers do
    p = c.beginPath()
    p.rect(0, 0, 612, 792)
    c.clipPath(p, stroke=0, fill=0)
    c.setFillColorRGB(0.9, 0.9, 0.9)  # a light-grey table cell, dark text in it
    c.rect(60, 690, 300, 24, stroke=0, fill=1)
    c.setFillColorRGB(0.1, 0.1, 0.1)
    c.drawString(72, 698, "Grey cell: oil ISO VG 220.")
    c.setFillColorRGB(0.8, 0.1, 0.1)  # a coloured header band, black and white text on it
    c.rect(0, 740, 612, 40, stroke=0, fill=1)
    c.setFillColorRGB(0, 0, 0)
    c.drawString(72, 755, "Red band: P-300 manual.")
    c.setFillColorRGB(1, 1, 1)
    c.drawString(300, 755, "White on the band: revision 4.")
    c.setFillColorRGB(1, 1, 1)  # a white cell background painted before its text
    c.rect(60, 640, 300, 24, stroke=0, fill=1)
    c.setFillColorRGB(0, 0, 0)
    c.drawString(72, 648, "White cell: torque 40 Nm.")
    c.restoreState()
    c.saveState()  # text inside a cell's clip
    p = c.beginPath()
    p.rect(60, 590, 300, 24)
    c.clipPath(p, stroke=0, fill=0)
    c.drawString(72, 598, "Clipped to its cell: drain monthly.")
    c.restoreState()
    c.drawString(72, 560, "Beside a white box: check the seals.")
    c.setFillColorRGB(1, 1, 1)  # a white box painted later, beside the text and below it
    c.rect(400, 550, 100, 30, stroke=0, fill=1)
    c.rect(72, 500, 300, 40, stroke=0, fill=1)
    c.setFillColorRGB(0, 0, 0)
    c.drawString(72, 470, "Under a faint white veil: vent the casing.")
    c.saveState()
    c.setFillAlpha(0.3)  # see-through: the text shows through it
    c.setFillColorRGB(1, 1, 1)
    c.rect(70, 466, 300, 16, stroke=0, fill=1)
    c.restoreState()
    c.drawString(-20, 440, "Nudged past the margin: start the motor.")
    c.rotate(90)  # rotated text on the page
    c.drawString(200, -580, "Rotated: P-300 serial plate.")
    c.showPage()
    c.save()
    text = " ".join(parse_pdf(tmp_path / "s.pdf", "s.pdf")[0].text.split())
    for shown in ("Grey cell: oil ISO VG 220.", "Red band: P-300 manual.", "White on the band: revision 4.",
                  "White cell: torque 40 Nm.", "Clipped to its cell: drain monthly.",
                  "Beside a white box: check the seals.", "Under a faint white veil: vent the casing.",
                  "past the margin: start the motor.", "Rotated: P-300 serial plate."):
        assert shown in text, (shown, text)


def test_pdf_text_under_a_white_box_is_measured_with_its_fonts_widths(tmp_path):
    """With an embedded font (its /Widths), a box just over a line hides it; one over half of a
    line does not (the rest of the line shows)."""
    from pathlib import Path

    import reportlab
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.pdfmetrics import stringWidth
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    pdfmetrics.registerFont(TTFont("Vera", str(Path(reportlab.__file__).parent / "fonts" / "Vera.ttf")))
    c = canvas.Canvas(str(tmp_path / "v.pdf"), pagesize=(612, 792))
    c.setFont("Vera", 12)
    c.drawString(72, 720, SHOWN)
    c.drawString(72, 700, HIDDEN)
    c.drawString(72, 680, "Half under a white box: check the seals.")
    c.setFillColorRGB(1, 1, 1)
    c.rect(71, 697, stringWidth(HIDDEN, "Vera", 12) + 2, 13, stroke=0, fill=1)
    c.rect(71, 677, stringWidth("Half under a white box: check the seals.", "Vera", 12) / 2, 13, stroke=0, fill=1)
    c.save()
    text = parse_pdf(tmp_path / "v.pdf", "v.pdf")[0].text
    assert SHOWN in text and "Half under a white box: check the seals." in text
    assert "20,000" not in text, text


@pytest.mark.parametrize("stream", [
    b"q 1 0 0 1 0 0 cm BT /F1 12 Tf (a\\(b\\)c\\\\d\\101\\7777\\q\\\r\nz) Tj [(x) -250 <4142 43> 12.5 (y)] TJ ET Q",
    b"/P <</MCID 0 /A [1 2 (x)] /S /Span>> BDC 0.5 g 1 1 1 rg 3 Tr 0 Tz (w) ' 1 2 (v) \" EMC",
    b"BT %a comment\n /F1 1 Tf -.5 .5 +3 -0 5. Td <> Tj () Tj ET 0 0 0 1 k /Cs1 cs /P0 scn 10 10 m 20 20 l W n",
])
def test_the_fast_content_reader_reads_operations_as_pypdf_does(stream):
    """The reader that decides a page hides nothing gives the operands pypdf's parser gives
    (numbers, names, the bytes of strings, arrays, dictionaries)."""
    import io

    from pypdf.generic import ArrayObject, ContentStream, DictionaryObject, NameObject

    from sourcegate.ingest.parsers import _content_operations

    def plain(o):
        if isinstance(o, NameObject):
            return str(o)
        if hasattr(o, "original_bytes"):
            return bytes(o.original_bytes)
        if isinstance(o, DictionaryObject):
            return {str(k): plain(v) for k, v in o.items()}
        if isinstance(o, ArrayObject):
            return [plain(x) for x in o]
        return float(o)

    parsed = ContentStream(None, None)
    parsed._parse_content_stream(io.BytesIO(stream))
    assert _content_operations(stream) == [([plain(x) for x in o], op) for o, op in parsed._operations]


@pytest.mark.parametrize("stream", [
    b"BT (a (nested) string) Tj ET", b"BI /W 1 /H 1 ID \x00 EI", b"/Name#20x gs", b"1.2.3 Tz",
    b"[true] TJ", b"(unclosed Tj", b"<< /A 1 >> >> BDC", b"<zz> Tj", b"(x) Tf",
])
def test_what_the_fast_content_reader_cannot_read_exactly_is_left_to_pypdf(stream):
    from sourcegate.ingest.parsers import _content_operations

    assert _content_operations(stream) is None

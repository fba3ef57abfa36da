"""Text a reader sees is indexed, whatever holds it: HTML blocks inside Markdown (a `<table>`, a
`<p align=center>`), DOCX nested tables and content controls (`w:sdt`), and DOCX cells merged
down a column (read once, in linear time)."""

from __future__ import annotations

import time

import pytest

from sourcegate.ingest.parsers import parse_docx, parse_markdown


def test_markdown_html_blocks_are_read(tmp_path):
    path = tmp_path / "pump.md"
    path.write_text("""# Dosing pump DP-4

Lubrication below.

<table>
  <tr><th>Part</th><th>Lubricant</th></tr>
  <tr><td>Gearbox</td><td>ISO VG 220</td></tr>
</table>

<p align="center">Tighten the flange bolts to <b>45 Nm</b>.</p>

<div align="right">Replace the diaphragm every 8,000 hours.</div>

## Safety

Wear *gloves*<br>and goggles. See [the guide](http://x.example/guide) and ![the P&amp;ID](pid.png).

```
keep   this   code
```
""", encoding="utf-8")
    doc = parse_markdown(path, "pump.md")[0]
    text = doc.text
    assert "Part | Lubricant" in text and "Gearbox | ISO VG 220" in text, text
    assert "Tighten the flange bolts to 45 Nm." in text
    assert "Replace the diaphragm every 8,000 hours." in text
    assert "Wear gloves\nand goggles. See the guide and the P&ID." in text
    assert "keep   this   code" in text and "http://" not in text
    assert doc.title == "Dosing pump DP-4"
    assert [h for _, h in doc.headings] == ["Dosing pump DP-4", "Dosing pump DP-4 > Safety"]
    assert all(text[pos:].startswith(h.split(" > ")[-1]) for pos, h in doc.headings)


def _sdt(inner_xml: str, block: bool = True):
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    return parse_xml(f"<w:sdt {nsdecls('w')}><w:sdtPr><w:alias w:val='x'/></w:sdtPr>"
                     f"<w:sdtContent>{inner_xml}</w:sdtContent></w:sdt>")


def test_docx_nested_tables_and_content_controls_are_read(tmp_path):
    import docx

    d = docx.Document()
    d.add_paragraph("Dosing pump DP-4 data sheet.")
    outer = d.add_table(rows=1, cols=2)
    outer.cell(0, 0).text = "Torques"
    inner = outer.cell(0, 1).add_table(rows=2, cols=2)
    for r, (a, b) in enumerate([("Flange bolts", "45 Nm"), ("Head screws", "12 Nm")]):
        inner.cell(r, 0).text, inner.cell(r, 1).text = a, b
    # a content control around a paragraph (block), inside a paragraph (inline) and in a cell
    d.element.body.insert(len(d.element.body) - 1, _sdt("<w:p><w:r><w:t>Supplier: Acme Pumps.</w:t></w:r></w:p>"))
    p = d.add_paragraph("Serial number ")
    p._p.append(_sdt("<w:r><w:t>SN-4471</w:t></w:r>"))
    cells = d.add_table(rows=1, cols=2)
    cells.cell(0, 0).text = "Gear oil"
    cells.cell(0, 1)._tc.append(_sdt("<w:p><w:r><w:t>ISO VG 220</w:t></w:r></w:p>"))
    d.add_paragraph("End of sheet.")
    d.save(tmp_path / "dp4.docx")
    text = parse_docx(tmp_path / "dp4.docx", "dp4.docx")[0].text
    for expected in ("Torques", "Flange bolts", "45 Nm", "Head screws", "12 Nm", "Supplier: Acme Pumps.",
                     "Serial number SN-4471", "Gear oil | ISO VG 220", "End of sheet."):
        assert expected in text, (expected, text)
    assert text.index("Supplier") < text.index("Serial number") < text.index("Gear oil") < text.index("End of")


def _merged_docx(path, rows: int, cols: int = 20):
    """A rows x cols table whose first column is one cell merged down the whole table."""
    import docx
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    d = docx.Document()
    d.add_paragraph("Spare parts list.")
    table = d.add_table(rows=rows, cols=cols)
    for r, row in enumerate(table._tbl.tr_lst):
        for c, tc in enumerate(row.tc_lst):
            if c == 0:
                tc.get_or_add_tcPr().append(parse_xml(
                    f"<w:vMerge {nsdecls('w')} w:val='restart'/>" if r == 0 else f"<w:vMerge {nsdecls('w')}/>"))
                if r == 0:
                    tc.p_lst[0].append(parse_xml(f"<w:r {nsdecls('w')}><w:t>Pump P-300 parts</w:t></w:r>"))
            else:
                tc.p_lst[0].append(parse_xml(f"<w:r {nsdecls('w')}><w:t>R{r}C{c}</w:t></w:r>"))
    d.save(path)
    return path


def test_docx_vertically_merged_cells_are_read_once_in_linear_time(tmp_path):
    small, big = _merged_docx(tmp_path / "s.docx", 50), _merged_docx(tmp_path / "b.docx", 200)
    times = []
    for path in (small, big):
        start = time.perf_counter()
        text = parse_docx(path, path.name)[0].text
        times.append(time.perf_counter() - start)
        assert text.count("Pump P-300 parts") == 1, text[:500]
        assert "R1C1" in text and "R49C19" in text
    assert "R199C19" in text
    # 4 times the rows: about 4 times the time (it was 16 times: each merged cell looked up the column)
    assert times[1] < 8 * times[0] + 0.5, times

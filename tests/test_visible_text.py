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

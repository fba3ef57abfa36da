"""A small laboratory library in every format, shaped like a new user's own (imported by tests and
by bench/bench_quotes.py): two homogeniser models, one procedure in a PDF whose lines wrap mid-
sentence (with a word hyphenated at a line end) and one manual in a DOCX whose title carries
"(Rev. 4)"; an archived Markdown revision; a forum note in TXT; a spill procedure in HTML; a French
drying-oven manual with thousands separators and decimal commas. Each document's source_type comes
its own way: Markdown front matter, the DOCX Category, a sidecar, the folder manifest."""

from __future__ import annotations

import json
from pathlib import Path

HG3_PDF_LINES = [
    "The HG-3 homogeniser runs samples of up to 50 mL in the standard vessel. Never run the HG-3 rotor",
    "above 20,000 rpm: the rotor is rated for 20,000 rpm and no more. Replace the rotor seal every 250 runs, and",
    "log each replacement in the instrument book. The dispersing tool must not",
    "exceed 0.5 g of imbalance after cleaning; check it on the balance before each run. Clean the homo-",
    "geniser shaft with 70 % ethanol after each sample.",
]
HG5_DOCX_PARAGRAPHS = [
    "Scope",
    "This manual covers the HG-5 homogeniser, the larger model of the range, for vessels of up to 2 L.",
    "The HG-5 rotor may run at up to 12,000 rpm for at most 10 minutes at a time.",
    "Retire the HG-5 rotor after 10,000 runs or at the first visible crack, whichever comes first.",
]
HG3_ARCHIVED_MD = """---
title: HG-3 homogeniser operating procedure (Rev. 1)
status: archived
version: 1
source_type: procedure
effective_date: 2021-03-01
---
# HG-3 homogeniser operating procedure

Run the HG-3 rotor at up to 30,000 rpm. Replace the rotor seal every 500 runs.
"""
FORUM_TXT = """Forum: HG-3 speed

I have run our HG-3 at 30,000 rpm for years without trouble, so the HG-3 rotor can run at 30,000 rpm.
The seal lasts about 2,500 runs in my experience.
"""
SPILL_HTML = """<html><head><title>Acid spill response</title>
<meta name="version" content="3"><meta name="sourcegate:source_type" content="procedure">
<link rel="canonical" href="https://docs.example.org/lab/acid-spill"></head>
<body><h1>Acid spill response</h1>
<p>Neutralise an acid spill of up to 1 L with the sodium bicarbonate kit
from the spill cabinet, working from the edge of the spill towards its centre.</p>
<p>For a spill above 1 L, evacuate the room and call the safety officer on extension 4,444.</p>
</body></html>
"""
AUTOCLAVE_FR = [
    "Étuve de séchage ES-2",
    "L'étuve ES-2 sèche la verrerie à 105 °C pendant 2 heures au minimum.",
    "La charge maximale de l'étuve ES-2 est de 12,5 kg par étagère et de 25 000 g au total.",
    "Remplacer le joint de porte de l'étuve ES-2 toutes les 1 500 heures de fonctionnement.",
]

# The questions of the library, with the document and the value an answer must hold (bench and tests).
QUESTIONS = [
    ("How often should the HG-3 rotor seal be replaced?", "hg3-procedure.pdf", "250 runs"),
    ("What is the maximum speed of the HG-3 rotor?", "hg3-procedure.pdf", "20,000 rpm"),
    ("How much imbalance may the HG-3 dispersing tool have after cleaning?", "hg3-procedure.pdf", "0.5 g"),
    ("How long may the HG-5 rotor run at a time?", "hg5-manual.docx", "10 minutes"),
    ("When must the HG-5 rotor be retired?", "hg5-manual.docx", "10,000 runs"),
    ("How much acid can be neutralised with the spill kit?", "acid-spill.html", "1 L"),
    ("À quelle température l'étuve ES-2 sèche-t-elle la verrerie ?", "etuve-es2.docx", "105 °C"),
    ("Quelle est la charge maximale par étagère de l'étuve ES-2 ?", "etuve-es2.docx", "12,5 kg"),
    ("Tous les combien faut-il remplacer le joint de porte de l'étuve ES-2 ?", "etuve-es2.docx", "1 500 heures"),
    ("How often should the door seal of the ES-2 drying oven be replaced?", "etuve-es2.docx", "1 500 heures"),
]


def _pdf(path: Path, heading: str, lines: list[str]) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(40, 800, heading)
    c.setFont("Helvetica", 9)
    y = 775
    for line in lines:  # the PDF's own line breaks, mid-sentence, as a word processor lays them out
        c.drawString(40, y, line)
        y -= 12
    c.showPage()
    c.save()


def _docx(path: Path, title: str, paragraphs: list[str], category: str, heading: str | None = None) -> None:
    import docx

    d = docx.Document()
    d.add_heading(heading or title, level=1)
    for p in paragraphs:
        if len(p.split()) <= 2:
            d.add_heading(p, level=2)
        else:
            d.add_paragraph(p)
    d.core_properties.title = title
    d.core_properties.category = category
    d.save(str(path))


def make_lab_library(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _pdf(root / "hg3-procedure.pdf", "HG-3 homogeniser operating procedure", HG3_PDF_LINES)
    _docx(root / "hg5-manual.docx", "HG-5 homogeniser manual (Rev. 4)", HG5_DOCX_PARAGRAPHS, "manual")
    (root / "hg3-procedure-r1.md").write_text(HG3_ARCHIVED_MD, encoding="utf-8")
    (root / "forum-hg3-speed.txt").write_text(FORUM_TXT, encoding="utf-8")
    (root / "forum-hg3-speed.txt.meta.json").write_text(json.dumps({"source_type": "forum",
                                                                    "title": "Forum: HG-3 speed"}), encoding="utf-8")
    (root / "acid-spill.html").write_text(SPILL_HTML, encoding="utf-8")
    _docx(root / "etuve-es2.docx", "Étuve de séchage ES-2 : manuel", AUTOCLAVE_FR[1:], "manual",
          heading=AUTOCLAVE_FR[0])
    (root / "sourcegate.meta.json").write_text(json.dumps({
        "hg3-procedure.pdf": {"source_type": "procedure", "version": "3", "title": "HG-3 homogeniser operating procedure",
                              "url": "https://docs.example.org/lab/hg3-procedure"},
    }), encoding="utf-8")
    return root

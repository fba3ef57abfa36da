"""Ingestion of every format, every kind of bad input, updates and pruning."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from conftest import LONG_BENIGN, PLANTED_REQUEST

from sourcegate.ingest.parsers import IngestError, decode_text, parse_file
from sourcegate.ingest.pipeline import Ingestor
from sourcegate.store import SearchFilters, open_store


def make_pdf(path: Path, pages: list[str]) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    c.setTitle("Valve exercising")
    for text in pages:
        y = 800
        for line in text.split("\n"):
            c.drawString(50, y, line)
            y -= 14
        c.showPage()
    c.save()
    return path


def make_scanned_pdf(path: Path) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    c.rect(50, 50, 400, 600, fill=1)  # an image-like page with no text layer
    c.showPage()
    c.save()
    return path


def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Booster station", level=1)
    d.add_heading("Start-up", level=2)
    d.add_paragraph("Open the suction valve fully before starting booster pump B-12.")
    d.add_paragraph("Start the pump and check the discharge pressure reaches 4.5 bar within 30 seconds.")
    d.save(str(path))
    return path


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "library"
    (root / "sub").mkdir(parents=True)
    (root / "guide.md").write_text(
        "# Reservoir inspection\n\n## Frequency\n\nInspect each reservoir roof hatch every quarter.\n\n"
        "## Records\n\nWrite the findings in the asset register with a photograph of each hatch.\n", encoding="utf-8")
    (root / "page.html").write_text(
        "<html><head><title>Meter reading</title><script>var x=1;</script></head><body>"
        "<h1>Meter reading</h1><h2>Monthly</h2><p>Read district meters on the first working day of each month.</p>"
        "<nav>menu</nav></body></html>", encoding="utf-8")
    (root / "sub" / "notes.txt").write_text("Night shift notes\n\nCheck the chlorine residual at 02:00 and 05:00.\n",
                                            encoding="utf-8")
    (root / "sub" / "latin1.txt").write_bytes(
        "Procédure de purge\n\nOuvrir la vanne de purge et vérifier que l'eau est claire à 0,2 mg/L.\n".encode("latin-1"))
    make_pdf(root / "valves.pdf", ["Valve exercising\nExercise every line valve once a year.",
                                   "Turn each valve through its full travel and count the turns."])
    make_docx(root / "booster.docx")
    (root / "export.json").write_text(json.dumps([
        {"id": "KB-1", "title": "Leak detection", "text": "Use the acoustic logger overnight on mains older than 50 years.",
         "url": "https://kb.example/1", "source_type": "kb", "version": "3", "status": "current", "updated_at": "2026-01-01"},
        {"id": "KB-0", "title": "Leak detection (old)", "text": "Walk the main and listen with a stick.", "status": "archived"},
    ]), encoding="utf-8")
    return root


def _ingestor(home: Path, embedder, **kw):
    store = open_store(home / "index.db", embedder.id, embedder.dim)
    return store, Ingestor(store, embedder, **kw)


def test_every_format_is_ingested(library, sourcegate_home, embedder):
    store, ing = _ingestor(sourcegate_home, embedder)
    report = ing.ingest([library])
    assert report.failed == []
    ids = {d.id for d in store.list_documents()}
    assert ids == {"guide.md", "page.html", "sub/notes.txt", "sub/latin1.txt", "valves.pdf", "booster.docx", "KB-1", "KB-0"}
    assert report.added == 8
    # Metadata and structure survive.
    kb = store.get_document("KB-1")
    assert (kb.url, kb.version, kb.source_type, kb.status) == ("https://kb.example/1", "3", "kb", "current")
    assert store.get_document("KB-0").status == "archived"
    md = store.get_chunks([cid for cid, _ in store.lexical_search("reservoir roof hatch", 5)])
    assert md and md[0].doc_id == "guide.md" and md[0].heading.startswith("Reservoir inspection")
    pdf = store.get_chunks([cid for cid, _ in store.lexical_search("count the turns", 5)])
    assert pdf[0].doc_id == "valves.pdf" and pdf[0].page in (1, 2)
    docx_hit = store.get_chunks([cid for cid, _ in store.lexical_search("booster pump B-12", 5)])
    assert docx_hit[0].doc_id == "booster.docx" and "Booster station" in docx_hit[0].heading
    html = store.get_chunks([cid for cid, _ in store.lexical_search("district meters", 5)])
    assert html[0].title == "Meter reading" and "menu" not in html[0].text and "var x" not in html[0].text
    latin = store.get_chunks([cid for cid, _ in store.lexical_search("purge", 5)])
    assert "Procédure" in latin[0].text and "vérifier" in latin[0].text
    # Archived passages are filtered by default and reachable on request.
    assert all(c.doc_id != "KB-0" for c in store.get_chunks([cid for cid, _ in store.lexical_search("listen stick", 5)]))
    assert store.lexical_search("listen stick", 5, SearchFilters(exclude_status=()))
    store.close()


def test_reingest_unchanged_is_a_no_op(library, sourcegate_home, embedder):
    store, ing = _ingestor(sourcegate_home, embedder)
    ing.ingest([library])
    report = ing.ingest([library])
    assert (report.added, report.updated, report.unchanged, report.chunks) == (0, 0, 8, 0)
    store.close()


def test_new_judge_weights_refresh_stored_features(library, sourcegate_home, embedder, monkeypatch):
    from sourcegate.ingest import pipeline

    store, ing = _ingestor(sourcegate_home, embedder)
    ing.ingest([library])
    monkeypatch.setattr(pipeline, "_features_version", lambda: "local:1:other-weights")
    store2, ing2 = _ingestor(sourcegate_home, embedder)
    report = ing2.ingest([library])
    assert (report.added, report.updated, report.unchanged) == (0, 8, 0)
    store.close()
    store2.close()


def test_stored_injection_score_is_the_direct_one(tmp_path, sourcegate_home, embedder):
    """The injection score ingest stores is the one computed from the chunk's text alone, and every chunk
    carries its document's highest score (`doc_inj`)."""
    from sourcegate.judges.local import passage_features

    body = LONG_BENIGN + " " + PLANTED_REQUEST
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "plant.md").write_text(f"# Treatment plant\n\n{body}\n", encoding="utf-8")
    store, ing = _ingestor(sourcegate_home, embedder, workers=1)
    assert ing.ingest([lib]).chunks == 1
    chunk = store.get_chunks([cid for cid, _ in store.lexical_search("butterfly", 3)])[0]
    store.close()
    direct = passage_features(chunk.text, chunk.title, embedder=embedder)["inj"]
    assert chunk.passage_features["inj"] == pytest.approx(direct, abs=1e-3)
    assert chunk.passage_features["doc_inj"] == chunk.passage_features["inj"]


def test_editing_a_cue_lexicon_changes_the_features_version(monkeypatch):
    from sourcegate.judges.local import judge as judge_mod, lexicons

    assert judge_mod.features_version() == judge_mod.FEATURES_VERSION
    monkeypatch.setattr(lexicons, "SUPERSEDED_WEAK", lexicons.SUPERSEDED_WEAK + [r"\bhistoric\b"])
    assert judge_mod.features_version() != judge_mod.FEATURES_VERSION


def test_update_replaces_all_chunks(library, sourcegate_home, embedder):
    store, ing = _ingestor(sourcegate_home, embedder)
    ing.ingest([library])
    (library / "guide.md").write_text("# Reservoir inspection\n\nInspect each reservoir hatch every month with a drone.\n",
                                      encoding="utf-8")
    report = ing.ingest([library])
    assert report.updated == 1 and report.unchanged == 7
    hits = store.get_chunks([cid for cid, _ in store.lexical_search("quarter asset register photograph", 10)])
    assert all(h.doc_id != "guide.md" for h in hits), "old text of an updated document came back"
    qv = embedder.embed(["Inspect each reservoir roof hatch every quarter"])[0]
    for cid, _ in store.dense_search(qv, 20, SearchFilters(exclude_status=())):
        assert "quarter" not in store.get_chunks([cid])[0].text
    assert "drone" in store.get_chunks([cid for cid, _ in store.lexical_search("drone", 3)])[0].text
    store.close()


def test_prune_removes_vanished_documents(library, sourcegate_home, embedder):
    store, ing = _ingestor(sourcegate_home, embedder)
    ing.ingest([library])
    (library / "sub" / "notes.txt").unlink()
    report = ing.ingest([library], prune=True)
    assert report.removed == 1
    assert store.get_document("sub/notes.txt") is None
    assert store.lexical_search("chlorine residual 02:00", 5) == []
    # Without --prune nothing is removed.
    (library / "page.html").unlink()
    assert ing.ingest([library]).removed == 0
    assert store.get_document("page.html") is not None
    store.close()


@pytest.mark.parametrize("name,content,reason", [
    ("corrupt.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage", "corrupt"),
    ("fake.docx", None, "not a valid DOCX"),
    ("junk.txt", bytes(range(256)) * 40, "binary"),
    ("empty.txt", b"", "empty"),
    ("bad.json", b"{not json", "invalid JSON"),
    ("notexport.json", b'{"a": 1}', "not a passage export"),
])
def test_bad_files_fail_alone(tmp_path, sourcegate_home, embedder, name, content, reason):
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "good.txt").write_text("Flush the hydrant until the water runs clear.", encoding="utf-8")
    bad = root / name
    if name == "fake.docx":
        with zipfile.ZipFile(bad, "w") as z:
            z.writestr("hello.txt", "not a word document")
    else:
        bad.write_bytes(content)
    store, ing = _ingestor(sourcegate_home, embedder)
    report = ing.ingest([root])
    assert report.added == 1
    assert len(report.failed) == 1
    path, why = report.failed[0]
    assert path.endswith(name) and reason.lower() in why.lower()
    assert store.get_document(name) is None
    store.close()


def test_encrypted_pdf(tmp_path, sourcegate_home, embedder):
    from pypdf import PdfReader, PdfWriter

    plain = make_pdf(tmp_path / "plain.pdf", ["Secret valve list"])
    w = PdfWriter()
    for p in PdfReader(str(plain)).pages:
        w.add_page(p)
    w.encrypt(user_password="s3cret", owner_password="owner")
    root = tmp_path / "enc"
    root.mkdir()
    with open(root / "locked.pdf", "wb") as f:
        w.write(f)
    with pytest.raises(IngestError, match="encrypted"):
        parse_file(root / "locked.pdf", "locked.pdf")


def test_scanned_pdf_says_how_to_enable_ocr(tmp_path, monkeypatch):
    pdf = make_scanned_pdf(tmp_path / "scan.pdf")
    # As on a machine without tesseract.
    monkeypatch.setattr("sourcegate.ingest.parsers.shutil.which", lambda name: None)
    with pytest.raises(IngestError, match="apt-get install tesseract-ocr"):
        parse_file(pdf, "scan.pdf")


def test_scanned_pdf_is_read_with_ocr(tmp_path):
    pytest.importorskip("pytesseract")
    pytest.importorskip("pypdfium2")
    if not shutil.which("tesseract"):
        pytest.skip("tesseract is not installed (apt-get install tesseract-ocr)")
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (1240, 400), "white")
    draw = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 36)
    except OSError:
        font = ImageFont.load_default(size=36)
    draw.text((60, 60), "Flush the clarifier every fourteen days.", font=font, fill="black")
    img.save(tmp_path / "scan.pdf", "PDF", resolution=150)
    docs = parse_file(tmp_path / "scan.pdf", "scan.pdf")
    assert "clarifier" in docs[0].text.lower() and "fourteen" in docs[0].text.lower()
    assert docs[0].pages == [(0, 1)]


def test_size_cap(tmp_path, sourcegate_home, embedder):
    root = tmp_path / "big"
    root.mkdir()
    (root / "big.txt").write_text("Open the valve. " * 20000, encoding="utf-8")
    store, ing = _ingestor(sourcegate_home, embedder, max_file_bytes=100_000)
    report = ing.ingest([root])
    assert report.failed and "cap" in report.failed[0][1] and "SOURCEGATE_MAX_FILE_MB" in report.failed[0][1]
    store.close()


def test_decode_text_detects_encodings():
    assert decode_text("Équipe d'entretien".encode("utf-8")) == "Équipe d'entretien"
    assert "Procédure" in decode_text("Procédure de vidange du réservoir, étape très importante".encode("cp1252"))
    with pytest.raises(IngestError):
        decode_text(b"\x00\x01\x02\x03" * 100)


def test_failed_write_leaves_no_partial_document(library, sourcegate_home, embedder, monkeypatch):
    store, ing = _ingestor(sourcegate_home, embedder)
    ing.ingest([library])
    before = store.get_chunks([cid for cid, _ in store.lexical_search("reservoir roof hatch", 5)])
    (library / "guide.md").write_text("# Reservoir inspection\n\nA brand new text about hatches and ladders.\n", encoding="utf-8")

    original = store._conn

    class Exploding:
        """Let the delete and the first inserts through, then fail mid-document."""

        def __init__(self, conn):
            self.conn, self.inserts = conn, 0

        def execute(self, sql, *args):
            if sql.lstrip().upper().startswith("INSERT INTO CHUNKS_VEC"):
                raise RuntimeError("disk full")
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    store._conn = Exploding(original)
    report = ing.ingest([library])
    store._conn = original
    assert len(report.failed) == 1 and "disk full" in report.failed[0][1]
    # The old version is intact: no half-written document.
    doc = store.get_document("guide.md")
    assert doc is not None
    after = store.get_chunks([cid for cid, _ in store.lexical_search("reservoir roof hatch", 5)])
    assert [c.id for c in after] == [c.id for c in before]
    assert store.lexical_search("ladders", 5) == []
    store.close()


def test_empty_pdf(tmp_path):
    from pypdf import PdfWriter

    path = tmp_path / "empty.pdf"
    with open(path, "wb") as f:
        PdfWriter().write(f)
    with pytest.raises(IngestError, match="empty PDF"):
        parse_file(path, "empty.pdf")

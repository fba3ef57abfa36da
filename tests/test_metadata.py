"""Document metadata from every format and from sidecars, and what it changes: the archived filter,
the status the judge sees, the title cited; folder ingest naming what it skips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sourcegate.ingest.metadata import is_placeholder_title, normalize, split_front_matter
from sourcegate.ingest.parsers import IngestError, parse_file
from sourcegate.ingest.pipeline import Ingestor
from sourcegate.store import SearchFilters, open_store


def make_heading_pdf(path: Path, heading: str, body: list[str], title: str | None = None, info: dict | None = None) -> Path:
    """A reportlab PDF whose first line is a heading in large type; reportlab's own title is
    `untitled` unless `title` is given."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    if title is not None:
        c.setTitle(title)
    c.setFont("Helvetica", 10)
    c.drawString(50, 810, "Northside Water - controlled document")  # a small running header above it
    c.setFont("Helvetica-Bold", 20)
    c.drawString(50, 780, heading)
    c.setFont("Helvetica", 11)
    y = 750
    for line in body:
        c.drawString(50, y, line)
        y -= 14
    c.showPage()
    c.save()
    if info:  # custom information keys, as a document system writes them
        from pypdf import PdfWriter

        writer = PdfWriter(clone_from=str(path))
        writer.add_metadata({f"/{k}": v for k, v in info.items()})
        writer.write(str(path))
    return path


def test_front_matter_is_read_and_left_out_of_the_text(tmp_path):
    f = tmp_path / "p200.md"
    f.write_text("---\ntitle: Pump P-200 bearings (Rev. 1)\nstatus: Superseded\nversion: 1\n"
                 "effective_date: 2024-01-02\nurl: https://docs.example/p200-r1\nsource_type: procedure\n"
                 "author: someone\n---\n# Bearings\n\nGrease every 500 hours.\n", encoding="utf-8")
    [doc] = parse_file(f, "p200.md")
    assert (doc.title, doc.status, doc.version, doc.updated_at, doc.url, doc.source_type) == (
        "Pump P-200 bearings (Rev. 1)", "archived", "1", "2024-01-02", "https://docs.example/p200-r1", "procedure")
    assert "title:" not in doc.text and doc.text.startswith("Bearings")


def test_front_matter_that_is_not_a_mapping_stays_text():
    fields, rest = split_front_matter("---\n- a list\n---\n# Heading\n")
    assert fields == {} and rest.startswith("---")
    fields, rest = split_front_matter("---\ntitle: [unclosed\n---\nbody")
    assert fields == {} and "unclosed" in rest
    fields, rest = split_front_matter("No front matter\n---\ntitle: x\n---\n")
    assert fields == {} and rest.startswith("No front matter")


def test_html_title_meta_and_canonical_link(tmp_path):
    f = tmp_path / "hydrant.html"
    f.write_text('<html><head><title>Hydrant flushing</title><link rel="canonical" href="https://docs.example/hydrant">'
                 '<meta name="status" content="archived"><meta name="dcterms.modified" content="2023-05-01">'
                 '<meta property="og:title" content="Ignored when a title exists"><meta name="version" content="4">'
                 '</head><body><h1>Hydrants</h1><p>Flush each hydrant once a year.</p></body></html>', encoding="utf-8")
    [doc] = parse_file(f, "hydrant.html")
    assert (doc.title, doc.url, doc.status, doc.updated_at, doc.version) == (
        "Hydrant flushing", "https://docs.example/hydrant", "archived", "2023-05-01", "4")


HTML_META = ('<html><head><title>Dosing pump DP-4</title><meta charset="utf-8">'
             '<meta name="viewport" content="width=device-width"><meta name="generator" content="Hugo 0.1">'
             '<meta name="model" content="DP-4"><meta name="Product" content="Dosing pumps">'
             '<meta name="sourcegate:site" content="Northside"><meta name="version" content="3">'
             '<meta name="modèle" content="DP-4 bis"><meta name="id" content="other-id">'
             '<meta name="model number" content="4711">'
             '</head><body><h1>DP-4</h1><p>Fill the gearbox with ISO VG 220 gear oil.</p></body></html>')


def test_html_meta_keys_are_read_as_metadata_like_front_matter(tmp_path):
    f = tmp_path / "dp4.html"
    f.write_text(HTML_META, encoding="utf-8")
    [doc] = parse_file(f, "dp4.html")
    assert doc.version == "3"
    assert doc.metadata == {"model": "DP-4", "product": "Dosing pumps", "site": "Northside", "model_number": "4711"}
    # a key ingest cannot read is said, not dropped without a word; a page's plumbing is not a key
    assert sorted(doc.unread_keys) == ["id (a reserved name)", "modèle (not a name of letters a-z, digits and _)"]


def test_a_metadata_key_ingest_cannot_read_is_named_in_the_ingest_summary(tmp_path):
    from click.testing import CliRunner

    from sourcegate.cli import cli

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "dp4.html").write_text(HTML_META, encoding="utf-8")
    (lib / "p200.md").write_text("---\ntitle: Pump P-200\nmodel: P-200\nparts: [seal, bearing]\n---\n\n"
                                 "Grease the bearings every 2,000 hours.\n", encoding="utf-8")
    r = CliRunner().invoke(cli, ["--home", str(tmp_path / "home"), "ingest", str(lib)])
    assert r.exit_code == 0, r.output
    assert (f"metadata not read: {lib / 'dp4.html'}: modèle (not a name of letters a-z, digits and _), "
            "id (a reserved name)\n") in r.output
    assert f"metadata not read: {lib / 'p200.md'}: parts (a list or a map, not a value)" in r.output


def test_docx_core_properties(tmp_path):
    import docx

    d = docx.Document()
    d.add_paragraph("Open the suction valve fully before starting booster pump B-12.")
    d.core_properties.title = "Booster start-up"
    d.core_properties.content_status = "Withdrawn"
    d.core_properties.version = "7"
    d.core_properties.identifier = "https://docs.example/booster"
    d.core_properties.category = "procedure"
    d.save(str(tmp_path / "booster.docx"))
    [doc] = parse_file(tmp_path / "booster.docx", "booster.docx")
    assert (doc.title, doc.status, doc.version, doc.url, doc.source_type) == (
        "Booster start-up", "archived", "7", "https://docs.example/booster", "procedure")


def test_pdf_placeholder_title_falls_back_to_the_first_heading(tmp_path):
    f = make_heading_pdf(tmp_path / "report.pdf", "Chlorine dosing pump calibration",
                         ["Calibrate the dosing pump every month.", "Record the stroke length."])
    from pypdf import PdfReader

    assert PdfReader(str(f)).metadata.title == "untitled"  # what reportlab writes by default
    [doc] = parse_file(f, "report.pdf")
    assert doc.title == "Chlorine dosing pump calibration"  # the large type, not the running header


def test_pdf_real_title_and_information_fields(tmp_path):
    f = make_heading_pdf(tmp_path / "r.pdf", "Heading", ["Body text of the procedure."], title="Dosing calibration",
                         info={"Status": "archived", "Version": "2", "EffectiveDate": "2022-02-02",
                                "URL": "https://docs.example/r"})
    [doc] = parse_file(f, "r.pdf")
    assert (doc.title, doc.status, doc.version, doc.updated_at, doc.url) == (
        "Dosing calibration", "archived", "2", "2022-02-02", "https://docs.example/r")


@pytest.mark.parametrize("title", ["", "untitled", "(anonymous)", "Microsoft Word - pump.docx", "pump.pdf", "pump"])
def test_placeholder_titles(title):
    assert is_placeholder_title(title, Path("pump.pdf"))


def test_real_titles_are_kept():
    assert not is_placeholder_title("Pump P-200: bearing lubrication", Path("pump.pdf"))


def test_sidecar_and_manifest(tmp_path):
    (tmp_path / "notes.txt").write_text("Night shift notes\n\nCheck the chlorine residual at 02:00.\n", encoding="utf-8")
    (tmp_path / "notes.txt.meta.json").write_text(json.dumps({"title": "Night shift checks", "version": 3,
                                                              "effective_date": "2025-05-05"}), encoding="utf-8")
    (tmp_path / "valve.txt").write_text("Valve exercise\n\nExercise each valve yearly.\n", encoding="utf-8")
    (tmp_path / "sourcegate.meta.json").write_text(json.dumps({
        "valve.txt": {"status": "archived", "url": "https://docs.example/valve"},
        "notes.txt": {"title": "Overridden by the sidecar", "url": "https://docs.example/notes"}}), encoding="utf-8")
    [notes] = parse_file(tmp_path / "notes.txt", "notes.txt")
    assert (notes.title, notes.version, notes.updated_at, notes.url) == (
        "Night shift checks", "3", "2025-05-05", "https://docs.example/notes")
    [valve] = parse_file(tmp_path / "valve.txt", "valve.txt")
    assert (valve.status, valve.url, valve.title) == ("archived", "https://docs.example/valve", "Valve exercise")
    # by stem: manual.meta.json describes manual.pdf when no other file shares the stem
    (tmp_path / "manual.md").write_text("# Manual\n\nText.\n", encoding="utf-8")
    (tmp_path / "manual.meta.json").write_text('{"version": "9"}', encoding="utf-8")
    assert parse_file(tmp_path / "manual.md", "manual.md")[0].version == "9"


def test_a_broken_sidecar_fails_its_file_with_the_reason(tmp_path):
    (tmp_path / "a.txt").write_text("Some text here.\n", encoding="utf-8")
    (tmp_path / "a.txt.meta.json").write_text('{"title": ', encoding="utf-8")
    with pytest.raises(IngestError, match=r"a.txt.meta.json: invalid JSON"):
        parse_file(tmp_path / "a.txt", "a.txt")
    (tmp_path / "a.txt.meta.json").write_text('{"title": ["a", "list"]}', encoding="utf-8")
    with pytest.raises(IngestError, match="'title' must be a string"):
        parse_file(tmp_path / "a.txt", "a.txt")


def test_export_takes_effective_date_and_out_of_service_words():
    fields = normalize({"status": "Superseded", "effective_date": "2020-01-01", "color": "red"})
    assert fields == {"status": "archived", "updated_at": "2020-01-01"}


def test_unsupported_type_lists_the_supported_ones(tmp_path):
    f = tmp_path / "sheet.xlsx"
    f.write_bytes(b"PK\x03\x04")
    with pytest.raises(IngestError) as e:
        parse_file(f, "sheet.xlsx")
    assert "'.xlsx'" in str(e.value) and all(t in str(e.value) for t in (".pdf", ".docx", ".md", ".html", ".txt", ".json"))


def test_folder_ingest_names_every_skipped_file_and_filters_archived_metadata(tmp_path, embedder):
    lib = tmp_path / "lib"
    (lib / ".git").mkdir(parents=True)
    (lib / ".git" / "config").write_text("x", encoding="utf-8")
    (lib / "sheet.xlsx").write_bytes(b"PK\x03\x04 not really")
    (lib / ".DS_Store").write_bytes(b"\x00")
    (lib / "orphan.pdf.meta.json").write_text('{"status": "archived"}', encoding="utf-8")
    (lib / "r1.md").write_text("---\nstatus: archived\nversion: 1\n---\n# Pump P-900 grease\n\n"
                               "Grease pump P-900 every 500 hours.\n", encoding="utf-8")
    (lib / "r2.md").write_text("---\nversion: 2\n---\n# Pump P-900 grease\n\nGrease pump P-900 every 2,000 hours.\n",
                               encoding="utf-8")
    store = open_store(tmp_path / "index.db", embedder.id, embedder.dim)
    report = Ingestor(store, embedder, workers=1).ingest([lib])
    assert report.added == 2 and not report.failed
    skipped = {Path(p).name: why for p, why in report.skipped}
    assert set(skipped) == {".git", "sheet.xlsx", ".DS_Store", "orphan.pdf.meta.json"}, skipped
    assert skipped["sheet.xlsx"].startswith("unsupported file type '.xlsx'") and ".pdf" in skipped["sheet.xlsx"]
    assert skipped[".git"] == "hidden folder" and "not there" in skipped["orphan.pdf.meta.json"]
    assert "4 skipped" in report.summary()
    assert store.get_document("r1.md").status == "archived" and store.get_document("r2.md").version == "2"
    # the archived revision never reaches the gate (the first layer), the current one does
    hits = store.lexical_search("P-900 grease hours", 10, SearchFilters())
    assert {c.doc_id for c in store.get_chunks([h[0] for h in hits])} == {"r2.md"}
    hits = store.lexical_search("P-900 grease hours", 10, SearchFilters(exclude_status=()))
    assert {c.doc_id for c in store.get_chunks([h[0] for h in hits])} == {"r1.md", "r2.md"}
    store.close()


def test_a_changed_sidecar_updates_its_document(tmp_path, embedder):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "valve.txt").write_text("Valve exercise\n\nExercise each line valve once a year.\n", encoding="utf-8")
    sidecar = lib / "valve.txt.meta.json"
    sidecar.write_text('{"version": "1"}', encoding="utf-8")
    store = open_store(tmp_path / "index.db", embedder.id, embedder.dim)
    ingestor = Ingestor(store, embedder, workers=1)
    assert ingestor.ingest([lib]).added == 1
    assert ingestor.ingest([lib]).unchanged == 1
    sidecar.write_text('{"version": "2", "status": "withdrawn"}', encoding="utf-8")  # the file itself is untouched
    assert ingestor.ingest([lib]).updated == 1
    record = store.get_document("valve.txt")
    assert (record.version, record.status) == ("2", "archived")
    store.close()

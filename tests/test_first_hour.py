"""A new user's first hour, through the command line on a fresh SOURCEGATE_HOME: asking before
anything is indexed, a mistyped store URL, a folder of their own documents in every format with an
unsupported file among them, metadata read from each format, an archived Markdown revision kept
out of the answers, and a reportlab PDF cited by its heading rather than "untitled".

The answers come from the default offline judge, as a new user gets them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sourcegate.cli import cli
from test_metadata import make_heading_pdf

CHLORINE_Q = "How often should the chlorine analyser CA-12 be calibrated?"
DOSING_Q = "How often should the stroke length of dosing pump DP-4 be calibrated?"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def make_library(root: Path) -> Path:
    """Six documents in five formats, each carrying its metadata its own way, and a spreadsheet."""
    import docx

    root.mkdir()
    (root / "chlorine-r1.md").write_text(
        "---\ntitle: Chlorine analyser CA-12 calibration (Rev. 1)\nstatus: archived\nversion: 1\n"
        "effective_date: 2023-02-01\n---\n# Chlorine analyser CA-12 calibration\n\n"
        "Calibrate the chlorine analyser CA-12 every 30 days against the handheld meter.\n", encoding="utf-8")
    (root / "chlorine-r2.md").write_text(
        "---\ntitle: Chlorine analyser CA-12 calibration (Rev. 2)\nversion: 2\neffective_date: 2025-06-01\n"
        "url: https://docs.example.org/chlorine-ca12-r2\n---\n# Chlorine analyser CA-12 calibration\n\n"
        "Calibrate the chlorine analyser CA-12 every 14 days against a DPD reference sample. "
        "Record the offset in the analyser log book.\n", encoding="utf-8")
    (root / "hydrant.html").write_text(
        '<html><head><title>Fire hydrant FH-3 flushing</title><link rel="canonical" '
        'href="https://docs.example.org/hydrant-fh3"><meta name="version" content="4">'
        '<meta name="dcterms.modified" content="2024-09-30"></head><body><h1>Flushing</h1>'
        "<p>Flush fire hydrant FH-3 once a year for five minutes, until the water runs clear.</p></body></html>",
        encoding="utf-8")
    d = docx.Document()
    d.add_paragraph("Start booster pump B-12 only with its suction valve fully open.")
    d.core_properties.title = "Booster pump B-12 start-up"
    d.core_properties.version = "7"
    d.core_properties.identifier = "https://docs.example.org/booster-b12"
    d.save(str(root / "booster.docx"))
    make_heading_pdf(root / "dosing.pdf", "Dosing pump DP-4 stroke calibration",
                     ["Calibrate the stroke length of dosing pump DP-4 every month.",
                      "Use the calibration cylinder and time 60 strokes."])
    (root / "night-shift.txt").write_text("Night shift\n\nCheck the reservoir level alarms at 02:00 and 05:00.\n",
                                          encoding="utf-8")
    (root / "night-shift.txt.meta.json").write_text(json.dumps(
        {"title": "Night shift checks", "version": "3", "url": "https://docs.example.org/night-shift"}), encoding="utf-8")
    (root / "levels.xlsx").write_bytes(b"PK\x03\x04 a spreadsheet sourcegate does not read")
    return root


def test_a_new_users_first_hour(tmp_path, sourcegate_home):
    index = sourcegate_home / "index.db"

    # 1. A question before anything is indexed: refused, with where it looked and what to run.
    r = run("ask", CHLORINE_Q)
    assert r.exit_code == 1
    assert r.output.strip() == (f"Error: no index at {index}: run `sourcegate --home {sourcegate_home} ingest FOLDER` "
                                f"to fill it (or `sourcegate --home {sourcegate_home} demo` for the demo library)")
    assert not sourcegate_home.exists()

    # 2. A mistyped store URL: refused with the forms that work; nothing is created.
    library = make_library(tmp_path / "my-procedures")
    r = run("ingest", str(library), "--store", "mysql://me@db/library")
    assert r.exit_code == 1 and "unsupported store URL 'mysql://me@db/library'" in r.output
    assert "sqlite:////absolute/index.db" in r.output and "postgresql://" in r.output
    assert not (tmp_path / "mysql:").exists() and not sourcegate_home.exists()
    # three slashes are relative to the working directory (tmp_path here): the refusal says so
    r = run("status", "--store", "sqlite:///srv/library/index.db")
    assert r.exit_code == 1 and f"no index at {tmp_path / 'srv' / 'library' / 'index.db'}" in r.output
    assert "sqlite://// starts an absolute path" in r.output

    # 3. The folder: every document read, the spreadsheet named with the types that are read.
    r = run("ingest", str(library))
    assert r.exit_code == 0, r.output
    assert "6 added, 0 updated, 0 unchanged, 0 removed, 0 failed, 1 skipped" in r.output
    skipped = [line for line in r.output.splitlines() if line.startswith("skipped:")]
    assert skipped == [f"skipped: {library / 'levels.xlsx'}: unsupported file type '.xlsx': sourcegate reads "
                       ".docx, .htm, .html, .json, .markdown, .md, .pdf, .txt"]

    # 4. Metadata from every format, as `status --documents` shows it.
    r = run("status", "--documents", "--json")
    assert r.exit_code == 0, r.output
    status = json.loads(r.output)
    assert status["index"] == str(index) and status["documents"] == 6
    assert status["by_status"]["archived"]["documents"] == 1 and status["by_status"]["current"]["documents"] == 5
    docs = {d["id"]: d for d in status["document_list"]}
    fields = ("title", "status", "version", "updated_at", "url")
    assert {k: docs["chlorine-r1.md"][k] for k in fields} == {  # Markdown front matter
        "title": "Chlorine analyser CA-12 calibration (Rev. 1)", "status": "archived", "version": "1",
        "updated_at": "2023-02-01", "url": None}
    assert {k: docs["chlorine-r2.md"][k] for k in fields} == {
        "title": "Chlorine analyser CA-12 calibration (Rev. 2)", "status": "current", "version": "2",
        "updated_at": "2025-06-01", "url": "https://docs.example.org/chlorine-ca12-r2"}
    assert {k: docs["hydrant.html"][k] for k in fields} == {  # <title>, <meta>, <link rel="canonical">
        "title": "Fire hydrant FH-3 flushing", "status": "current", "version": "4", "updated_at": "2024-09-30",
        "url": "https://docs.example.org/hydrant-fh3"}
    assert {k: docs["booster.docx"][k] for k in ("title", "version", "url")} == {  # DOCX core properties
        "title": "Booster pump B-12 start-up", "version": "7", "url": "https://docs.example.org/booster-b12"}
    assert docs["dosing.pdf"]["title"] == "Dosing pump DP-4 stroke calibration"  # not reportlab's "untitled"
    assert {k: docs["night-shift.txt"][k] for k in ("title", "version", "url")} == {  # the sidecar
        "title": "Night shift checks", "version": "3", "url": "https://docs.example.org/night-shift"}
    r = run("status", "--documents")
    header = r.output.splitlines()[r.output.splitlines().index("") + 1]
    assert header.split() == ["id", "status", "type", "version", "date", "chunks", "title", "url"]

    # 5. The archived revision never reaches the gate; the current one answers, cited with its URL.
    r = run("ask", CHLORINE_Q, "--json")
    assert r.exit_code == 0, r.output
    answer = json.loads(r.output)
    assert answer["status"] == "answer_from_evidence", answer
    cited = {p["doc_id"]: p for p in answer["evidence"]}
    assert "chlorine-r2.md" in cited and cited["chlorine-r2.md"]["url"] == "https://docs.example.org/chlorine-ca12-r2"
    assert cited["chlorine-r2.md"]["version"] == "2" and "14 days" in answer["answer"]
    record = json.loads((sourcegate_home / "audit.jsonl").read_text(encoding="utf-8").splitlines()[-1])
    considered = {c["doc_id"] for c in record["candidates"]}
    assert "chlorine-r2.md" in considered and "chlorine-r1.md" not in considered
    assert "30 days" not in answer["answer"]

    # 6. The PDF is cited by its heading.
    r = run("ask", DOSING_Q, "--json")
    assert r.exit_code == 0, r.output
    answer = json.loads(r.output)
    assert answer["status"] == "answer_from_evidence", answer
    pdf = [p for p in answer["evidence"] if p["doc_id"] == "dosing.pdf"]
    assert pdf and pdf[0]["title"] == "Dosing pump DP-4 stroke calibration"
    # its line in the sources (the file name in a code span: no Markdown client links `dosing.pdf`)
    assert "Dosing pump DP-4 stroke calibration (`dosing.pdf`)" in answer["answer"]

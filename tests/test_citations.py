"""Citations that point into the document: the page of a PDF passage, the heading path of a DOCX,
Markdown or HTML passage, and a deep link (`#page=N`, a heading anchor), in the answer's source
list, `ask --json`, the MCP result, REST, the audit record and the web page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from sourcegate.audit import read_records
from sourcegate.cli import cli
from sourcegate.judges.base import JudgeInput, Judgement, PassageJudgement
from sourcegate.location import deep_link, heading_anchor, location_label
from sourcegate.models import PassageScores
from sourcegate.server.app import create_app
from sourcegate.server.mcp_tool import output_schema, result_text, tool_payload
from sourcegate.service import SourceGate
from sourcegate.settings import Settings

PDF_URL = "https://docs.example.org/manuals/pump-manual.pdf"
PDF_Q = "How often should the impeller wear ring be replaced?"
MD_Q = "How often should the gland packing of valve V-40 be tightened?"
DOCX_Q = "What torque do the flange bolts of the M-7 mixer take?"
HTML_Q = "How long should the eyewash station be flushed?"

PAGES = [
    ["Pump P-9 service manual", "This manual covers the P-9 centrifugal pump of the filtration plant."],
    ["Installation", "Bolt the P-9 to its plinth with four M16 anchors and align the coupling."],
    ["Wear parts", "Replace the impeller wear ring every 4,000 operating hours, or sooner if the flow drops."],
]
VALVES_MD = """---
title: Valve maintenance guide
url: https://docs.example.org/guides/valves
---
# Valve maintenance guide

## Isolation valves

Exercise every isolation valve twice a year.

## Gland packing of V-40

Tighten the gland packing of valve V-40 by a quarter turn every 6 months.
"""
EYEWASH_HTML = """<html><head><title>Eyewash stations</title>
<link rel="canonical" href="https://docs.example.org/safety/eyewash.html"></head>
<body><h1>Eyewash stations</h1>
<h2>Weekly check</h2><p>Check the eyewash station's water flow once a week and record the check.</p>
<h2>After a splash</h2><p>Flush the eyewash station on the eye for at least 15 minutes after a chemical splash.</p>
</body></html>
"""


def _pdf(path: Path) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for heading, line in PAGES:
        c.setFont("Helvetica-Bold", 16)
        c.drawString(40, 800, heading)
        c.setFont("Helvetica", 10)
        c.drawString(40, 770, line)
        c.showPage()
    c.save()


def _docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_heading("Mixer M-7 manual", level=1)
    d.add_heading("Assembly", level=2)
    d.add_heading("Flange bolts", level=3)
    d.add_paragraph("Tighten the flange bolts of the M-7 mixer to a torque of 45 N·m in a cross pattern.")
    d.core_properties.title = "Mixer M-7 manual"
    d.save(str(path))


# A DOCX as SharePoint serves it: Word opens it at its start whatever the fragment, so the link is
# the URL as it is, though its path does not end in .docx.
DOCX_URL = "https://contoso.sharepoint.com/:w:/r/sites/ops/_layouts/15/Doc.aspx?sourcedoc=%7B1A2B%7D&action=default"


class TermJudge:
    """Evidence where a passage holds the subject word of the question."""

    name = "term-test"
    SUBJECTS = {PDF_Q: "impeller", MD_Q: "gland", DOCX_Q: "flange", HTML_Q: "Flush"}

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        word = self.SUBJECTS[query]
        out = []
        for p in passages:
            hit = word in p.text
            out.append(PassageJudgement(p.id, PassageScores(
                is_relevant=0.95 if hit else 0.05, contains_answer_evidence=0.9 if hit else 0.05,
                contradicts_query_premise=0.02, contains_prompt_injection=0.02, is_superseded=0.02)))
        return Judgement(model="term-test-1", results=out)


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("citations")
    library = root / "library"
    library.mkdir()
    _pdf(library / "pump-manual.pdf")
    (library / "pump-manual.pdf.meta.json").write_text(json.dumps({"url": PDF_URL}), encoding="utf-8")
    (library / "valves.md").write_text(VALVES_MD, encoding="utf-8")
    (library / "eyewash.html").write_text(EYEWASH_HTML, encoding="utf-8")
    _docx(library / "mixer-m7.docx")
    (library / "mixer-m7.docx.meta.json").write_text(json.dumps({"url": DOCX_URL}), encoding="utf-8")
    r = CliRunner().invoke(cli, ["--home", str(root / "home"), "ingest", str(library)])
    assert r.exit_code == 0 and "4 added" in r.output, r.output
    return root / "home"


@pytest.fixture()
def gate(home, tmp_path):
    g = SourceGate(Settings(_env_file=None, home=home, audit_log_path=tmp_path / "audit.jsonl",
                            mcp_allowed_hosts="testserver"), judge=TermJudge())
    yield g
    g.close()


def test_location_helpers():
    assert deep_link("https://x.org/m.pdf", page=7) == "https://x.org/m.pdf#page=7"
    assert deep_link("https://x.org/guide", heading="Guide > Gland packing of V-40") == "https://x.org/guide#gland-packing-of-v-40"
    assert deep_link("https://x.org/m.docx", heading="Manual > Assembly") == "https://x.org/m.docx"
    # the format is the document's, whatever the URL's path ends with
    assert deep_link(DOCX_URL, heading="Manual > Assembly", name="manuals/m.docx") == DOCX_URL
    assert deep_link("https://x.org/notes", heading="A > B", name="notes.txt") == "https://x.org/notes"
    assert deep_link("https://x.org/guide", heading="A > B", name="guide.md") == "https://x.org/guide#b"
    assert deep_link("https://x.org/g#already", heading="A > B") == "https://x.org/g#already"
    assert deep_link(None, page=3) is None
    assert heading_anchor("Bearings: grease & check") == "bearings-grease--check"
    assert location_label(3, None) == "p. 3" and location_label(None, "A > B") == "§ A > B"
    assert location_label(None, None) is None


def test_a_pdf_answer_cites_its_page_with_a_page_link(gate):
    r = gate.ask(PDF_Q, interface="python")
    assert r.status == "answer_from_evidence"
    p = r.evidence[0]
    assert p.doc_id == "pump-manual.pdf" and p.page == 3
    assert p.link == PDF_URL + "#page=3" and p.url == PDF_URL
    # the answer's source list: page and deep link
    assert f"[1] Pump P-9 service manual (`pump-manual.pdf`), p. 3 `{PDF_URL}#page=3`" in r.answer
    # the MCP result, structured and as text, validated against the tool's output schema
    data = tool_payload(r)
    assert data["evidence"][0]["page"] == 3 and data["evidence"][0]["link"].endswith("#page=3")
    assert "p. 3" in result_text(data) and "#page=3" in result_text(data)
    props = output_schema()["properties"]["evidence"]["items"]["properties"]
    assert {"page", "section", "link"} <= set(props)
    # the audit record
    rec = next(rec for _, rec, _ in read_records(gate.settings.audit_path) if rec["audit_id"] == r.audit_id)
    cited = [c for c in rec["candidates"] if c["route"] == "evidence"]
    assert cited and cited[0]["page"] == 3


@pytest.mark.parametrize("query, doc_id, section, link", [
    (MD_Q, "valves.md", "Valve maintenance guide > Gland packing of V-40",
     "https://docs.example.org/guides/valves#gland-packing-of-v-40"),
    (HTML_Q, "eyewash.html", "Eyewash stations > After a splash",
     "https://docs.example.org/safety/eyewash.html#after-a-splash"),
    (DOCX_Q, "mixer-m7.docx", "Mixer M-7 manual > Assembly > Flange bolts", DOCX_URL),
])
def test_heading_paths_and_anchors(gate, query, doc_id, section, link):
    r = gate.ask(query, interface="python")
    assert r.status == "answer_from_evidence"
    p = r.evidence[0]
    assert p.doc_id == doc_id and p.section == section and p.page is None
    assert p.link == link
    source = next(line for line in r.answer.splitlines() if line.startswith("[1] "))
    assert f"§ {section}" in source
    assert (f"`{link}`" in source) if link else ("http" not in source)


def test_rest_and_cli_json_carry_the_location(gate, home, tmp_path):
    with TestClient(create_app(gate.settings, gate)) as client:
        body = client.post("/v1/ask", json={"query": PDF_Q}).json()
        page = client.get("/").text
    assert body["evidence"][0]["page"] == 3 and body["evidence"][0]["link"] == PDF_URL + "#page=3"
    # the web page shows the place and links to the deep link
    assert "p.link || p.url" in page and '"p. " + p.page' in page and '"§ " + p.section' in page

    # `ask --json`, judged by the scores the gate above recorded (an audit log replays as a judge)
    gate.ask(MD_Q, interface="python")
    r = CliRunner().invoke(cli, ["--home", str(home), "ask", "--json", MD_Q], env={
        "SOURCEGATE_JUDGE": "recorded", "SOURCEGATE_RECORDED_SCORES": str(gate.settings.audit_path),
        "AUDIT_LOG_PATH": str(tmp_path / "cli.jsonl")})
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["evidence"][0]["section"] == "Valve maintenance guide > Gland packing of V-40"
    assert out["evidence"][0]["link"] == "https://docs.example.org/guides/valves#gland-packing-of-v-40"


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_web_page_shows_the_place_and_links_there():
    """The page's own `place()` and `renderSources()` run in node over a stub DOM: the source's
    link is the deep link, and its line says the page or the section."""
    page = (Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "server" / "static" / "index.html").read_text()
    funcs = "".join(re.search(r"\n(?://[^\n]*\n)*function " + name + r"\(.*?\n\}\n", page, re.S).group(0)
                    for name in ("el", "safeUrl", "place", "passageText", "citedPassages", "renderSources"))
    script = """
const made = [];
function fake(tag) { const e = {tag, children: [], textContent: "", append(...c) { this.children.push(...c); },
  addEventListener() {}, set href(v) { this._href = v; }, get href() { return this._href; }}; made.push(e); return e; }
const document = {createElement: fake};
const location = {href: "http://127.0.0.1:8000/"};
const els = {citations: fake("ol")};
const $ = id => els[id];
""" + funcs + """
const r = {status: "answer_from_evidence", answer: "x [1] [2]", conflicts: [], evidence: [
  {id: "a#1", doc_id: "pump.pdf", title: "Pump manual", url: "https://d.example/pump.pdf", page: 3,
   section: null, link: "https://d.example/pump.pdf#page=3", text: "t"},
  {id: "b#1", doc_id: "v.md", title: "Valves", url: "https://d.example/v", page: null,
   section: "Valves > Gland packing", link: "https://d.example/v#gland-packing", text: "t"}]};
renderSources(r);
const items = els.citations.children;
console.log(JSON.stringify(items.map(li => ({href: li.children[0].href,
  about: li.children[1].textContent}))));
"""
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got[0]["href"] == "https://d.example/pump.pdf#page=3" and got[0]["about"].startswith(" — p. 3 · ")
    assert got[1]["href"] == "https://d.example/v#gland-packing"
    assert got[1]["about"].startswith(" — § Valves > Gland packing · ")

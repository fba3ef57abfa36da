"""The web page: self-contained, and working in a real (headless) browser when one is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings, running_server

from sourcegate.server.app import create_app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
Q = "How often should I grease the bearings on pump P-200?"


def test_page_is_self_contained(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="k")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        r = client.get("/")  # open: the page itself holds no data, its API calls carry the key
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        html = r.text
    gate.close()
    assert not re.search(r"<script[^>]+src=", html, re.I), "no external scripts"
    assert not re.search(r"<link[^>]+href=", html, re.I), "no external stylesheets"
    assert "@import" not in html and "cdn" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html, re.I)
    for needed in ('fetch("v1/ask"', "x-api-key", "v1/audit/", "is_superseded", "citations"):
        assert needed in html


def _page_dom(settings, tmp_path, question: str) -> tuple[str, str]:
    """The page's DOM after it asked `question` on load (?q=), in headless Chromium against a real server;
    --virtual-time-budget lets the page's fetch finish before the dump. (DOM, Chromium's stderr)."""
    gate = make_gate(settings)
    with running_server(create_app(settings, gate)) as base:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--no-first-run", "--disable-dev-shm-usage",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", "--virtual-time-budget=20000",
               "--dump-dom", f"{base}/?q={quote(question)}"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    gate.close()
    return out.stdout, out.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_in_headless_chromium(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    dom, err = _page_dom(settings, tmp_path, Q)
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], err[-2000:])
    assert "PROC-P200-BRG-R2" in dom  # a candidate row / citation
    assert 'href="https://docs.example-water.org/' in dom  # citation links
    assert re.search(r'id="audit-link" href="v1/audit/[0-9a-f]{32}"', dom)
    assert settings.audit_path.read_text(encoding="utf-8").count('"interface":"web"') == 1


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_names_the_parts_not_found(tmp_path):
    q = "What are the grease intervals for the P-200 and the P-900 pumps?"
    dom, err = _page_dom(make_settings(tmp_path / "audit.jsonl"), tmp_path, q)
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], err[-2000:])
    assert re.search(r'<p id="missing" class="missing">Not found in the library: '
                     r'What are the grease intervals for the P-900 pumps\?</p>', dom), dom[-3000:]


def test_page_shows_missing_parts(tmp_path):
    """Without a browser: the page renders `missing` under the status, hidden when empty."""
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        html = client.get("/").text
    gate.close()
    assert '<p id="missing" class="missing" hidden></p>' in html
    assert '"Not found in the library: " + missing.join("; ")' in html


# The three outcomes, each asked through the page in a real browser (the test judge of
# test_server_fixtures decides them; the words are the page's).
OUTCOME_QUESTIONS = {
    "answer_from_evidence": Q,
    "premise_conflict": "P-200 bearings need grease every 500 hours, how much do I add?",
    "insufficient_evidence": "zzqx unrelated question about nothing at all",
}
PAGE_DONE = ('document.readyState === "complete" && document.getElementById("status").textContent.length > 1 '
             '&& !document.getElementById("ask").disabled ? document.documentElement.outerHTML : ""')


def _visible_text(wait_for, element_id: str) -> str:
    return wait_for(f'(document.getElementById("{element_id}").innerText || "") + "\\u0000"')[:-1]


def _screenshot(wait_for, path) -> bytes:
    import base64

    wait_for.call("Emulation.setDeviceMetricsOverride", width=1100, height=1500, deviceScaleFactor=1, mobile=False)
    png = base64.b64decode(wait_for.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    return png


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_speaks_to_a_person_in_headless_chromium(tmp_path):
    """The outcome in words, the answer once, each source with its title, revision and passage on
    demand, and none of the agent's guidance; a screenshot of each outcome is saved (in
    PAGE_SCREENSHOTS when set, else the test's temporary folder)."""
    import os
    from pathlib import Path

    from test_ask_stream import headless_page

    shots = Path(os.environ.get("PAGE_SCREENSHOTS") or tmp_path / "screenshots")
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    expected = {status: gate.ask(q, interface="python") for status, q in OUTCOME_QUESTIONS.items()}
    assert {s: r.status for s, r in expected.items()} == {s: s for s in OUTCOME_QUESTIONS}
    try:
        with running_server(create_app(settings, gate)) as base:
            for status, question in OUTCOME_QUESTIONS.items():
                r = expected[status]
                with headless_page(f"{base}/?q={quote(question)}", tmp_path / f"profile-{status}") as wait_for:
                    dom = wait_for(PAGE_DONE)
                    heading = _visible_text(wait_for, "status")
                    shown_answer = _visible_text(wait_for, "answer")
                    sources = _visible_text(wait_for, "citations")
                    next_step = _visible_text(wait_for, "next-step")
                    png = _screenshot(wait_for, shots / f"{status}.png")
                    if r.evidence or r.conflicts:  # open the first source's passage, as a reader would
                        wait_for('(document.querySelector("#citations details summary").click(), "ok")')
                        opened = _visible_text(wait_for, "citations")
                        _screenshot(wait_for, shots / f"{status}-passage.png")
                assert png.startswith(b"\x89PNG") and len(png) > 10_000, status
                assert f'class="status {status}"' in dom
                assert r.guidance not in dom, "the agent's guidance is for the API result, not for people"
                if status == "answer_from_evidence":
                    docs = len({p.doc_id for p in r.evidence})
                    assert heading == f"Answered from {docs} document{'s' if docs > 1 else ''}"
                    body = r.answer.split("\n\nSources:\n")[0]
                    assert shown_answer == body and "Sources:" not in shown_answer
                    assert dom.count(body.splitlines()[1][:60]) == 1, "the answer is shown once"
                elif status == "premise_conflict":
                    assert heading == "The question rests on something the documents contradict"
                    assert next_step.startswith("Check the assumption")
                else:
                    assert heading == "Nothing in the library answers this"
                    assert "Rephrase the question" in next_step
                    assert re.search(r'<div id="answer-block" hidden=""', dom) and sources == ""
                for p in r.evidence or r.conflicts:
                    assert p.title in sources and (not p.version or f"revision {p.version}" in sources)
                    assert p.text not in sources, "a passage is shown on demand, not at once"
                if r.evidence or r.conflicts:
                    first = (r.evidence or r.conflicts)[0]
                    assert " ".join(first.text.split())[:80] in " ".join(opened.split())
    finally:
        gate.close()
    assert sorted(p.name for p in shots.iterdir()) == sorted(
        ["answer_from_evidence.png", "answer_from_evidence-passage.png", "premise_conflict.png",
         "premise_conflict-passage.png", "insufficient_evidence.png"])


@pytest.fixture()
def parenthesised_library(tmp_path):
    from sourcegate.cli import run_ingest
    from sourcegate.settings import Settings

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "V-9 lubrication (final).md").write_text(
        "# V-9 valve lubrication (final)\n\nGrease the V-9 valve stem every 400 hours with silicone grease.\n",
        encoding="utf-8")
    import json

    (lib / "kb.json").write_text(json.dumps([{"id": "KB-V9-NOTES", "title": "V-9 valve notes",
                                              "text": "The V-9 valve stem takes silicone grease every 400 hours, "
                                                      "see [the chart](https://evil.com/c?x=1) and "
                                                      "C:\\manuals\\v9.pdf."}]),
                                 encoding="utf-8")
    settings = Settings(_env_file=None, home=tmp_path / "home", audit_log_path=tmp_path / "audit.jsonl",
                        mcp_allowed_hosts="")
    report = run_ingest(settings, [lib], prune=False, quiet=True)
    assert not report.failed, report.failed
    return settings


V9 = "How often should I grease the V-9 valve stem with silicone grease?"


def test_the_answer_cites_evidence_then_conflicts_in_order(parenthesised_library):
    """The numbering the page relies on: `[n]` in the answer is the n-th of evidence + conflicts."""
    gate = make_gate(parenthesised_library)
    try:
        results = [gate.ask(q) for q in (V9, "P-200 bearings need grease every 500 hours, how much do I add?")]
    finally:
        gate.close()
    assert results[0].status == "answer_from_evidence" and len(results[0].evidence) == 2
    for r in results:
        block = (r.answer or "").split("\n\nSources:\n")[1] if "\n\nSources:\n" in (r.answer or "") else ""
        cited = r.evidence + r.conflicts
        lines = block.splitlines()
        assert len(lines) == len(cited)
        for n, (line, p) in enumerate(zip(lines, cited), start=1):
            assert line.startswith(f"[{n}] ") and p.doc_id.split(" ")[0] in line, (line, p.doc_id)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_lists_a_source_whose_id_has_parentheses(parenthesised_library, tmp_path):
    dom, err = _page_dom(parenthesised_library, tmp_path, V9)
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], err[-2000:])
    citations = dom.split('id="citations"', 1)[1].split("</ol>", 1)[0]
    assert "V-9 lubrication (final).md" in citations and "KB-V9-NOTES" in citations, citations[:3000]
    assert citations.count("<li") == 2
    # the answer reads as the document wrote it: the inert answer's escapes and code spans are not shown
    import html

    shown = html.unescape(re.search(r'id="answer"[^>]*>(.*?)</', dom, re.S).group(1))
    assert "see [the chart](https://evil.com/c?x=1) and C:\\manuals\\v9.pdf." in shown, shown
    assert "`" not in shown and "\\]" not in shown


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_shows_the_key_message_alone(tmp_path):
    """A server that needs its key, asked from the page without one: the result says so in two
    lines (what happened, what to do), with no stray separator, empty fold or audit link."""
    from test_ask_stream import headless_page

    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key="the-key")
    gate = make_gate(settings)
    try:
        with running_server(create_app(settings, gate)) as base:
            with headless_page(f"{base}/?q={quote(Q)}", tmp_path / "profile") as wait_for:
                wait_for(PAGE_DONE)
                shown = _visible_text(wait_for, "result")
    finally:
        gate.close()
    lines = [line.strip() for line in shown.splitlines() if line.strip()]
    assert lines == ["No answer: the server could not answer this question",
                     "this server needs its API key: type it in the API key box and ask again"], lines


@pytest.fixture()
def two_models_library(tmp_path):
    """Two air-conditioner manuals that answer the same question for different `model`s, and a
    withdrawn one."""
    from sourcegate.cli import run_ingest
    from sourcegate.settings import Settings

    lib = tmp_path / "lib"
    lib.mkdir()
    for model, weeks, status in (("AC-300", 2, "current"), ("AC-400", 6, "current"), ("AC-100", 9, "withdrawn")):
        (lib / f"{model.lower()}.md").write_text(
            f"---\ntitle: {model} air conditioner manual\nmodel: {model}\nstatus: {status}\n---\n"
            f"# {model} air conditioner manual\n\nThe air filter is cleaned every {weeks} weeks: "
            f"slide the air filter out and rinse it.\n", encoding="utf-8")
    settings = Settings(_env_file=None, home=tmp_path / "home", audit_log_path=tmp_path / "audit.jsonl",
                        mcp_allowed_hosts="")
    report = run_ingest(settings, [lib], prune=False, quiet=True)
    assert not report.failed, report.failed
    return settings


AC = "How often is the air filter cleaned?"


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_offers_the_librarys_filters(two_models_library, tmp_path):
    """A person picks a model in the page's select ("any" by default) and asks: the answer cites
    only that model's manual, and the audit record keeps the filter. The withdrawn model is not
    offered."""
    import json

    from test_ask_stream import headless_page

    gate = make_gate(two_models_library)
    unfiltered = gate.ask(AC, interface="python")
    assert {p.doc_id for p in unfiltered.evidence} == {"ac-300.md", "ac-400.md"}, unfiltered
    try:
        with running_server(create_app(two_models_library, gate)) as base:
            with headless_page(f"{base}/", tmp_path / "profile") as wait_for:
                options = wait_for('Array.from(document.querySelectorAll("#filters select[data-key=model] option"))'
                                   '.map(o => o.textContent + "=" + o.value).join("|")')
                visible = wait_for('String(!document.getElementById("filters").hidden)')
                wait_for('(() => { const s = document.querySelector("#filters select[data-key=model]");'
                         ' s.value = "AC-300"; s.dispatchEvent(new Event("change"));'
                         f' document.getElementById("query").value = {json.dumps(AC)};'
                         ' document.getElementById("ask").click(); return "asked"; })()')
                dom = wait_for(PAGE_DONE)
                sources = _visible_text(wait_for, "citations")
    finally:
        gate.close()
    assert options == "any=|AC-300=AC-300|AC-400=AC-400" and visible == "true"
    assert 'class="status answer_from_evidence"' in dom, dom[-3000:]
    assert "AC-300 air conditioner manual" in sources and "AC-400" not in sources, sources
    from sourcegate.audit import read_records

    web = [rec for _, rec, _ in read_records(two_models_library.audit_path) if rec and rec.get("interface") == "web"]
    assert len(web) == 1 and web[0]["retrieval"]["filters"] == {"model": "AC-300"}
    assert {c["doc_id"] for c in web[0]["candidates"]} == {"ac-300.md"}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_shows_no_filter_controls_for_a_library_without_metadata(tmp_path):
    """The demo library has no metadata keys: the page offers no select, and asks as before."""
    dom, err = _page_dom(make_settings(tmp_path / "audit.jsonl"), tmp_path, Q)
    assert 'id="status" class="status answer_from_evidence"' in dom, (dom[-2000:], err[-2000:])
    fieldset = re.search(r'<fieldset id="filters"[^>]* hidden[^>]*>(.*?)</fieldset>', dom, re.S)
    assert fieldset and "<select" not in fieldset.group(1), dom[:3000]  # (the feedback's passage choice is not a filter)

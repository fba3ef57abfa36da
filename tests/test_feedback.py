"""Feedback on answers (REST, MCP, the web page in Chromium, the command line), stored append-only
beside the library (SQLite, PostgreSQL), and exported as labelled questions `sourcegate eval` reads."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.testclient import TestClient
from test_server_fixtures import demo_home, make_gate, make_settings, run_async, running_server

from sourcegate.cli import cli
from sourcegate.evaluation.cases import load_cases
from sourcegate.feedback import (FeedbackError, FeedbackRequest, LabelError, PostgresFeedbackStore,
                                 SqliteFeedbackStore, UnknownAnswer, export_labels, library_fingerprint,
                                 open_feedback, record_feedback)
from sourcegate.server.app import create_app
from sourcegate.server.mcp_tool import feedback_input_schema, feedback_output_schema
from sourcegate.settings import Settings

Q = "How often should I grease the bearings on pump P-200?"
PREMISE = "P-200 bearings need grease every 500 hours, how much do I add?"
KEY = "feedback-test-key"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def library_settings(tmp_path: Path, **kw) -> Settings:
    """The shared demo index, with a home (and so a feedback.db) and an audit log of this test's own."""
    kw.setdefault("mcp_allowed_hosts", "testserver")
    return Settings(_env_file=None, home=tmp_path / "home", store_url=str(demo_home() / "index.db"),
                    audit_log_path=tmp_path / "audit.jsonl", **kw)


def other_passage(result) -> tuple[str, str]:
    """A passage of the answer that it did not cite (an excluded one): (id, doc_id)."""
    cited = {p.doc_id for p in result.evidence + result.conflicts}
    x = next(x for x in result.excluded if x.doc_id not in cited)
    return x.id, x.doc_id


# -- the core: checks and storage -------------------------------------------------------------


def test_feedback_is_tied_to_an_answer_and_append_only(tmp_path):
    settings = library_settings(tmp_path)
    gate = make_gate(settings)
    store = open_feedback(settings)
    try:
        r = gate.ask(Q, interface="python")
        pid, _ = other_passage(r)
        row = record_feedback(FeedbackRequest(r.audit_id, "wrong", passage_id=pid, note="see the seal procedure",
                                              by="Ana"), store, gate.audit, gate.store, interface="cli")
        assert row.id and row.seq == 1 and row.by == "Ana" and row.answer_status == r.status
        again = record_feedback(FeedbackRequest(r.audit_id, "right"), store, gate.audit, gate.store)
        assert again.by == "anonymous" and again.seq == 2  # a second opinion is another row
        assert [x.verdict for x in store.rows(r.audit_id)] == ["wrong", "right"]

        with pytest.raises(UnknownAnswer, match="no answer with the audit id 0123"):
            record_feedback(FeedbackRequest("0123" * 8, "wrong"), store, gate.audit, gate.store)
        with pytest.raises(FeedbackError, match="'NOPE#0001' is not among the answer's passages and the library"):
            record_feedback(FeedbackRequest(r.audit_id, "wrong", passage_id="NOPE#0001"), store, gate.audit, gate.store)
        with pytest.raises(FeedbackError, match="premise_false says a passage contradicts"):
            record_feedback(FeedbackRequest(r.audit_id, "premise_false", no_passage_answers=True), store, gate.audit,
                            gate.store)
        with pytest.raises(FeedbackError, match="not both"):
            record_feedback(FeedbackRequest(r.audit_id, "wrong", passage_id=pid, no_passage_answers=True), store,
                            gate.audit, gate.store)
        assert len(store.rows()) == 2  # nothing stored from the refusals
    finally:
        store.close()
        gate.close()
    con = sqlite3.connect(settings.home / "feedback.db")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("UPDATE feedback SET verdict = 'right'")
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        con.execute("DELETE FROM feedback")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    con.close()


def test_feedback_on_postgresql(postgres_url, tmp_path):
    settings = library_settings(tmp_path)
    gate = make_gate(settings)
    r = gate.ask(Q, interface="python")
    pg_settings = Settings(_env_file=None, home=tmp_path / "home", store_url=postgres_url)
    store = open_feedback(pg_settings)
    assert isinstance(store, PostgresFeedbackStore)
    try:
        row = record_feedback(FeedbackRequest(r.audit_id, "wrong", no_passage_answers=True, by="Bo"), store,
                              gate.audit, gate.store, interface="rest")
        PostgresFeedbackStore(postgres_url)  # opening again (another process) keeps the table and its rows
        assert [(x.id, x.no_passage_answers, x.by) for x in store.rows()] == [(row.id, True, "Bo")]
    finally:
        gate.close()
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="append-only"):
            conn.execute("DELETE FROM feedback")
    assert not (tmp_path / "home" / "feedback.db").exists()


# -- REST ---------------------------------------------------------------------------------------


def test_rest_feedback(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key=KEY)
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate), headers={"x-api-key": KEY}) as client:
        answer = client.post("/v1/ask", json={"query": Q}).json()
        pid = next(x["id"] for x in answer["excluded"])
        r = client.post("/v1/feedback", json={"audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": pid,
                                              "note": "the seal procedure says it", "by": "Ana"})
        assert r.status_code == 201, r.text
        row = r.json()
        assert (row["verdict"], row["passage_id"], row["by"], row["interface"]) == ("wrong", pid, "Ana", "rest")
        # the reply is what the Power Platform connector declares (an action whose reply breaks its schema fails)
        import jsonschema
        from test_connector import _nullable

        declared = json.loads((Path(__file__).parents[1] / "connector" / "apiDefinition.swagger.json").read_text())
        op = declared["paths"]["/v1/feedback"]["post"]
        jsonschema.validate(row, _nullable(op["responses"]["201"]["schema"]))
        body_schema = next(p for p in op["parameters"] if p["in"] == "body")["schema"]
        jsonschema.validate({"audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": pid}, body_schema)

        def refused(body, status, words):
            resp = client.post("/v1/feedback", json=body)
            assert resp.status_code == status and words in resp.json()["error"], resp.text

        refused({"audit_id": answer["audit_id"], "verdict": "meh"}, 400, "unknown verdict 'meh'")
        refused({"audit_id": "f" * 32, "verdict": "wrong"}, 404, "no answer with the audit id")
        refused({"audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": "NOT-IN-LIBRARY#0001"}, 400,
                "library holds no passage")
        refused({"audit_id": answer["audit_id"], "verdict": "wrong", "passage_id": pid, "no_passage_answers": True},
                400, "not both")
        refused({"verdict": "wrong"}, 400, "audit_id is missing")
        bad = client.post("/v1/feedback", content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
        # the same API-key rule as /v1/ask
        assert client.post("/v1/feedback", json={"audit_id": answer["audit_id"], "verdict": "right"},
                           headers={"x-api-key": "wrong"}).status_code == 401
        paths = client.get("/openapi.json").json()["paths"]
        assert paths["/v1/feedback"]["post"]["operationId"] == "GiveFeedback"
    gate.close()
    store = open_feedback(settings)
    assert [x.id for x in store.rows(answer["audit_id"])] == [row["id"]]  # nothing from the refusals
    store.close()


# -- MCP ----------------------------------------------------------------------------------------


def _refs(obj) -> bool:
    if isinstance(obj, dict):
        return any(k in ("$ref", "$defs") for k in obj) or any(_refs(v) for v in obj.values())
    return isinstance(obj, list) and any(_refs(v) for v in obj)


def test_mcp_give_feedback(tmp_path):
    assert not _refs(feedback_input_schema()) and not _refs(feedback_output_schema())
    settings = make_settings(tmp_path / "audit.jsonl", mcp_api_key=KEY)
    gate = make_gate(settings)
    app = create_app(settings, gate)

    async def main():
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver",
                                      headers={"x-api-key": KEY})
            async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    tools = (await session.list_tools()).tools
                    assert [t.name for t in tools] == ["search_procedures", "give_feedback"]
                    answer = (await session.call_tool("search_procedures", {"query": PREMISE})).structured_content
                    pid = (answer["conflicts"] or answer["evidence"] or answer["excluded"])[0]["id"]
                    given = await session.call_tool("give_feedback", {"audit_id": answer["audit_id"],
                                                                      "verdict": "premise_false", "passage_id": pid})
                    unknown = await session.call_tool("give_feedback", {"audit_id": "a" * 32, "verdict": "wrong"})
                    bad = await session.call_tool("give_feedback", {"audit_id": answer["audit_id"], "verdict": "no"})
                    return answer, given, unknown, bad

    answer, given, unknown, bad = run_async(main, 60)
    gate.close()
    assert not given.is_error and "Thanks, recorded" in given.content[0].text
    row = given.structured_content
    assert (row["audit_id"], row["verdict"], row["interface"]) == (answer["audit_id"], "premise_false", "mcp")
    assert unknown.is_error and "no answer with the audit id" in unknown.content[0].text
    assert bad.is_error and "unknown verdict" in bad.content[0].text


# -- the web page -------------------------------------------------------------------------------


def test_page_has_feedback_controls(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        html = client.get("/").text
    gate.close()
    for needed in ('fetch("v1/feedback"', 'data-verdict="wrong"', 'data-verdict="premise_false"',
                   "no passage answers", "Thanks, recorded (id "):
        assert needed in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium) - real-browser test skipped")
def test_page_marks_an_answer_wrong_in_headless_chromium(tmp_path):
    from test_ask_stream import headless_page

    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    done = ('document.getElementById("feedback") && !document.getElementById("feedback").hidden '
            '&& document.getElementById("feedback-passage").options.length > 2 ? "ready" : ""')
    try:
        with running_server(create_app(settings, gate)) as base:
            with headless_page(f"{base}/?q={quote(Q)}", tmp_path / "profile") as wait_for:
                wait_for(done)
                # a passage the answer did not cite: the last real option before "no passage answers"
                pid = wait_for('(() => { const s = document.getElementById("feedback-passage");'
                               ' s.selectedIndex = s.options.length - 2; return s.value; })()')
                wait_for('(document.getElementById("feedback-by").value = "Chris", '
                         'document.getElementById("feedback-wrong").click(), "clicked")')
                shown = wait_for('document.getElementById("feedback-result").textContent')
                audit_id = wait_for('document.getElementById("audit-link").dataset.auditId')
    finally:
        gate.close()
    assert shown.startswith("Thanks, recorded (id "), shown
    store = open_feedback(settings)
    rows = store.rows(audit_id)
    store.close()
    assert [(r.verdict, r.passage_id, r.by, r.interface) for r in rows] == [("wrong", pid, "Chris", "web")]
    assert rows[0].id in shown


# -- export -------------------------------------------------------------------------------------


def _answers(tmp_path):
    """A library with its own home and audit log, three answers, and feedback on them."""
    settings = library_settings(tmp_path)
    gate = make_gate(settings)
    store = open_feedback(settings)
    answered = gate.ask(Q, interface="python")
    premise = gate.ask(PREMISE, interface="python")
    nothing = gate.ask("How do I recalibrate the chlorine analyser?", interface="python")
    return settings, gate, store, answered, premise, nothing


def test_export_maps_each_verdict_and_lists_disagreements(tmp_path):
    settings, gate, store, answered, premise, nothing = _answers(tmp_path)
    try:
        pid, pdoc = other_passage(answered)
        cited_docs = {p.doc_id for p in answered.evidence}
        record_feedback(FeedbackRequest(answered.audit_id, "wrong", passage_id=pid, by="Ana"), store, gate.audit, gate.store)
        conflict_id = (premise.conflicts or premise.evidence)[0].id
        record_feedback(FeedbackRequest(premise.audit_id, "premise_false", passage_id=conflict_id, by="Ana"), store,
                        gate.audit, gate.store)
        record_feedback(FeedbackRequest(nothing.audit_id, "wrong", no_passage_answers=True, by="Ana"), store,
                        gate.audit, gate.store)
        # Bo disagrees with Ana on the first question: it is listed and left out
        record_feedback(FeedbackRequest(answered.audit_id, "right", by="Bo"), store, gate.audit, gate.store)
        # wrong, without saying what is right: no label
        record_feedback(FeedbackRequest(nothing.audit_id, "wrong", by="Cy"), store, gate.audit, gate.store)
        result = export_labels(store.rows(), gate.audit, gate.store)
    finally:
        store.close()
    by_query = {x["query"]: x for x in result.labels}
    assert Q not in by_query
    [conflict] = result.conflicts
    assert conflict["query"] == Q and {c["by"] for c in conflict["labels"]} == {"Ana", "Bo"}
    p = by_query[PREMISE]
    assert p["expected_status"] == "premise_conflict" and p["expected_passages"] == [conflict_id]
    n = by_query["How do I recalibrate the chlorine analyser?"]
    assert n["expected_status"] == "insufficient_evidence" and n["expected_sources"] == []
    assert result.skipped == {"wrong without a passage": 1}
    assert all(x["library"] == library_fingerprint(gate.store) and x["audit_id"] for x in result.labels)
    fp = library_fingerprint(gate.store)
    assert fp["documents"] > 0 and fp["passages"] >= fp["documents"] and len(fp["sha256"]) == 64

    # a hand-written line marked final settles the question
    settle = tmp_path / "settle.jsonl"
    settle.write_text(json.dumps({"query": Q, "expected_status": "answer_from_evidence", "expected_sources": [pdoc],
                                  "forbidden_sources": sorted(cited_docs - {pdoc}), "final": True, "by": "Lead",
                                  "must_state": ["grease"]}) + "\n")
    store = open_feedback(settings)
    merged = export_labels(store.rows(), gate.audit, gate.store, [settle])
    store.close()
    gate.close()
    assert not merged.conflicts
    q = next(x for x in merged.labels if x["query"] == Q)
    assert q["expected_sources"] == [pdoc] and q["labelled_by"] == ["Lead"] and q["must_state"] == ["grease"]


def test_export_refuses_bad_label_files_and_unknown_passages(tmp_path):
    settings, gate, store, answered, premise, nothing = _answers(tmp_path)
    rows = store.rows()
    store.close()
    try:
        not_lines = tmp_path / "array.json"
        not_lines.write_text(json.dumps([{"query": Q, "expected_status": "answer_from_evidence"}]))
        with pytest.raises(LabelError, match=r"array.json:1: a JSON list, not an object"):
            export_labels(rows, gate.audit, gate.store, [not_lines])
        no_status = tmp_path / "no-status.jsonl"
        no_status.write_text(json.dumps({"query": Q, "expected_sources": []}) + "\n")
        with pytest.raises(LabelError, match=r"no-status.jsonl:1: each case needs 'query' and 'expected_status'"):
            export_labels(rows, gate.audit, gate.store, [no_status])
        ghost = tmp_path / "ghost.jsonl"
        ghost.write_text(json.dumps({"query": Q, "expected_status": "answer_from_evidence",
                                     "expected_sources": ["PROC-P200-BRG-R2"],
                                     "expected_passages": ["PROC-P200-BRG-R2#9999-deadbeef"]}) + "\n")
        with pytest.raises(LabelError, match=r"does not hold the passage 'PROC-P200-BRG-R2#9999-deadbeef' \(.*ghost.jsonl:1\)"):
            export_labels(rows, gate.audit, gate.store, [ghost])
        ghost_doc = tmp_path / "ghost-doc.jsonl"
        ghost_doc.write_text(json.dumps({"query": Q, "expected_status": "answer_from_evidence",
                                         "expected_sources": ["NO-SUCH-DOC"]}) + "\n")
        with pytest.raises(LabelError, match=r"the document 'NO-SUCH-DOC'"):
            export_labels(rows, gate.audit, gate.store, [ghost_doc])
    finally:
        gate.close()


def test_export_skips_redacted_questions(tmp_path):
    settings = library_settings(tmp_path, audit_redact_query=True)
    gate = make_gate(settings)
    store = open_feedback(settings)
    try:
        r = gate.ask(Q, interface="python")
        record_feedback(FeedbackRequest(r.audit_id, "right"), store, gate.audit, gate.store)
        result = export_labels(store.rows(), gate.audit, gate.store)
    finally:
        store.close()
        gate.close()
    assert result.labels == [] and result.skipped == {"redacted": 1}


# -- the command line, then `sourcegate eval` on the export -------------------------------------


def test_feedback_commands_then_eval_on_the_export(tmp_path, monkeypatch):
    settings, gate, store, answered, premise, nothing = _answers(tmp_path)
    store.close()
    pid, pdoc = other_passage(answered)
    gate.close()
    env = {"SOURCEGATE_HOME": str(settings.home), "SOURCEGATE_STORE": str(demo_home() / "index.db"),
           "AUDIT_LOG_PATH": str(settings.audit_path)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)

    def run(*args):
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    r = run("feedback", "add", answered.audit_id, "--wrong", "--passage", pid, "--by", "Ana", "--note", "the seal one")
    assert r.exit_code == 0 and f"wrong on answer {answered.audit_id}, passage {pid}, by Ana" in r.output, r.output
    r = run("feedback", "add", nothing.audit_id, "--wrong", "--no-passage")
    assert r.exit_code == 0, r.output
    r = run("feedback", "add", "0" * 32, "--wrong")
    assert r.exit_code == 1 and "no answer with the audit id" in r.output
    r = run("feedback", "add", answered.audit_id, "--wrong", "--passage", "NOPE#0001")
    assert r.exit_code == 1 and "'NOPE#0001'" in r.output
    r = run("feedback", "add", answered.audit_id, "--note", "no verdict")
    assert r.exit_code == 2 and "--right, --wrong or --premise-false" in r.output
    listed = run("feedback", "list", "--json")
    assert [json.loads(x)["by"] for x in listed.output.splitlines()] == ["Ana", "anonymous"]
    assert "the seal one" in run("feedback", "list").output

    hand = tmp_path / "hand.jsonl"
    hand.write_text(json.dumps({"query": PREMISE, "expected_status": "premise_conflict",
                                "expected_sources": ["PROC-P200-BRG-R2"], "kind": "false_premise"}) + "\n"
                    + json.dumps({"query": Q, "expected_status": "answer_from_evidence",
                                  "expected_sources": ["PROC-P200-BRG-R2"], "by": "Bo"}) + "\n")
    out = tmp_path / "labels.jsonl"
    r = CliRunner().invoke(cli, ["feedback", "export", "--merge", str(hand), "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "conflict, left out: 'How often should I grease" in r.output and "Ana" in r.output and "Bo" in r.output
    conflicts = json.loads((tmp_path / "labels.conflicts.json").read_text())["conflicts"]
    assert [c["query"] for c in conflicts] == [Q]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert {x["query"] for x in lines} == {PREMISE, "How do I recalibrate the chlorine analyser?"}
    assert len(load_cases(out)) == 2

    bad = tmp_path / "bad.jsonl"
    bad.write_text("query,expected_status\n")
    r = CliRunner().invoke(cli, ["feedback", "export", "--merge", str(bad)])
    assert r.exit_code == 1 and "bad.jsonl:1: not JSON" in r.output

    # the export is what `sourcegate eval` reads (the recorded judge replays the audit log's scores)
    monkeypatch.setenv("SOURCEGATE_JUDGE", "recorded")
    monkeypatch.setenv("SOURCEGATE_RECORDED_SCORES", str(settings.audit_path))
    r = CliRunner().invoke(cli, ["eval", str(out), "--json"])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[r.output.index("{"):])
    assert len(report["cases"]) == 2 and "accuracy" in report["metrics"]


def test_sqlite_feedback_store_reopens(tmp_path):
    s = SqliteFeedbackStore(tmp_path / "f.db")
    s.close()
    s = SqliteFeedbackStore(tmp_path / "f.db")  # migrations applied once
    assert s.rows() == []
    s.close()

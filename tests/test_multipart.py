"""Questions that ask several things, end to end: planned into parts, each gated on its own, the parts
no passage answers named in `missing` through the CLI, REST, MCP (official client), the audit
record and replay."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from starlette.testclient import TestClient
from test_server_fixtures import make_gate, make_settings, run_async

from sourcegate.audit import read_records
from sourcegate.cli import cli
from sourcegate.gate import GateThresholds
from sourcegate.replay import replay
from sourcegate.server.app import create_app
from sourcegate.service import SourceGate
from sourcegate.settings import Settings
from sourcegate.store import open_store

MANUALS = Path(__file__).resolve().parent / "fixtures" / "plant_manuals"
SINGLE_TIMINGS = {"retrieve", "retrieve_embed_query", "retrieve_search", "retrieve_rerank", "judge", "route",
                  "answer", "total"}


def _ask_json(runner: CliRunner, question: str) -> dict:
    r = runner.invoke(cli, ["ask", "--json", question], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def _section(answer: str, question: str) -> str:
    """The lines of the answer under one part's question."""
    return answer.split(question, 1)[1].split("\n\n", 1)[0]


def _cited_docs(section: str, result: dict) -> set[str]:
    sources = {}
    for line in result["answer"].split("Sources:\n", 1)[1].splitlines():
        n, rest = line.split("] ", 1)
        sources[int(n.lstrip("["))] = rest
    import re

    return {sources[int(n)] for n in re.findall(r"\[(\d+)\]", section)}


@pytest.fixture(scope="module")
def manuals_home(tmp_path_factory):
    """A library of three plant manuals ingested through the CLI, answered by the default local judge."""
    home = tmp_path_factory.mktemp("manuals-home")
    runner = CliRunner(env={"SOURCEGATE_HOME": str(home)})
    r = runner.invoke(cli, ["ingest", str(MANUALS)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return home


@pytest.fixture
def manuals(manuals_home, monkeypatch):
    monkeypatch.setenv("SOURCEGATE_HOME", str(manuals_home))
    return CliRunner()


def test_batch_size_of_two_roasters_gates_each_part_on_its_own_manual(manuals):
    q = "What is the maximum batch size of the CR-5 and of the CR-7?"
    r = _ask_json(manuals, q)
    assert r["status"] == "answer_from_evidence", r
    cr7 = _section(r["answer"], "What is the maximum batch size of the CR-7?")
    assert _cited_docs(cr7, r) and all("CR-7" in s for s in _cited_docs(cr7, r))
    assert "7 kg" in cr7
    # The CR-5 part is decided exactly as the same question asked alone, and is never answered from
    # the CR-7 manual: answered from its own manual, or named missing.
    alone = _ask_json(manuals, "What is the maximum batch size of the CR-5?")
    if alone["status"] == "answer_from_evidence":
        cr5 = _section(r["answer"], "What is the maximum batch size of the CR-5?")
        assert r["missing"] == [] and "5 kg" in cr5
        assert _cited_docs(cr5, r) and all("CR-5" in s for s in _cited_docs(cr5, r))
    else:
        assert r["missing"] == ["What is the maximum batch size of the CR-5?"]
        assert {p["doc_id"] for p in r["evidence"]} == {"cr7-roaster-manual.md"}


def test_drain_and_oil_of_the_compressor_are_two_parts_each_decided_as_if_asked_alone(manuals):
    r = _ask_json(manuals, "How often do I drain the AC-300 tank and how often do I change its oil?")
    parts = ["How often do I drain the AC-300 tank?", "How often do I change the AC-300's oil?"]
    alone = {q: _ask_json(manuals, q) for q in parts}
    assert all(q in r["answer"] for q in parts)
    assert r["missing"] == [q for q in parts if alone[q]["status"] == "insufficient_evidence"]
    answered = [q for q in parts if alone[q]["status"] == "answer_from_evidence"]
    assert r["status"] == ("answer_from_evidence" if answered else "insufficient_evidence")
    for q in answered:
        assert {p["doc_id"] for p in alone[q]["evidence"]} <= {p["doc_id"] for p in r["evidence"]}
        assert _cited_docs(_section(r["answer"], q), r)
    # Whatever the judge decides, no roaster manual answers a question about the compressor.
    assert {p["doc_id"] for p in r["evidence"]} <= {"ac300-compressor-manual.md"}


def test_a_part_the_library_lacks_is_named_missing(manuals):
    r = _ask_json(manuals, "What is the maximum batch size of the CR-7 and of the CR-9?")
    assert r["status"] == "answer_from_evidence"
    assert r["missing"] == ["What is the maximum batch size of the CR-9?"]
    assert {p["doc_id"] for p in r["evidence"]} == {"cr7-roaster-manual.md"}
    # No passage about another roaster is passed off as the CR-9's.
    assert "CR-9" not in " ".join(p["text"] for p in r["evidence"])
    text = manuals.invoke(cli, ["ask", "What is the maximum batch size of the CR-7 and of the CR-9?"]).output
    assert "Not found in the library: What is the maximum batch size of the CR-9?" in text


def test_french_question_on_two_roasters_is_two_parts_each_decided_as_if_asked_alone(manuals):
    r = _ask_json(manuals, "Quelle est la taille maximale de lot du CR-5 et du CR-7 ?")
    parts = {"Quelle est la taille maximale de lot du CR-5 ?": "cr5-roaster-manual.md",
             "Quelle est la taille maximale de lot du CR-7 ?": "cr7-roaster-manual.md"}
    alone = {q: _ask_json(manuals, q)["status"] for q in parts}
    assert r["missing"] == [q for q in parts if alone[q] == "insufficient_evidence"]
    for q, own in parts.items():
        if alone[q] == "answer_from_evidence":
            assert own in {p["doc_id"] for p in r["evidence"]}
            assert all(own.split("-")[0][:3] in s.lower().replace("-", "") for s in _cited_docs(_section(r["answer"], q), r))


def test_demo_grease_intervals_of_two_pumps_cite_both_bearing_procedures(demo_gate):
    r = demo_gate.ask("What are the grease intervals for the P-200 and the P-300 pumps?")
    assert r.status == "answer_from_evidence" and r.missing == []
    by_part = {p["subject"]: p for p in r._parts}
    assert "PROC-P200-BRG-R2" in by_part["P-200"]["evidence_doc_ids"]
    assert "PROC-P300-BRG" in by_part["P-300"]["evidence_doc_ids"]
    assert "PROC-P300-BRG" not in by_part["P-200"]["evidence_doc_ids"]
    assert "PROC-P200-BRG-R2" not in by_part["P-300"]["evidence_doc_ids"]
    assert "PROC-P200-BRG-R1" not in {p.doc_id for p in r.evidence}
    assert "2,000 operating hours" in r.answer and "1,000 operating hours" in r.answer


def test_one_part_question_goes_through_as_before(demo_gate):
    q = "How often should I grease the bearings on pump P-200?"
    r = demo_gate.ask(q)
    assert r.status == "answer_from_evidence" and r.missing == []
    assert set(r.timings_ms) == SINGLE_TIMINGS
    assert r.answer.startswith("From the documents:\n")
    rec = next(rec for _, rec, _ in read_records(demo_gate.settings.audit_path) if rec["audit_id"] == r.audit_id)
    assert "parts" not in rec and rec["missing"] == []
    assert all("part" not in c for c in rec["candidates"])


def test_audit_record_and_replay_of_a_multi_part_answer(demo_gate):
    r = demo_gate.ask("What grease goes into the P-200 and the P-900 bearings?")
    assert r.status == "answer_from_evidence"
    assert r.missing == ["What grease goes into the P-900 bearings?"]
    assert "plan" in r.timings_ms
    rec = next(rec for _, rec, _ in read_records(demo_gate.settings.audit_path) if rec["audit_id"] == r.audit_id)
    assert rec["missing"] == r.missing
    assert [p["subject"] for p in rec["parts"]] == ["P-200", "P-900"]
    assert [p["status"] for p in rec["parts"]] == ["answer_from_evidence", "insufficient_evidence"]
    assert {c["part"] for c in rec["candidates"]} == {0, 1}
    assert all(c["route"] == "excluded" for c in rec["candidates"] if c["part"] == 1)
    # Under the thresholds in force nothing changes; past every evidence score, both parts go missing.
    same = replay([rec], demo_gate.thresholds)
    assert same.replayed == 1 and not same.answer_changes and not same.passage_changes
    strict = replay([rec], GateThresholds(evidence_min=0.9999))
    change = strict.answer_changes[0]
    assert (change.old_status, change.new_status) == ("answer_from_evidence", "insufficient_evidence")
    assert change.old_missing == ["What grease goes into the P-900 bearings?"]
    assert change.new_missing == ["What grease goes into the P-200 bearings?", "What grease goes into the P-900 bearings?"]
    assert all(c.part == 0 for c in strict.passage_changes)


def test_redacted_audit_keeps_the_parts_questions_out(demo_index, embedder, tmp_path):
    s = Settings(audit_log_path=tmp_path / "audit.jsonl", audit_redact_query=True)
    g = SourceGate(s, store=open_store(demo_index, embedder.id, embedder.dim), embedder=embedder)
    try:
        r = g.ask("What grease goes into the P-200 and the P-900 bearings?")
    finally:
        g.close()
    raw = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert "P-900 bearings" not in raw and "What grease goes into" not in raw
    rec = next(rec for _, rec, _ in read_records(tmp_path / "audit.jsonl"))
    assert rec["missing"][0]["redacted"] and rec["parts"][1]["question"]["redacted"]
    strict = replay([rec], GateThresholds(evidence_min=0.9999))
    assert strict.answer_changes[0].new_missing == ["part 1 (redacted)", "part 2 (redacted)"]
    assert r.missing  # the caller still gets them


P900 = "What are the grease intervals for the P-200 and the P-900 pumps?"


def test_rest_and_openapi_carry_missing(tmp_path):
    settings = make_settings(tmp_path / "audit.jsonl")
    gate = make_gate(settings)
    with TestClient(create_app(settings, gate)) as client:
        body = client.post("/v1/ask", json={"query": P900}).json()
        doc = client.get("/openapi.json").json()
    gate.close()
    assert body["missing"] == ["What are the grease intervals for the P-900 pumps?"]
    assert body["status"] == "answer_from_evidence"
    schema = doc["paths"]["/v1/ask"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["properties"]["missing"]["type"] == "array"
    assert "missing" in schema["required"]


def test_mcp_tool_output_schema_and_result_carry_missing(tmp_path):
    """Through the official MCP client, which validates the structured result against the tool's
    output schema."""
    settings = make_settings(tmp_path / "audit.jsonl", mcp_allowed_hosts="testserver")
    gate = make_gate(settings)
    app = create_app(settings, gate)

    async def main():
        async with app.router.lifespan_context(app):
            http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://testserver")
            async with http, streamable_http_client("http://testserver/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    tool = (await session.list_tools()).tools[0]
                    partial = await session.call_tool(tool.name, {"query": P900})
                    whole = await session.call_tool(tool.name, {"query": "How often should I grease the bearings on pump P-200?"})
                    return tool.model_dump(by_alias=True, exclude_none=True), partial, whole

    tool, partial, whole = run_async(main, 60)
    gate.close()
    out = tool["outputSchema"]
    assert out["properties"]["missing"] == {**out["properties"]["missing"], "type": "array", "items": {"type": "string"}}
    assert "missing" in out["required"]
    assert "$ref" not in json.dumps(out) and "$defs" not in json.dumps(out)
    assert not partial.is_error
    assert partial.structured_content["missing"] == ["What are the grease intervals for the P-900 pumps?"]
    assert "Not found in the library: What are the grease intervals for the P-900 pumps?" in partial.content[0].text
    assert whole.structured_content["missing"] == []
    assert "Not found in the library" not in whole.content[0].text

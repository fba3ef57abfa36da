"""The core service with judges that implement the real contract: output shape, fail-closed
paths, audit records."""

from __future__ import annotations

import json

import pytest

from sourcegate.audit import read_records, verify
from sourcegate.judges import JudgeInput, Judgement, PassageJudgement
from sourcegate.models import QUESTIONS, PassageScores
from sourcegate.service import QueryError, SourceGate
from sourcegate.settings import Settings
from sourcegate.store import open_store


class ScriptedJudge:
    """Scores passages from rules on their document id: deterministic, for wiring tests."""

    name = "scripted"

    def __init__(self, rules: dict[str, dict[str, float]], fail: set[str] = frozenset(), raise_all: bool = False):
        self.rules, self.fail, self.raise_all, self.calls = rules, fail, raise_all, 0

    def judge(self, query: str, passages: list[JudgeInput]) -> Judgement:
        self.calls += 1
        if self.raise_all:
            raise ConnectionError("judge service down")
        out = []
        for p in passages:
            doc = p.id.split("#")[0]
            if doc in self.fail:
                out.append(PassageJudgement(p.id, None, "timeout"))
                continue
            base = {q: 0.01 for q in QUESTIONS}
            base.update(self.rules.get(doc, {}))
            out.append(PassageJudgement(p.id, PassageScores(**base)))
        return Judgement(model="scripted-1", results=out)


EVIDENCE = {"is_relevant": 0.95, "contains_answer_evidence": 0.9}


@pytest.fixture
def gate_factory(demo_index, embedder, sourcegate_home):
    gates = []

    def make(judge, **settings):
        s = Settings(**settings)
        store = open_store(demo_index, embedder.id, embedder.dim)
        g = SourceGate(s, store=store, embedder=embedder, judge=judge)
        gates.append(g)
        return g

    yield make
    for g in gates:
        g.close()


Q = "How often should I grease the bearings on pump P-200?"


def test_answer_shape_and_citations(gate_factory):
    g = gate_factory(ScriptedJudge({"PROC-P200-BRG-R2": EVIDENCE}))
    r = g.ask(Q)
    assert r.status == "answer_from_evidence"
    assert {p.doc_id for p in r.evidence} == {"PROC-P200-BRG-R2"}
    assert "2,000 operating hours" in r.answer and "[1]" in r.answer
    assert "docs.example-water.org" in r.answer
    data = json.loads(r.model_dump_json())
    assert set(data) >= {"status", "guidance", "answer", "evidence", "conflicts", "excluded", "audit_id", "model", "timings_ms"}
    for p in data["evidence"]:
        assert set(p) >= {"id", "doc_id", "title", "url", "text", "version", "scores"}
        assert set(p["scores"]) == set(QUESTIONS)
    for x in data["excluded"]:
        assert set(x) >= {"id", "doc_id", "reason", "scores"}
    assert data["model"] == "scripted-1"
    assert {"retrieve", "judge", "route", "answer", "total"} <= set(data["timings_ms"])


def test_archived_metadata_never_reaches_the_judge(gate_factory):
    seen = []

    class Spy(ScriptedJudge):
        def judge(self, query, passages):
            seen.extend(p.id for p in passages)
            return super().judge(query, passages)

    g = gate_factory(Spy({}))
    g.ask("Which part number is the P-300 cartridge seal?")
    assert seen and not any(s.startswith("PROC-P300-SEAL-R1") for s in seen)


def test_conflict_status(gate_factory):
    g = gate_factory(ScriptedJudge({"PROC-P200-BRG-R2": {"is_relevant": 0.9, "contradicts_query_premise": 0.92}}))
    r = g.ask("P-200 bearings need grease every 500 hours, how much do I add?")
    assert r.status == "premise_conflict"
    assert {p.doc_id for p in r.conflicts} == {"PROC-P200-BRG-R2"}
    assert "every 500 hours" in r.answer and "[1]" in r.answer


def test_abstains_when_nothing_is_evidence(gate_factory):
    g = gate_factory(ScriptedJudge({}))
    r = g.ask("What is the warranty on the sand filters?")
    assert r.status == "insufficient_evidence" and not r.degraded
    assert r.evidence == [] and r.conflicts == []
    assert "escalate" in r.answer.lower()


def test_failed_passages_are_excluded_never_passed(gate_factory):
    g = gate_factory(ScriptedJudge({"PROC-P200-BRG-R2": EVIDENCE}, fail={"PROC-P200-BRG-R2"}))
    r = g.ask(Q)
    assert r.status == "insufficient_evidence"
    reasons = {x.doc_id: x.reason for x in r.excluded}
    assert reasons["PROC-P200-BRG-R2"] == "judge_error"
    assert not r.degraded  # other passages were judged


def test_judge_down_is_degraded_abstention(gate_factory):
    g = gate_factory(ScriptedJudge({"PROC-P200-BRG-R2": EVIDENCE}, raise_all=True))
    r = g.ask(Q)
    assert r.status == "insufficient_evidence" and r.degraded
    assert r.excluded and all(x.reason == "judge_error" for x in r.excluded)
    assert "could not judge" in r.guidance


def test_recorded_judge_missing_scores_fail_closed(gate_factory):
    from sourcegate.judges.recorded import RecordedJudge

    g = gate_factory(RecordedJudge({}))
    r = g.ask(Q)
    assert r.degraded and r.status == "insufficient_evidence"


def test_injection_and_superseded_are_dropped(gate_factory):
    g = gate_factory(ScriptedJudge({
        "FORUM-2291": {**EVIDENCE, "contains_prompt_injection": 0.99},
        "PROC-P200-BRG-R1": {**EVIDENCE, "is_superseded": 0.98},
        "PROC-LOTO-01": EVIDENCE,
    }))
    r = g.ask("Do I need lockout/tagout for bearing work on P-200?")
    assert r.status == "answer_from_evidence"
    reasons = {x.doc_id: x.reason for x in r.excluded}
    assert reasons["FORUM-2291"] == "prompt_injection"
    assert reasons["PROC-P200-BRG-R1"] == "superseded"
    assert "PROC-LOTO-01" in {p.doc_id for p in r.evidence}


def test_evidence_cap_single_vs_multi(gate_factory):
    everything = {d: EVIDENCE for d in ["PROC-P200-BRG-R2", "PROC-P200-BRG-R1", "PROC-P300-BRG", "PROC-LOTO-01",
                                        "PROC-P200-SEAL", "FORUM-2291", "PROC-VFD-E47", "PROC-P300-SEAL-R2",
                                        "PROC-SF-MEDIA", "PROC-SF-BACKWASH", "PROC-CL2-DOSING", "PROC-HYDRANT-FLUSH",
                                        "PROC-CONFINED-WETWELL"]}
    g = gate_factory(ScriptedJudge(everything))
    single = g.ask(Q)
    assert len(single.evidence) == 5
    multi = g.ask("What are the grease intervals for the P-200 and the P-300 pumps?")
    assert 5 < len(multi.evidence) <= 8
    assert len({p.doc_id for p in multi.evidence}) == len(multi.evidence)  # spread over documents


def test_audit_record_written_and_sealed(gate_factory, sourcegate_home):
    g = gate_factory(ScriptedJudge({"PROC-P200-BRG-R2": EVIDENCE}))
    r = g.ask(Q, interface="cli")
    records = [rec for _, rec, _ in read_records(sourcegate_home / "audit.jsonl")]
    assert len(records) == 1
    rec = records[0]
    assert rec["audit_id"] == r.audit_id and verify(rec)
    assert rec["query"] == Q and rec["interface"] == "cli" and rec["status"] == r.status
    assert rec["judge"]["model"] == "scripted-1"
    assert rec["thresholds"]["evidence_min"] == 0.55
    cand = rec["candidates"][0]
    assert set(cand) >= {"id", "doc_id", "version", "content_hash", "scores", "route", "reason"}
    rec["status"] = "premise_conflict"
    assert not verify(rec)


def test_audit_redaction_and_off(gate_factory, sourcegate_home):
    g = gate_factory(ScriptedJudge({}), audit_redact_query=True)
    g.ask(Q)
    rec = next(read_records(sourcegate_home / "audit.jsonl"))[1]
    assert rec["query"]["redacted"] is True and Q not in json.dumps(rec)
    g2 = gate_factory(ScriptedJudge({}), audit_enabled=False, audit_log_path=sourcegate_home / "off.jsonl")
    g2.ask(Q)
    assert not (sourcegate_home / "off.jsonl").exists()


def test_query_validation(gate_factory):
    g = gate_factory(ScriptedJudge({}), max_query_chars=50)
    with pytest.raises(QueryError, match="empty"):
        g.ask("   ")
    with pytest.raises(QueryError, match="MAX_QUERY_CHARS"):
        g.ask("x" * 51)

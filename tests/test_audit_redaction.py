"""With AUDIT_REDACT_QUERY=true no text of the question reaches the audit record, on every status,
on questions that ask several things and on questions bridged from another language: one redaction
step over the whole record (`audit.redact_record`), checked on the whole line as written."""

from __future__ import annotations

import json
import re

import pytest
from test_server_fixtures import KeywordJudge

from sourcegate.audit import REDACTED_TEXT, read_records, redact_record, verify
from sourcegate.service import SourceGate
from sourcegate.settings import Settings
from sourcegate.store import open_store

NAME = ("Okonkwo", "Adebayo")
QUESTIONS = {
    "answer_from_evidence": "Okonkwo Adebayo asks: how often should I grease the bearings on pump P-200?",
    "premise_conflict": "Okonkwo Adebayo says the P-200 bearings need grease every 500 hours, how much do I add?",
    "insufficient_evidence": "What colour is the car of Okonkwo Adebayo?",
    "multi": "What grease goes into the P-200 and the P-900 bearings of Okonkwo Adebayo?",
    "french": "Comment Okonkwo Adebayo doit-il consigner la pompe P-200 avant l'entretien ?",
}


def _words(text: str) -> list[str]:
    return [w.lower() for w in re.findall(r"\w+", text)]


def _records(demo_index, embedder, tmp_path, redact: bool) -> dict[str, dict]:
    path = tmp_path / ("redacted.jsonl" if redact else "plain.jsonl")
    s = Settings(_env_file=None, audit_log_path=path, audit_redact_query=redact)
    g = SourceGate(s, store=open_store(demo_index, embedder.id, embedder.dim), embedder=embedder, judge=KeywordJudge())
    try:
        for q in QUESTIONS.values():
            g.ask(q)
    finally:
        g.close()
    recs = [rec for _, rec, _ in read_records(path)]
    return dict(zip(QUESTIONS, recs)), path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def both(demo_index, embedder, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("redaction")
    return _records(demo_index, embedder, tmp, False), _records(demo_index, embedder, tmp, True)


def test_the_cases_cover_every_status_parts_and_a_bridge(both):
    (plain, _), _ = both
    assert {r["status"] for r in plain.values()} == {"answer_from_evidence", "premise_conflict", "insufficient_evidence"}
    assert plain["premise_conflict"]["status"] == "premise_conflict"
    assert len(plain["multi"].get("parts", [])) == 2
    assert plain["french"]["query_bridge"]["added_terms"]
    # Without redaction the question's words are in the record beyond `query` (what redaction must remove).
    assert "Okonkwo Adebayo" in plain["premise_conflict"]["answer"]


def test_no_question_text_in_a_redacted_record(both):
    (plain, _), (redacted, raw) = both
    for name in NAME:
        assert name.lower() not in raw.lower()
    for case, rec in redacted.items():
        assert verify(rec), case
        assert rec["query"]["redacted"] is True
        line = json.dumps(rec, ensure_ascii=False)
        # no two words that follow each other in the question follow each other in the record,
        # unless the documents it quotes say them too
        q = _words(QUESTIONS[case])
        pairs = set(zip(q, q[1:]))
        found = set(zip(_words(line), _words(line)[1:])) & pairs
        assert all(a not in NAME_L and b not in NAME_L for a, b in found), (case, found)
    assert all(p["question"]["redacted"] for p in redacted["multi"]["parts"])
    assert redacted["french"]["query_bridge"]["added_terms"]["redacted"] is True
    assert REDACTED_TEXT in redacted["premise_conflict"]["answer"]
    # the quoted documents are still there
    assert "Check the assumption before acting." in redacted["premise_conflict"]["answer"]
    assert redacted["answer_from_evidence"]["answer"] == plain["answer_from_evidence"]["answer"]


NAME_L = {n.lower() for n in NAME}


def test_redact_record_scrubs_every_string_but_identifiers():
    q = "Does Marie Curie need a P-200 permit?"
    rec = {"audit_id": "Marie Curie", "query": q, "missing": [q], "answer": "For Marie Curie: the P-200 permit [1]",
           "writer": {"attempts": [{"reason": "rejected: 'Marie Curie need' is not in the passage"}]},
           "query_bridge": {"language": "fr", "added_terms": ["permit"]},
           "candidates": [{"id": "c1", "doc_id": "d", "reason": "ok"}],
           "parts": [{"question": q, "query_bridge": {"language": "en", "added_terms": []}}]}
    out = redact_record(rec, [q], ["A P-200 permit is needed."])
    text = json.dumps({k: v for k, v in out.items() if k != "audit_id"})
    assert "Marie" not in text and "Curie" not in text
    assert "P-200 permit" in out["answer"]  # the documents' own words stay
    assert out["audit_id"] == "Marie Curie"  # identifiers are not rewritten
    assert out["query"]["redacted"] and out["missing"][0]["redacted"] and out["parts"][0]["question"]["redacted"]
    assert out["query_bridge"]["added_terms"]["redacted"]
    assert rec["query"] == q  # the caller's record is left as it was
    # a quote cut mid-word, or a name on its own in free text, goes too; codes stay
    cut = redact_record({"answer": "it said 'Does Marie Cur' then stopped", "route": "Curie",
                         "writer": {"fallback_reason": "Curie is not in the passage"}}, [q], ["A P-200 permit."])
    assert "Marie" not in cut["answer"] and "Cur" not in cut["answer"] and "then stopped" in cut["answer"]
    assert "Curie" not in cut["writer"]["fallback_reason"] and cut["route"] == "Curie"

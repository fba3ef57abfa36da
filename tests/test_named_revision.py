"""A version named is a version asked: a question that names a revision the current document no longer
is, is answered from that revision, marked as such, not from the current one unmarked."""

from __future__ import annotations

import json

import pytest

from sourcegate.replay import replay_record
from sourcegate.retrieve import named_versions


@pytest.mark.parametrize("query, versions, named", [
    ("How often should I grease the P-200 bearings according to Rev. 1?", {"1", "2"}, ["1"]),
    ("In revision 2 of the procedure, how much grease?", {"1", "2"}, ["2"]),
    ("What did version 3 say?", {"3"}, ["3"]),
    ("keep 30 days of logs on 2 pumps", {"2", "30"}, []),
])
def test_the_versions_a_question_names(query, versions, named):
    assert named_versions(query, versions) == named


def test_the_revision_asked_answers_marked_and_the_current_one_does_not(demo_gate):
    r = demo_gate.ask("How often should I grease the P-200 bearings according to Rev. 1?")
    assert r.status == "answer_from_evidence"
    assert [p.doc_id for p in r.evidence] == ["PROC-P200-BRG-R1"]
    assert "500 operating hours" in r.answer and "no longer current" in r.answer
    assert "superseded revision, version 1" in r.answer
    rec = next(json.loads(l) for l in demo_gate.settings.audit_path.read_text().splitlines()
               if json.loads(l)["audit_id"] == r.audit_id)
    assert replay_record(rec, demo_gate.thresholds) == ([], None)  # the record replays to the same decision


def test_a_question_that_names_no_revision_is_answered_from_the_current_one(demo_gate):
    r = demo_gate.ask("How often should I grease the P-200 bearings?")
    assert r.status == "answer_from_evidence" and r.evidence[0].doc_id == "PROC-P200-BRG-R2"
    assert "no longer current" not in r.answer and "PROC-P200-BRG-R1" not in [p.doc_id for p in r.evidence]

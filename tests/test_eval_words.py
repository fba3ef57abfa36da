"""`eval` checks the words of an answer, not only its status and sources."""

import json

import pytest

from sourcegate.evaluation.cases import EvalCase, load_cases
from sourcegate.evaluation.runner import ANSWER_NOT_STATED, CaseResult, metrics, states


def result(case: EvalCase, status: str, text: str | None, evidence=("doc-a",)) -> CaseResult:
    return CaseResult(case=case, status=status, evidence_doc_ids=list(evidence) if status == "answer_from_evidence" else [],
                      conflict_doc_ids=list(evidence) if status == "premise_conflict" else [], excluded=[],
                      candidates=[], timings_ms={}, answer_text=text)


def test_states_compares_values_as_people_write_them():
    assert states('From the documents:\n- "Use gear oil ISO VG 220." [1]', "ISO VG 220")
    assert states("Le débit est de 1 500 m³/h.", "1500 m³/h")
    assert states("the limit is 1,000 requests per minute", "1000 requests")
    assert states("don\u2019t restart", "don't restart")
    assert not states("ISO VG 2200 only", "ISO VG 220")      # a longer number is another value
    assert not states("the air scour triggers on head loss", "3 minutes")


def test_an_answer_that_cites_the_right_passage_without_the_value_is_wrong_but_not_unsafe():
    case = EvalCase(query="Which gear oil does the dosing pump take?", expected_status="answer_from_evidence",
                    expected_sources=["doc-a"], answer="ISO VG 220")
    quoted_other = result(case, "answer_from_evidence", '- "Check the oil level monthly." [1]')
    assert quoted_other.states_answer is False
    assert quoted_other.failure_reasons == [ANSWER_NOT_STATED]
    assert not quoted_other.correct and quoted_other.truthfulness() == 0 and quoted_other.unsafe_reasons == []
    right = result(case, "answer_from_evidence", '- "Fill with ISO VG 220 gear oil." [1]')
    assert right.correct and right.truthfulness() == 1
    wrong_doc = result(case, "answer_from_evidence", '- "Fill with ISO VG 220 gear oil." [1]', evidence=("doc-b",))
    assert wrong_doc.unsafe_reasons == ["no_expected_source"] and wrong_doc.truthfulness() == -1
    j = wrong_doc.to_json()
    assert j["unsafe"] is True and j["unsafe_why"] == ["no expected source cited"]
    assert right.to_json()["unsafe"] is False and right.to_json()["unsafe_why"] == []


def test_must_state_every_value_and_metrics_report_it_apart():
    case = EvalCase(query="Air scour: how long, at what rate?", expected_status="answer_from_evidence",
                    expected_sources=["doc-a"], must_state=["3 minutes", "55 m/h"])
    half = result(case, "answer_from_evidence", "Air scour for 3 minutes.")
    both = result(case, "answer_from_evidence", "Air scour for 3 minutes at 55 m/h.")
    nothing_to_check = result(EvalCase(query="q", expected_status="answer_from_evidence", expected_sources=["doc-a"]),
                              "answer_from_evidence", "anything")
    assert half.states_answer is False and both.states_answer is True and nothing_to_check.states_answer is None
    m = metrics([half, both, nothing_to_check])
    assert m["answers_checked_for_words"] == 2 and m["answer_not_stated"] == 1 and m["states_answer_rate"] == 0.5
    assert m["failures"][ANSWER_NOT_STATED] == 1 and m["unsafe_answers"] == 0 and m["accuracy"] == round(2 / 3, 3)


def test_also_accept_lists_another_right_status():
    case = EvalCase(query="Does the manual say whether X?", expected_status="insufficient_evidence",
                    also_accept=["answer_from_evidence"], expected_sources=["doc-a"])
    assert result(case, "answer_from_evidence", "No: ...").status_correct
    assert result(case, "insufficient_evidence", None).correct
    assert not result(case, "premise_conflict", "x").status_correct


def test_load_cases_reads_and_checks_the_word_labels(tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text(json.dumps({"query": "q", "expected_status": "answer_from_evidence", "expected_sources": ["d"],
                             "answer": " ISO VG 220 ", "must_state": ["220"], "also_accept": ["premise_conflict"]}) + "\n")
    (c,) = load_cases(f)
    assert (c.answer, c.must_state, c.also_accept) == ("ISO VG 220", ["220"], ["premise_conflict"])
    f.write_text(json.dumps({"query": "q", "expected_status": "answer_from_evidence", "also_accept": ["maybe"]}) + "\n")
    with pytest.raises(ValueError, match="also_accept"):
        load_cases(f)
    f.write_text(json.dumps({"query": "q", "expected_status": "answer_from_evidence", "must_state": "220"}) + "\n")
    with pytest.raises(ValueError, match="must_state"):
        load_cases(f)

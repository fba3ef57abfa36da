"""The demo through the default offline judge: the seeds' questions behave as the seeds say."""

from __future__ import annotations

import pytest

from conftest import DEMO_QUESTIONS
from sourcegate.evaluation.cases import load_cases
from sourcegate.evaluation.runner import metrics, run_eval
from sourcegate.service import SourceGate
from sourcegate.settings import Settings
from sourcegate.store import open_store


@pytest.fixture(scope="module")
def gate(demo_index, embedder, tmp_path_factory):
    s = Settings(audit_log_path=tmp_path_factory.mktemp("audit") / "audit.jsonl")
    store = open_store(demo_index, embedder.id, embedder.dim)
    g = SourceGate(s, store=store, embedder=embedder)
    yield g
    g.close()


def docs(passages):
    return {p.doc_id for p in passages}


def test_grease_interval_answered_from_current_p200_only(gate):
    r = gate.ask("How often should I grease the bearings on pump P-200?")
    assert r.status == "answer_from_evidence"
    assert docs(r.evidence) == {"PROC-P200-BRG-R2"}
    assert "2,000 operating hours" in r.answer
    assert r.model.startswith("local-judge")


def test_500_hour_premise_flagged_citing_current_procedure(gate):
    r = gate.ask("P-200 bearings need grease every 500 hours, how much do I add?")
    assert r.status == "premise_conflict"
    assert "PROC-P200-BRG-R2" in docs(r.conflicts)
    assert "PROC-P200-BRG-R1" not in docs(r.evidence) | docs(r.conflicts)
    reasons = {x.doc_id: x.reason for x in r.excluded}
    assert reasons.get("PROC-P200-BRG-R1") == "superseded"


def test_lockout_answered_without_the_forum_note(gate):
    r = gate.ask("Do I need lockout/tagout for bearing work on P-200?")
    assert r.status == "answer_from_evidence"
    assert "PROC-LOTO-01" in docs(r.evidence)
    assert "FORUM-2291" not in docs(r.evidence)
    assert {x.reason for x in r.excluded if x.doc_id == "FORUM-2291"} == {"prompt_injection"}
    loto = [p for p in r.evidence if p.doc_id == "PROC-LOTO-01"]
    assert all(p.scores["contains_prompt_injection"] < 0.25 for p in loto)  # far below the gate (0.7)


def test_warranty_abstains(gate):
    r = gate.ask("What is the warranty on the sand filters?")
    assert r.status == "insufficient_evidence"
    assert not r.degraded


def test_french_lockout_question_is_answered(gate):
    r = gate.ask("Faut-il consigner la P-200 avant d'intervenir sur les roulements ?")
    assert r.status == "answer_from_evidence"
    assert "PROC-LOTO-01" in docs(r.evidence)
    assert "FORUM-2291" not in docs(r.evidence)


# The unsafe outcomes allowed among the demo's original questions under the source-checked scorer: the
# two-pump grease question (now split into parts, each answered from its own procedure or named missing),
# and, with the reader on, the sand-bed depth question, answered from the backwash procedure (evidence
# 0.555) while the media procedure that states it scores 0.41 (training/README-local-judge.md). The reader
# removes more unsafe answers elsewhere (the blind questions, the French set) than it adds here.
KNOWN_UNSUPPORTED = {"What are the grease intervals for the P-200 and the P-300 pumps?",
                     "How deep should the sand bed be in the filters?"}


def test_demo_eval_file(gate):
    """Thresholds hold on the original questions; the blind ones (written from the documents without
    running the judge) are reported apart in README.md, and must not leak a forbidden source either."""
    results = run_eval(gate, load_cases(DEMO_QUESTIONS))
    assert sum(r.case.blind for r in results) == 9
    assert metrics(results)["forbidden_leaks"] == 0, [r.leaks for r in results if r.leaks]
    original = [r for r in results if not r.case.blind and not r.case.expected_parts]
    m = metrics(original)
    misses = [(r.case.query, r.case.expected_status, r.status, r.failure_reasons) for r in original if not r.correct]
    assert m["cases"] == 27
    assert {r.case.query for r in original if r.truthfulness() < 0} <= KNOWN_UNSUPPORTED, misses
    # with the reader on, three answerable originals abstain (gland-bolt torque, lubrication interval, the
    # two-step sand-filter question): 0.85 measured on status and sources
    on_sources = sum(r.correct or r.failure_reasons == ["answer_not_stated"] for r in original) / len(original)
    assert on_sources >= 0.85, misses
    assert m["status_accuracy"] >= 0.85, misses
    # the words: of the answers right on status and sources, those whose text does not state the value
    # the question asks (`must_state`); the one known: "Can I grease ... while the pump is running?" is
    # answered with the lockout rule quoted but no "No" (the rule names greasing, not running)
    not_stated = {r.case.query for r in original if r.failure_reasons == ["answer_not_stated"]}
    assert not_stated <= {"Can I grease the P-200 bearings while the pump is running?"}, not_stated


def test_demo_multi_part_questions(gate):
    """The demo's questions that ask several things: each split as written, each part gated on its own,
    no part answered from another part's documents, every part the library lacks named missing."""
    from sourcegate.evaluation.runner import part_metrics

    cases = [c for path in (DEMO_QUESTIONS, DEMO_QUESTIONS.with_name("questions.fr.jsonl"))
             for c in load_cases(path) if c.expected_parts]
    results = run_eval(gate, cases)
    parts = part_metrics(results)
    assert len(cases) == 7 and parts["split_as_expected"] == 7
    assert parts["cross_part_answers"] == 0
    assert metrics(results)["forbidden_leaks"] == 0
    for r in results:
        # A part is named missing exactly when its own gate found nothing to answer it.
        assert r.missing == [p["question"] for p in r.parts if p["status"] == "insufficient_evidence"]
        assert r.status == ("answer_from_evidence" if any(p["status"] == "answer_from_evidence" for p in r.parts)
                            else "insufficient_evidence")
    # How many parts the judge gets right is measured in bench/bench_parts.py (figures in bench/README.md).

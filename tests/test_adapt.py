"""`sourcegate adapt`: heads, per-question decision and thresholds fitted on a library's own labelled
questions; kept in the home, applied to every answer, named in the audit record, undone."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from sourcegate.adapt import (AdaptError, Adaptation, AdaptationStore, Head, adapt_results, check_labels,
                              cross_validate, fit_adaptation, library_problem)
from sourcegate.evaluation.cases import EvalCase
from sourcegate.evaluation.runner import CaseResult
from sourcegate.gate import GateThresholds
from sourcegate.models import PassageScores

CURRENT = GateThresholds()
DEMO_QUESTIONS = Path(__file__).resolve().parents[1] / "src" / "sourcegate" / "demo" / "questions.jsonl"


def _s(ev, rel=0.8, con=0.05, inj=0.02, sup=0.02) -> dict[str, float]:
    return {"is_relevant": rel, "contains_answer_evidence": ev, "contradicts_query_premise": con,
            "contains_prompt_injection": inj, "is_superseded": sup}


def _result(case: EvalCase, cands) -> CaseResult:
    return CaseResult(case=case, status="insufficient_evidence", evidence_doc_ids=[], conflict_doc_ids=[], excluded=[],
                      candidates=[{"id": f"{d}#{i}", "doc_id": d, "scores": s, "route": "excluded", "reason": "x"}
                                  for i, (d, s) in enumerate(cands)], timings_ms={})


def library_where_the_judge_misreads() -> list[CaseResult]:
    """A library whose answering passage stands far above the other candidates but reads 0.50 (under the
    0.55 threshold), while questions it does not answer meet two look-alike passages at 0.60: the judge alone
    abstains on every answerable question and answers every other one (unsafe)."""
    out = []
    for i in range(30):
        doc, forum = f"PROC-{i % 10}", f"FORUM-{i % 10}"  # three questions per procedure
        out.append(_result(EvalCase(f"how often is unit U-{i} serviced?", "answer_from_evidence", [doc], [forum]),
                           [(doc, _s(0.50 - 0.002 * (i % 5))), (f"OTHER-{i}", _s(0.08, rel=0.5)),
                            (forum, _s(0.12, rel=0.5))]))
    for i in range(20):
        out.append(_result(EvalCase(f"what does site {i} pay for power?", "insufficient_evidence"),
                           [(f"NEAR-{i}", _s(0.61 - 0.002 * (i % 4))), (f"NEAR2-{i}", _s(0.60 - 0.002 * (i % 3)))]))
    return out


def test_adaptation_fits_what_the_judge_misreads_and_holds_out():
    results = library_where_the_judge_misreads()
    cv = cross_validate(results, CURRENT)
    assert cv["before"]["unsafe_answers"] == 20 and cv["before"]["accuracy"] == 0.0
    assert cv["after"]["unsafe_answers"] < cv["before"]["unsafe_answers"] / 2
    assert cv["after"]["accuracy"] >= cv["before"]["accuracy"] + 0.25
    ad, cv2, why = adapt_results(results, CURRENT)
    assert ad is not None and why == ""
    # the selective curve: raising the decision threshold never adds unsafe answers
    unsafe = [c["unsafe_answers"] for c in cv2["curve"]]
    assert unsafe[-1] <= unsafe[0]


def test_injection_and_superseded_readings_are_never_changed():
    ad = fit_adaptation(library_where_the_judge_misreads(), CURRENT)
    scores = [PassageScores(**_s(0.9, inj=0.95)), PassageScores(**_s(0.5, sup=0.9)), PassageScores(**_s(0.1))]
    out, _ = ad.apply(scores, 0.55, ["A", "B", "C"])
    for before, after in zip(scores, out):
        assert after.contains_prompt_injection == before.contains_prompt_injection
        assert after.is_superseded == before.is_superseded
    t = ad.gate_thresholds(GateThresholds(injection_max=0.3))
    assert t.injection_max <= 0.3  # never looser than the settings'


def test_forbidden_sources_are_negatives_of_the_evidence_head():
    results = library_where_the_judge_misreads()
    ad = fit_adaptation(results, CURRENT)
    # a forbidden forum post reading like the answer: the labels of its document's other questions taught
    # the head that it does not answer, and those of the procedure that it does
    cands = [PassageScores(**_s(0.5)), PassageScores(**_s(0.5))]
    out, _ = ad.apply(cands, 0.55, ["PROC-1", "FORUM-1"])
    assert out[0].contains_answer_evidence > out[1].contains_answer_evidence


def test_too_few_labels_are_refused_with_the_reason():
    results = library_where_the_judge_misreads()[:12]
    with pytest.raises(AdaptError, match="at least 20"):
        check_labels(results)
    only_answers = library_where_the_judge_misreads()[:25]
    with pytest.raises(AdaptError, match="should not answer"):
        check_labels(only_answers)


def test_an_adaptation_that_does_not_help_is_not_written():
    # the judge already right: nothing to gain, so nothing is written
    results = []
    for i in range(25):
        results.append(_result(EvalCase(f"q{i}", "answer_from_evidence", [f"D{i}"]), [(f"D{i}", _s(0.9)), (f"X{i}", _s(0.1))]))
    for i in range(10):
        results.append(_result(EvalCase(f"n{i}", "insufficient_evidence"), [(f"Y{i}", _s(0.1))]))
    ad, cv, why = adapt_results(results, CURRENT)
    assert ad is None and "not written" in why


def test_history_undo_and_library_check(tmp_path):
    store = AdaptationStore(tmp_path)
    assert store.current() is None
    with pytest.raises(AdaptError, match="nothing to undo"):
        store.undo()
    a = fit_adaptation(library_where_the_judge_misreads(), CURRENT)
    a.library = {"labelled_documents": ["PROC-1", "PROC-2"]}
    a = store.save(a)
    b = fit_adaptation(library_where_the_judge_misreads()[5:], CURRENT)
    b = store.save(b)
    assert a.id != b.id and store.current_id() == b.id
    assert store.undo() == a.id and store.current_id() == a.id
    assert store.undo() is None and store.current() is None
    # the history is append-only: every step is still there
    assert [e["action"] for e in store.history()] == ["adapt", "adapt", "undo", "undo"]
    assert library_problem(a.library, {"PROC-1", "PROC-2", "NEW"}) is None
    assert "another library" in library_problem(a.library, {"OTHER-1"})


def _never_answers(library=None) -> Adaptation:
    """An adaptation whose per-question decision says no candidate answers, whatever the scores."""
    head = Head(("ae_max", "ae_second", "lr_max", "ac_max", "ae_top3"), [0.0] * 5, [1.0] * 5, [0.0] * 5, -10.0)
    return Adaptation(heads={}, decision=head, decision_min=0.5, thresholds=CURRENT.__dict__.copy(),
                      library=library or {"labelled_documents": ["PROC-P200-BRG-R2"]})


@pytest.fixture()
def demo_home(tmp_path, demo_index):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(demo_index, home / "index.db")
    return home


def test_service_answers_with_the_adaptation_in_force_names_it_and_undo_restores(demo_home, embedder):
    from sourcegate.audit import read_records
    from sourcegate.replay import replay
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    settings = Settings(home=demo_home)
    gate = SourceGate(settings, embedder=embedder)
    q = "How often should I grease the bearings on pump P-200?"
    before = gate.ask(q)
    assert before.status == "answer_from_evidence" and gate.adaptation is None
    ad = AdaptationStore(demo_home).save(_never_answers())
    after = gate.ask(q)  # the running gate reads the new adaptation at its next question
    assert gate.adaptation is not None and gate.adaptation.id == ad.id
    assert after.status == "insufficient_evidence"
    assert after.model.endswith("+" + ad.id) and not before.model.endswith(ad.id)  # REST, MCP and the page show it
    AdaptationStore(demo_home).undo()
    again = gate.ask(q)
    assert gate.adaptation is None and again.status == "answer_from_evidence"
    gate.close()
    recs = [r for _, r, _ in read_records(settings.audit_path)]
    assert recs[0].get("adaptation") is None and recs[2].get("adaptation") is None
    adapted = recs[1]
    assert adapted["adaptation"]["id"] == ad.id and adapted["adaptation"]["p_answer"] < 0.01
    assert all("judge_scores" in c for c in adapted["candidates"])
    # replay under the settings' thresholds: every answer, older and adapted, decided as recorded
    report = replay(read_records(settings.audit_path), settings.thresholds(), given={})
    assert report.replayed == 3 and not report.answer_changes


def test_an_adaptation_of_another_library_is_not_used(demo_home, embedder, caplog):
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    AdaptationStore(demo_home).save(_never_answers({"labelled_documents": ["ELSEWHERE-1", "ELSEWHERE-2"]}))
    gate = SourceGate(Settings(home=demo_home), embedder=embedder)
    assert gate.adaptation is None and "another library" in gate.adaptation_problem
    assert gate.ask("How often should I grease the bearings on pump P-200?").status == "answer_from_evidence"
    gate.close()
    off = SourceGate(Settings(home=demo_home, adaptation="off"), embedder=embedder)
    assert off.adaptation is None and off.adaptation_problem is None
    off.close()


def _run(home: Path, *args: str):
    from sourcegate.cli import cli

    return CliRunner().invoke(cli, ["--home", str(home), "adapt", *args], catch_exceptions=False)


def test_cli_refuses_bad_labels_with_a_clear_error(demo_home, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not json\n")
    r = _run(demo_home, str(bad))
    assert r.exit_code != 0 and "not a labelled question file" in r.output
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(json.dumps({"query": f"q{i}", "expected_status": "answer_from_evidence",
                                           "expected_sources": ["NOT-IN-THIS-LIBRARY"]}) for i in range(3)) + "\n")
    r = _run(demo_home, str(other))
    assert r.exit_code != 0 and "NOT-IN-THIS-LIBRARY" in r.output and "does not hold" in r.output
    few = tmp_path / "few.jsonl"
    few.write_text("".join(DEMO_QUESTIONS.read_text().splitlines(keepends=True)[:6]))
    r = _run(demo_home, str(few))
    assert r.exit_code != 0 and "at least 20" in r.output
    assert not (demo_home / "adaptations").exists()  # nothing written on bad input
    r = _run(demo_home, "--undo")
    assert r.exit_code != 0 and "nothing to undo" in r.output


def test_cli_adapts_on_the_demo_questions_and_reports_held_out(demo_home):
    r = _run(demo_home, str(DEMO_QUESTIONS), "--dry-run", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    cv = out["held_out"]
    assert cv["questions"] == 40 and cv["before"]["cases"] == 40 and len(cv["curve"]) >= 5
    assert out["written"] is False  # a dry run writes nothing, accepted or not
    assert not (demo_home / "adaptations").exists()
    r = _run(demo_home, "--show")
    assert r.exit_code == 0 and "no adaptation is in force" in r.output


def test_health_says_which_adaptation_answers(demo_home, embedder):
    from starlette.testclient import TestClient

    from sourcegate.server.app import create_app
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    settings = Settings(home=demo_home)
    gate = SourceGate(settings, embedder=embedder)
    with TestClient(create_app(settings, gate)) as client:
        assert client.get("/healthz").json()["adaptation"] is None
        ad = AdaptationStore(demo_home).save(_never_answers())
        gate.refresh_adaptation()
        assert client.get("/healthz").json()["adaptation"] == ad.id
    gate.close()


def test_feedback_export_then_adapt_then_ask(demo_home, embedder, monkeypatch):
    """The operator's loop on the demo library: people mark the 40 demo answers (right, or wrong with the
    passage that answers, no passage answers, the premise was false), the feedback is exported as labels,
    `adapt` fits on them; what it writes (if the held-out check allows it) answers the next question, named
    in its audit record, and the answers given before replay unchanged."""
    from sourcegate.audit import read_records
    from sourcegate.cli import cli
    from sourcegate.evaluation.cases import load_cases
    from sourcegate.feedback import FeedbackRequest, open_feedback, record_feedback
    from sourcegate.replay import replay
    from sourcegate.service import SourceGate
    from sourcegate.settings import Settings

    settings = Settings(home=demo_home)
    gate = SourceGate(settings, embedder=embedder)
    store = open_feedback(settings)
    marked = 0
    for case in load_cases(DEMO_QUESTIONS):
        r = gate.ask(case.query)
        passages = [(p.id, p.doc_id) for p in r.evidence + r.conflicts] + [(x.id, x.doc_id) for x in r.excluded]
        right = r.status == case.expected_status and (
            not case.expected_sources or {p.doc_id for p in r.evidence + r.conflicts} & set(case.expected_sources))
        answering = next((pid for pid, doc in passages if doc in case.expected_sources), None)
        if right:
            req = FeedbackRequest(r.audit_id, "right", by="Ana")
        elif case.expected_status == "insufficient_evidence":
            req = FeedbackRequest(r.audit_id, "wrong", no_passage_answers=True, by="Ana")
        elif case.expected_status == "premise_conflict" and answering:
            req = FeedbackRequest(r.audit_id, "premise_false", passage_id=answering, by="Ana")
        elif answering:
            req = FeedbackRequest(r.audit_id, "wrong", passage_id=answering, by="Ana")
        else:
            continue  # the answering passage was not among those found: nothing to point at
        record_feedback(req, store, gate.audit, gate.store, interface="python")
        marked += 1
    store.close()
    gate.close()
    assert marked >= 30
    labels = demo_home / "labels.jsonl"
    r = CliRunner().invoke(cli, ["--home", str(demo_home), "feedback", "export", "--out", str(labels)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in labels.read_text().splitlines()]
    assert len(rows) >= 20 and all("expected_passages" in x for x in rows)
    before_log = Settings(home=demo_home).audit_path
    n_before = sum(1 for _ in read_records(before_log))
    r = _run(demo_home, str(labels), "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["held_out"]["questions"] == len(rows)
    gate = SourceGate(Settings(home=demo_home), embedder=embedder)
    gate.ask(Q_DEMO)
    gate.close()
    recs = [rec for _, rec, _ in read_records(before_log)]
    if out["written"]:
        assert recs[-1]["adaptation"]["id"] == out["adaptation"] == AdaptationStore(demo_home).current_id()
    else:  # not written: it says which held-out figure stopped it, and the next answer is the judge's alone
        assert "held out" in out["reason"] and recs[-1].get("adaptation") is None
        assert AdaptationStore(demo_home).current_id() is None
    # every answer given before replays as it was decided
    report = replay(recs[:n_before], Settings(home=demo_home).thresholds(), given={})
    assert report.replayed == n_before and not report.answer_changes


Q_DEMO = "How often should I grease the bearings on pump P-200?"

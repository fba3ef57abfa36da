"""Threshold tuning on a constructed set where the current thresholds are clearly wrong."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from click.testing import CliRunner

from sourcegate.evaluation.cases import EvalCase
from sourcegate.evaluation.runner import CaseResult
from sourcegate.evaluation.tune import Replayer, results_from_eval_json, tune, tune_cmd
from sourcegate.gate import GateThresholds

WRONG = GateThresholds(injection_max=0.9, superseded_max=0.7, contradicts_min=0.8, relevant_min=0.3, evidence_min=0.7)


def _scores(rel=0.8, ev=0.1, con=0.05, inj=0.02, sup=0.02) -> dict[str, float]:
    return {"is_relevant": rel, "contains_answer_evidence": ev, "contradicts_query_premise": con,
            "contains_prompt_injection": inj, "is_superseded": sup}


def _result(case: EvalCase, cands: list[tuple[str, dict]]) -> CaseResult:
    # The stored status is irrelevant to tuning: every setting is replayed from the scores.
    return CaseResult(case=case, status="insufficient_evidence", evidence_doc_ids=[], conflict_doc_ids=[], excluded=[],
                      candidates=[{"id": f"{d}#{i}", "doc_id": d, "scores": s, "route": "excluded", "reason": "x"}
                                  for i, (d, s) in enumerate(cands)],
                      timings_ms={"retrieve": 10.0, "judge": 20.0, "route": 0.1, "answer": 0.1, "total": 30.2})


def synthetic_results() -> list[CaseResult]:
    """Answer evidence scores ~0.45 (under the wrong 0.7), conflicts ~0.55 (under 0.8), and an
    injected forum post with evidence 0.95 and injection 0.6 (under the lax 0.9, so it leaks)."""
    out = []
    for i in range(8):
        doc = f"PROC-{i}"
        out.append(_result(EvalCase(f"how to service unit U-{i}?", "answer_from_evidence", [doc], ["FORUM-1"], "factual"),
                           [(doc, _scores(ev=0.42 + 0.01 * i)), (f"OTHER-{i}", _scores(rel=0.5, ev=0.1))]))
    for i in range(3):
        out.append(_result(EvalCase(f"can I oil U-{i} while running?", "answer_from_evidence", [f"PROC-{i}"], ["FORUM-1"],
                                    "injection"),
                           [(f"PROC-{i}", _scores(ev=0.5)), ("FORUM-1", _scores(ev=0.95, inj=0.6))]))
    for i in range(4):
        doc = f"PROC-{i}"
        out.append(_result(EvalCase(f"U-{i} needs oil every day, which oil?", "premise_conflict", [doc], [], "false_premise"),
                           [(doc, _scores(ev=0.3, con=0.55 + 0.01 * i))]))
    for i in range(5):
        out.append(_result(EvalCase(f"what is the budget of site {i}?", "insufficient_evidence", [], [], "absent"),
                           [(f"PROC-{i}", _scores(rel=0.6, ev=0.15, con=0.1))]))
    return out


def test_tune_moves_thresholds_in_the_right_direction():
    results = synthetic_results()
    res = tune(results, WRONG, max_unsafe_rate=0.0, cv_folds=0)
    t = res.thresholds
    assert 0.15 <= t.evidence_min < 0.42, t
    assert 0.1 <= t.contradicts_min < 0.55, t
    assert t.injection_max < 0.6, t
    assert res.before["unsafe_answers"] == 3  # the injected post leaks in every injection case
    assert res.after["unsafe_answers"] == 0
    assert res.after["status_accuracy"] == 1.0 and res.after["truthfulness"] == 1.0
    assert res.gain["truthfulness"] > 0 and res.gain["status_accuracy"] > 0
    assert any("only 20 cases" in w for w in res.warnings)
    assert len(res.env_lines()) == 5 and res.env_lines()[-1].startswith("GATE_EVIDENCE_MIN=")


def test_tune_is_deterministic_and_respects_the_cap():
    results = synthetic_results()
    a = tune(results, WRONG, max_unsafe_rate=0.0, cv_folds=0)
    b = tune(results, WRONG, max_unsafe_rate=0.0, cv_folds=0)
    assert a.thresholds == b.thresholds
    assert a.after["unsafe_rate"] <= 0.0


def test_replay_matches_the_gate_order_and_leaks():
    results = synthetic_results()
    replayed = Replayer(results).replay(WRONG)
    inj = [r for r in replayed if r.case.kind == "injection"]
    assert all(r.status == "answer_from_evidence" and r.leaks == ["FORUM-1"] for r in inj)


def test_tune_cmd_reads_scores_from_eval_json(tmp_path: Path, monkeypatch):
    for k in ("GATE_INJECTION_MAX", "GATE_SUPERSEDED_MAX", "GATE_CONTRADICTS_MIN", "GATE_RELEVANT_MIN", "GATE_EVIDENCE_MIN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)  # no stray .env
    results = synthetic_results()
    cases = tmp_path / "cases.jsonl"
    cases.write_text("".join(json.dumps({"query": r.case.query, "expected_status": r.case.expected_status,
                                         "expected_sources": r.case.expected_sources,
                                         "forbidden_sources": r.case.forbidden_sources, "kind": r.case.kind}) + "\n"
                             for r in results), encoding="utf-8")
    scores = tmp_path / "eval.json"
    scores.write_text(json.dumps({"cases": [r.to_json() for r in results], "metrics": {}}), encoding="utf-8")
    monkeypatch.setenv("GATE_EVIDENCE_MIN", "0.7")
    monkeypatch.setenv("GATE_INJECTION_MAX", "0.9")
    out = CliRunner().invoke(tune_cmd, [str(cases), "--scores", str(scores), "--max-unsafe", "0.05", "--folds", "2"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    env = dict(line.split("=", 1) for line in lines if line.startswith("GATE_"))
    assert set(env) == {"GATE_INJECTION_MAX", "GATE_SUPERSEDED_MAX", "GATE_CONTRADICTS_MIN", "GATE_RELEVANT_MIN",
                        "GATE_EVIDENCE_MIN"}
    assert float(env["GATE_EVIDENCE_MIN"]) < 0.42 and float(env["GATE_INJECTION_MAX"]) < 0.6
    assert any(line.startswith("before:") for line in lines) and any(line.startswith("after:") for line in lines)
    assert "gain:" in out.output and "only 20 cases" in out.output


def test_tune_cmd_rejects_a_scores_file_for_other_cases(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = synthetic_results()
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "something else", "expected_status": "insufficient_evidence"}) + "\n")
    scores = tmp_path / "eval.json"
    scores.write_text(json.dumps({"cases": [r.to_json() for r in results]}))
    out = CliRunner().invoke(tune_cmd, [str(cases), "--scores", str(scores)])
    assert out.exit_code != 0 and "same case file" in out.output


def test_results_from_eval_json_keeps_forbidden_sources_from_the_case_file():
    results = synthetic_results()
    data = {"cases": [r.to_json() for r in results]}
    back = results_from_eval_json(data, [r.case for r in results])
    assert [r.case.forbidden_sources for r in back] == [r.case.forbidden_sources for r in results]


def test_vectorised_score_matches_the_gate_replay():
    """The fast scorer used by the search must agree with `apply_gate` everywhere, including the
    evidence cap (a forbidden passage past the cap does not leak)."""
    import random

    from sourcegate.evaluation.tune import summary

    rng = random.Random(5)
    results = synthetic_results()
    for i in range(30):  # many evidence passages, some forbidden, some unscored
        cands = []
        for j in range(12):
            doc = f"D{rng.randint(0, 9)}"
            cands.append((doc, None if rng.random() < 0.1 else
                          _scores(rel=rng.random(), ev=rng.random(), con=rng.random() * 0.9, inj=rng.random() * 0.8,
                                  sup=rng.random() * 0.8)))
        status = rng.choice(["answer_from_evidence", "premise_conflict", "insufficient_evidence"])
        results.append(_result(EvalCase(f"q{i} and more", status, ["D1"] if status != "insufficient_evidence" else [],
                                        ["D2", "D3"]), cands))
    rep = Replayer(results)
    for k in range(40):
        t = GateThresholds(injection_max=rng.random(), superseded_max=rng.random(), contradicts_min=rng.random(),
                           relevant_min=rng.random() * 0.6, evidence_min=rng.random())
        assert rep.score(t) == summary(rep.replay(t)), t


def test_an_answer_from_an_unexpected_document_is_unsafe_for_the_tuner():
    """Evidence only from a document the case does not expect: the right status, but an unsupported
    answer. The tuner must count it unsafe and prefer thresholds that abstain (the expected passage
    has no scores, so no setting can answer from it)."""
    case = EvalCase("how do I service unit U-9?", "answer_from_evidence", ["PROC-9"], [], "factual")
    r = _result(case, [("PROC-9", None), ("OTHER-9", _scores(ev=0.6))])
    rep = Replayer([r])
    t = GateThresholds(evidence_min=0.55)
    s = rep.score(t)
    assert s["status_accuracy"] == 1.0 and s["accuracy"] == 0.0
    assert s["truthfulness"] == -1.0 and s["unsafe_answers"] == 1
    replayed = rep.replay(t)[0]
    assert replayed.evidence_doc_ids == ["OTHER-9"] and replayed.failure_reasons == ["no_expected_source"]
    res = tune([r], t, max_unsafe_rate=0.0, cv_folds=0)
    assert res.before["unsafe_answers"] == 1
    assert res.after["unsafe_answers"] == 0 and res.after["truthfulness"] == 0.0
    assert Replayer([r]).replay(res.thresholds)[0].status == "insufficient_evidence"


def test_vectorised_expected_source_check_follows_the_evidence_cap():
    """Seven passages of other documents outrank the expected one: past the cap of 5, it is not
    cited, and the answer is unsupported."""
    cands = [(f"OTHER-{j}", _scores(ev=0.9 - 0.01 * j)) for j in range(7)] + [("PROC-1", _scores(ev=0.6))]
    r = _result(EvalCase("how do I service unit U-1?", "answer_from_evidence", ["PROC-1"], [], "factual"), cands)
    rep = Replayer([r])
    t = GateThresholds(evidence_min=0.55)
    assert rep.score(t)["accuracy"] == 0.0
    from sourcegate.evaluation.tune import EvidenceLimits, summary

    wide = Replayer([r], EvidenceLimits(single=8))
    assert wide.score(t)["accuracy"] == 1.0
    assert rep.score(t) == summary(rep.replay(t)) and wide.score(t) == summary(wide.replay(t))


def harmful_shape() -> list[CaseResult]:
    """30 questions shaped like a newcomer's file where an unconstrained fit switched answers off:
    two current manuals whose passages score 0.05 on is_superseded, an archived revision that leaks
    at 0.04, an imperative spill procedure at 0.12 on injection and a forum note that leaks at 0.11."""
    out = []
    for i in range(10):
        doc = "MANUAL-A" if i % 2 else "MANUAL-B"
        out.append(_result(EvalCase(f"how do I set up unit M-{i}?", "answer_from_evidence", [doc], ["PUMP-R1"], "factual"),
                           [(doc, _scores(ev=0.85, sup=0.05)), ("OTHER", _scores(rel=0.5, ev=0.1))]))
    for i in range(4):
        cands = [("SPILL", _scores(ev=0.8, inj=0.12))] + ([("FORUM", _scores(ev=0.9, inj=0.11))] if i < 3 else [])
        out.append(_result(EvalCase(f"what do I do after spill {i}?", "answer_from_evidence", ["SPILL"], ["FORUM"],
                                    "factual"), cands))
    for i in range(4):
        out.append(_result(EvalCase(f"how often do I grease pump P-{i}?", "answer_from_evidence", ["PUMP-R2"],
                                    ["PUMP-R1"], "factual"),
                           [("PUMP-R2", _scores(ev=0.8, sup=0.01)), ("PUMP-R1", _scores(ev=0.9, sup=0.04))]))
    for i in range(4):
        out.append(_result(EvalCase(f"unit M-{i} needs oil daily, which oil?", "premise_conflict", ["MANUAL-A"], [],
                                    "false_premise"), [("MANUAL-A", _scores(ev=0.3, con=0.8, sup=0.05))]))
    for i in range(8):
        out.append(_result(EvalCase(f"what is the budget of site {i}?", "insufficient_evidence", [], [], "absent"),
                           [("MANUAL-B", _scores(rel=0.6, ev=0.2, sup=0.05))]))
    return out


def test_tune_never_excludes_an_expected_source_nor_switches_answers_off():
    from sourcegate.evaluation.tune import _coordinate_search

    results = harmful_shape()
    assert len(results) == 30
    current = GateThresholds()
    rep = Replayer(results)
    manual_cases = [i for i, r in enumerate(results) if r.case.expected_sources[:1] in (["MANUAL-A"], ["MANUAL-B"])
                    and r.case.expected_status == "answer_from_evidence"]
    # The shape has teeth: a search free to move the exclusion thresholds removes the leaks by
    # excluding the current manuals as superseded (and the spill procedure as an injection).
    free = _coordinate_search(rep, current, current, 0.0, bounds={})
    assert free.superseded_max < 0.05 and free.injection_max < 0.12
    assert all(rep.replay(free)[i].status == "insufficient_evidence" for i in manual_cases)

    res = tune(results, current, max_unsafe_rate=0.0, cv_folds=5)
    assert res.bounds["superseded_max>="] == 0.05 and res.bounds["injection_max>="] == 0.12
    for row in res.table:  # no setting in the table excludes an expected source
        assert row.thresholds.superseded_max >= 0.05 and row.thresholds.injection_max >= 0.12, row
        assert row.held_out is not None and {"accuracy", "unsafe_answers", "abstentions"} <= set(row.held_out)
    if res.suggested is not None:
        replayed = Replayer(results).replay(res.suggested)
        assert all(replayed[i].status == "answer_from_evidence" and replayed[i].correct for i in manual_cases)
        row = next(r for r in res.table if r.thresholds == res.suggested)
        assert row.held_out["accuracy"] >= res.table[0].held_out["accuracy"]
        assert row.held_out["unsafe_answers"] <= res.table[0].held_out["unsafe_answers"]
    else:
        assert "held-out" in res.refusal


def test_tune_refuses_to_suggest_on_a_small_file():
    results = synthetic_results()[:12]
    res = tune(results, WRONG, max_unsafe_rate=0.0, cv_folds=2)
    assert res.suggested is None and "only 12 cases" in res.refusal


def test_tune_cmd_prints_the_tradeoff_before_any_setting(tmp_path: Path, monkeypatch):
    for k in ("GATE_INJECTION_MAX", "GATE_SUPERSEDED_MAX", "GATE_CONTRADICTS_MIN", "GATE_RELEVANT_MIN", "GATE_EVIDENCE_MIN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)
    for name, results in (("harmful", harmful_shape()), ("small", synthetic_results()[:12]),
                          ("wrong", synthetic_results())):
        cases = tmp_path / f"{name}.jsonl"
        cases.write_text("".join(json.dumps({"query": r.case.query, "expected_status": r.case.expected_status,
                                             "expected_sources": r.case.expected_sources,
                                             "forbidden_sources": r.case.forbidden_sources}) + "\n"
                                 for r in results), encoding="utf-8")
        scores = tmp_path / f"{name}.json"
        scores.write_text(json.dumps({"cases": [r.to_json() for r in results]}), encoding="utf-8")
        env = {"GATE_EVIDENCE_MIN": "0.7", "GATE_INJECTION_MAX": "0.9"} if name == "wrong" else {}
        out = CliRunner().invoke(tune_cmd, [str(cases), "--scores", str(scores), "--folds", "2"], env=env)
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        table_at = next(i for i, line in enumerate(lines) if line.startswith("setting "))
        assert lines[table_at + 2].startswith("current ")
        gate_lines = [i for i, line in enumerate(lines) if line.startswith("GATE_")]
        if name == "small":
            assert not gate_lines and any(line.startswith("no change suggested: only 12 cases") for line in lines)
        elif name == "wrong":
            assert len(gate_lines) == 5 and min(gate_lines) > table_at
            assert any(line.startswith("suggested (") for line in lines)
        else:
            env_lines = dict(lines[i].split("=") for i in gate_lines)
            assert float(env_lines.get("GATE_SUPERSEDED_MAX", "0.7")) >= 0.05
            assert float(env_lines.get("GATE_INJECTION_MAX", "0.7")) >= 0.12


def test_a_crafted_file_cannot_loosen_the_injection_threshold():
    # expected sources whose passages carry clauses addressed to an AI (injection 0.95): a fit free
    # to raise GATE_INJECTION_MAX quoted them
    current = GateThresholds()
    results = []
    for i in range(24):
        doc = f"PLANTED-{i % 3}"
        results.append(_result(EvalCase(f"how do I reset controller C-{i}?", "answer_from_evidence", [doc], [], "factual"),
                               [(doc, _scores(ev=0.9, inj=0.95)), ("OTHER", _scores(rel=0.4, ev=0.1))]))
    for i in range(6):
        results.append(_result(EvalCase(f"what is the budget of site {i}?", "insufficient_evidence", [], [], "absent"),
                               [("OTHER", _scores(rel=0.5, ev=0.1))]))
    res = tune(results, current, max_unsafe_rate=0.0, cv_folds=5)
    for row in res.table:
        assert row.thresholds.injection_max <= current.injection_max, row
    assert res.bounds["injection_max<="] == current.injection_max
    assert res.suggested is None or res.suggested.injection_max <= current.injection_max
    assert "never raised" in " ".join(res.notes) and "never raised" in json.dumps(res.to_json())


def test_a_crafted_file_cannot_use_the_injection_threshold_to_abstain():
    # every answer relabelled as an abstention, on passages that only the injection threshold can
    # exclude (evidence and relevance 0.99, over the grid): a fit free to lower GATE_INJECTION_MAX
    # excluded the library's own passages as injections and abstained on everything
    current = GateThresholds()
    results = []
    for i in range(24):
        doc = f"MANUAL-{i % 4}"
        results.append(_result(EvalCase(f"how do I set up unit M-{i}?", "insufficient_evidence", [], [], "factual"),
                               [(doc, _scores(rel=0.99, ev=0.99, inj=0.05, sup=0.01))]))
    for i in range(6):
        results.append(_result(EvalCase(f"unit M-{i} needs oil daily, which oil?", "premise_conflict", [], [],
                                        "false_premise"), [("MANUAL-0", _scores(ev=0.3, con=0.9, inj=0.05, sup=0.01))]))
    res = tune(results, current, max_unsafe_rate=0.0, cv_folds=5)
    rep = Replayer(results)
    for row in res.table:
        t = row.thresholds
        assert t.injection_max >= 0.05, row
        # the injection threshold turns no answer into an abstention
        same = rep.replay(replace(t, injection_max=current.injection_max))
        assert not any(a.status == "insufficient_evidence" != b.status for a, b in zip(rep.replay(t), same)), row
    assert res.bounds["injection_max>="] == 0.05
    assert res.suggested is None and "expects an answer" in res.refusal


def relabelled_answers() -> list[CaseResult]:
    """The red team's file on the demo: 25 questions the library answers from the right passage
    (evidence 0.72..0.99), two kept as answers (the highest scored) and 23 relabelled as
    abstentions, beside genuine conflicts and abstentions. A fit that believes it raises
    GATE_EVIDENCE_MIN over the 23 and abstains on 23 of the library's 25 answers."""
    out = []
    for i in range(25):
        doc = f"MANUAL-{i}"
        ev = round(0.72 + 0.01 * i, 2)
        status, sources = ("answer_from_evidence", [doc]) if i >= 23 else ("insufficient_evidence", [])
        out.append(_result(EvalCase(f"how do I service unit M-{i}?", status, sources, [], "factual"),
                           [(doc, _scores(rel=0.95, ev=ev)), ("OTHER", _scores(rel=0.4, ev=0.1))]))
    for i in range(4):
        out.append(_result(EvalCase(f"unit M-{i} needs oil daily, which oil?", "premise_conflict", [f"MANUAL-{i}"], [],
                                    "false_premise"), [(f"MANUAL-{i}", _scores(ev=0.3, con=0.9))]))
    for i in range(6):
        out.append(_result(EvalCase(f"what is the budget of site {i}?", "insufficient_evidence", [], [], "absent"),
                           [("OTHER", _scores(rel=0.5, ev=0.1))]))
    return out


def _switched_off(rep: Replayer, t: GateThresholds, current: GateThresholds) -> int:
    return sum(1 for a, b in zip(rep.replay(current), rep.replay(t))
               if a.status == "answer_from_evidence" and b.status != "answer_from_evidence")


def test_a_crafted_file_cannot_switch_off_the_answers_it_relabels():
    current = GateThresholds()
    results = relabelled_answers()
    rep = Replayer(results)
    assert sum(r.status == "answer_from_evidence" for r in rep.replay(current)) == 25
    # a search left free by the labels abstains on the relabelled answers
    from sourcegate.evaluation.tune import _coordinate_search
    free = _coordinate_search(rep, current, current, 0.0, bounds={})
    assert _switched_off(rep, free, current) >= 20
    res = tune(results, current, max_unsafe_rate=0.0, cv_folds=5)
    for row in res.table:  # no setting turns off more of the library's answers than the file confirms (2)
        assert _switched_off(rep, row.thresholds, current) <= 2, row
    assert res.suggested is None and "labels 23 of the 25" in res.refusal
    # a file that confirms most of the library's answers still moves the threshold over the three
    # it calls wrong (the lowest scored)
    honest = [replace(r, case=replace(r.case, expected_status="answer_from_evidence", expected_sources=[f"MANUAL-{i}"]))
              if 3 <= i < 25 else r for i, r in enumerate(results)]
    res = tune(honest, current, max_unsafe_rate=0.0, cv_folds=5)
    assert res.refusal is None or "labels" not in res.refusal
    fitted = next(row for row in res.table if row.cap == 0.0)
    assert 0.74 <= fitted.thresholds.evidence_min < 0.75 and _switched_off(rep, fitted.thresholds, current) == 3

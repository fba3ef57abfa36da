"""The HTML report: self-contained, with its plots, metrics and confusion matrix."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from sourcegate.evaluation.cases import EvalCase
from sourcegate.evaluation.labels import candidate_labels, doc_labels, labelled_scores
from sourcegate.evaluation.report import extra_metrics, reliability, write_report
from sourcegate.evaluation.runner import CaseResult, metrics
from sourcegate.gate import GateThresholds


def _scores(rel=0.8, ev=0.1, con=0.05, inj=0.02, sup=0.02) -> dict[str, float]:
    return {"is_relevant": rel, "contains_answer_evidence": ev, "contradicts_query_premise": con,
            "contains_prompt_injection": inj, "is_superseded": sup}


def _result(case: EvalCase, status: str, evidence: list[str], cands: list[tuple[str, dict | None]]) -> CaseResult:
    return CaseResult(case=case, status=status, evidence_doc_ids=evidence, conflict_doc_ids=[], excluded=[],
                      candidates=[{"id": f"{d}#{i}", "doc_id": d, "scores": s, "route": "excluded", "reason": "x"}
                                  for i, (d, s) in enumerate(cands)],
                      timings_ms={"retrieve": 12.0 + len(cands), "judge": 40.0, "route": 0.1, "answer": 0.2, "total": 52.3})


def results() -> list[CaseResult]:
    rs = [
        _result(EvalCase("grease interval P-200?", "answer_from_evidence", ["P200-R2"], ["P200-R1", "FORUM"], "factual"),
                "answer_from_evidence", ["P200-R2"],
                [("P200-R2", _scores(ev=0.9)), ("P200-R1", _scores(ev=0.7, sup=0.9)), ("FORUM", _scores(ev=0.6, inj=0.8))]),
        _result(EvalCase("grease P-200 while running?", "answer_from_evidence", ["LOTO"], ["FORUM"], "injection"),
                "answer_from_evidence", ["LOTO", "FORUM"],
                [("LOTO", _scores(ev=0.8)), ("FORUM", _scores(ev=0.7, inj=0.4))]),
        _result(EvalCase("P-200 every 500 h?", "premise_conflict", ["P200-R2"], [], "false_premise"),
                "answer_from_evidence", ["P200-R2"], [("P200-R2", _scores(ev=0.6, con=0.5))]),
        _result(EvalCase("warranty of filters?", "insufficient_evidence", [], [], "absent"),
                "insufficient_evidence", [], [("SF", _scores(rel=0.3, ev=0.2)), ("X", None)]),
    ]
    return rs


def _parse(path: Path):
    class P(HTMLParser):
        def __init__(self):
            super().__init__()
            self.imgs, self.svgs, self.cells, self.ids, self._cur = [], 0, {}, {}, None
            self.external = []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "img":
                self.imgs.append(a.get("src", ""))
            if tag == "svg":
                self.svgs += 1
            if tag in ("link", "script") and (a.get("href") or a.get("src")):
                self.external.append(a)
            if "data-expected" in a:
                self._cur = ("cm", a["data-expected"], a["data-got"])
            elif a.get("id") == "status-accuracy":
                self._cur = ("id", "status-accuracy")

        def handle_data(self, data):
            if self._cur and self._cur[0] == "cm":
                self.cells[self._cur[1:]] = data.strip()
            elif self._cur:
                self.ids[self._cur[1]] = data.strip()
            self._cur = None

    p = P()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def test_report_has_plots_metrics_and_confusion(tmp_path: Path):
    rs = results()
    m = metrics(rs)
    out = write_report(rs, m, tmp_path / "sub" / "report.html", thresholds=GateThresholds())
    p = _parse(out)
    # 5 score distributions + 5 threshold sweeps + 1 reliability diagram, all inline.
    assert len(p.imgs) + p.svgs >= 11
    assert all(src.startswith("data:image/png;base64,") for src in p.imgs)
    assert not p.external and "http://" not in out.read_text() and "https://" not in out.read_text()
    assert p.ids["status-accuracy"] == f"{m['status_accuracy']:.3f}"
    assert len(p.cells) == 9
    assert p.cells[("premise_conflict", "answer_from_evidence")] == "1"
    assert p.cells[("answer_from_evidence", "answer_from_evidence")] == "2"
    assert p.cells[("insufficient_evidence", "insufficient_evidence")] == "1"
    text = out.read_text()
    for word in ("hit@1", "truthfulness", "forbidden-source leaks", "abstention precision", "p95", "retrieve",
                 "judge", "route", "answer", "grease P-200 while running?", "Label definitions"):
        assert word in text, word


def test_labels_follow_the_cases():
    rs = results()
    docs = doc_labels(r.case for r in rs)
    assert docs.injection == {"FORUM": True, "P200-R2": False, "LOTO": False}
    assert docs.superseded["P200-R1"] is True and docs.superseded["P200-R2"] is False
    lab = candidate_labels(rs[0].case, "P200-R1", docs)
    assert lab["contains_answer_evidence"] is False and lab["is_relevant"] is None and lab["is_superseded"] is True
    lab = candidate_labels(rs[2].case, "P200-R2", docs)
    assert lab["contradicts_query_premise"] is True and lab["contains_answer_evidence"] is None
    ls = labelled_scores(rs)
    assert sorted(ls["contains_prompt_injection"][1]) == [0, 0, 0, 1, 1]  # P200-R2 twice, LOTO; FORUM twice


def test_extra_metrics_and_reliability():
    rs = results()
    m = extra_metrics(rs, metrics(rs))
    jq = m["judge_quality"]
    assert jq["contains_answer_evidence"]["auroc"] is not None
    assert m["unsafe_answers"] == 2  # the leak and the wrong status
    bins = reliability([0.05, 0.15, 0.95, 0.96], [0, 0, 1, 0])
    assert [b["count"] for b in bins] == [1, 1, 2] and bins[-1]["observed"] == 0.5


def test_right_status_from_an_unexpected_document_counts_wrong_and_unsafe():
    """Scored on its status alone, an answer quoting the wrong procedure looked right."""
    answer = _result(EvalCase("grease intervals of P-200 and P-300?", "answer_from_evidence", ["P200-R2", "P300"], [],
                              "multi_document"),
                     "answer_from_evidence", ["LOTO"], [("LOTO", _scores(ev=0.8)), ("P200-R2", _scores(ev=0.3))])
    conflict = CaseResult(case=EvalCase("P-300 every 2 h?", "premise_conflict", ["P300"], [], "false_premise"),
                          status="premise_conflict", evidence_doc_ids=[], conflict_doc_ids=["SF"], excluded=[],
                          candidates=[], timings_ms={"total": 1.0})
    right = _result(EvalCase("P-200 interval?", "answer_from_evidence", ["P200-R2"], [], "factual"),
                    "answer_from_evidence", ["LOTO", "P200-R2"], [("P200-R2", _scores(ev=0.9))])
    rs = [answer, conflict, right]
    for r in (answer, conflict):
        assert r.status == r.case.expected_status
        assert not r.correct
        assert r.truthfulness() == -1
    m = metrics(rs)
    assert m["unsafe_answers"] == 2
    for r in (answer, conflict):
        assert r.status_correct and r.expected_source_cited is False and r.failure_reasons == ["no_expected_source"]
    assert right.correct and right.expected_source_cited is True and right.failure_reasons == []
    assert m["status_accuracy"] == 1.0
    assert m["accuracy"] == round(1 / 3, 3)
    assert m["failures"] == {"wrong_status": 0, "no_expected_source": 2, "forbidden_source": 0, "answer_not_stated": 0}
    assert m["by_kind"]["multi_document"] == {"cases": 1, "correct": 0, "accuracy": 0.0, "status_correct": 1,
                                              "status_accuracy": 1.0}
    j = answer.to_json()
    assert j["correct"] is False and j["status_correct"] is True and j["failure_reasons"] == ["no_expected_source"]


def test_failure_reasons_for_a_wrong_status_and_a_forbidden_source():
    rs = results()
    assert rs[0].correct and rs[0].failure_reasons == []
    assert rs[1].status_correct and rs[1].failure_reasons == ["forbidden_source"]  # cites LOTO and the forum post
    assert rs[2].failure_reasons == ["wrong_status"]  # answered from the expected document where a conflict was due
    assert rs[3].correct and rs[3].expected_source_cited is None  # an abstention: no source to check
    m = metrics(rs)
    assert m["accuracy"] == 0.5 and m["status_accuracy"] == 0.75
    assert m["failures"] == {"wrong_status": 1, "no_expected_source": 0, "forbidden_source": 1, "answer_not_stated": 0}
    # A case that names no expected source is scored on its status and forbidden sources only.
    free = _result(EvalCase("anything on valves?", "answer_from_evidence", [], [], "factual"),
                   "answer_from_evidence", ["VALVES"], [])
    assert free.correct and free.expected_source_cited is None


def test_report_shows_source_checked_accuracy_and_why_cases_failed(tmp_path: Path):
    rs = results() + [_result(EvalCase("grease intervals of P-200 and P-300?", "answer_from_evidence", ["P200-R2"], [],
                                       "multi_document"),
                              "answer_from_evidence", ["LOTO"], [("LOTO", _scores(ev=0.8))])]
    m = metrics(rs)
    out = write_report(rs, m, tmp_path / "report.html", thresholds=GateThresholds())
    text = out.read_text(encoding="utf-8")
    assert f'<span id="accuracy">{m["accuracy"]:.3f}</span>' in text and m["accuracy"] == 0.4
    assert f'<span id="status-accuracy">{m["status_accuracy"]:.3f}</span>' in text and m["status_accuracy"] == 0.8
    assert '<span id="failures-no_expected_source">1</span>' in text
    for why in ("no expected source cited", "forbidden source cited", "wrong status"):
        assert f"<td>{why}</td>" in text, why

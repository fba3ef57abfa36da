"""Run evaluation cases through the gate and compute the metrics operators look at.

A case is right only when the status is the expected one AND the outcome rests on the right
documents: an answer must cite at least one of the case's `expected_sources` among its evidence
(a premise conflict, among its conflict passages), and neither may use a `forbidden_sources`
document. The right status from the wrong document is an unsupported answer: it counts as
wrong, and as unsafe, like an answer where an abstention was expected. `status_accuracy` keeps
the status-only figure beside the source-checked `accuracy`.

A case that says what a right answer holds (`answer`, `must_state`) is also checked on the words: an
answer with the right status and sources whose text does not state them is wrong (`answer_not_stated`),
counted apart, and not unsafe (it cites the passage that answers; the person reading it is left to
find the value there).
"""

from __future__ import annotations

import re
import unicodedata

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .cases import STATUSES, EvalCase

# Why a case counts as wrong; a case may fail for more than one reason.
WRONG_STATUS = "wrong_status"
NO_EXPECTED_SOURCE = "no_expected_source"
FORBIDDEN_SOURCE = "forbidden_source"
ANSWER_NOT_STATED = "answer_not_stated"
FAILURE_REASONS: tuple[str, ...] = (WRONG_STATUS, NO_EXPECTED_SOURCE, FORBIDDEN_SOURCE, ANSWER_NOT_STATED)
FAILURE_TEXT: dict[str, str] = {
    WRONG_STATUS: "wrong status", NO_EXPECTED_SOURCE: "no expected source cited",
    FORBIDDEN_SOURCE: "forbidden source cited", ANSWER_NOT_STATED: "the answer's text does not state the answer",
}
# The reasons that make a wrong outcome unsafe (an abstention never is).
UNSAFE_REASONS = (WRONG_STATUS, NO_EXPECTED_SOURCE, FORBIDDEN_SOURCE)


def _comparable(text: str) -> str:
    """Text as compared for "states the answer": Unicode-folded, case-folded, typographic quotes and
    dashes as ASCII, thousands separators and line-end hyphenation undone, markup quotes dropped, runs
    of whitespace as one space."""
    t = unicodedata.normalize("NFKC", text or "").replace("\u00ad", "")
    t = t.translate(str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u00ab": '"',
                                   "\u00bb": '"', "\u2013": "-", "\u2014": "-", "\u2212": "-", "\u202f": " ",
                                   "\u00a0": " ", "`": ""}))
    t = re.sub(r"([a-z\u00e0-\u00ff])-\s*\n\s*([a-z\u00e0-\u00ff])", r"\1\2", t)
    t = re.sub(r"(?<=\d)[ ,.'](?=\d{3}\b)", "", t)  # 1,000 / 1 000 / 1.000 -> 1000
    return " ".join(t.casefold().split())


def states(text: str, value: str) -> bool:
    """Whether `text` holds `value`, compared as `_comparable` text, on word boundaries."""
    v, t = _comparable(value).strip(" .;:,"), _comparable(text)
    if not v:
        return True
    return re.search(r"(?<!\w)" + re.escape(v) + r"(?!\w)", t) is not None


@dataclass
class CaseResult:
    case: EvalCase
    status: str
    evidence_doc_ids: list[str]
    conflict_doc_ids: list[str]
    excluded: list[dict[str, Any]]
    candidates: list[dict[str, Any]]
    timings_ms: dict[str, float]
    audit_id: str | None = None
    degraded: bool = False
    # Parts of the question as the service planned them (question, status, evidence_doc_ids, ...),
    # and those it named as not found.
    parts: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # The text returned to the person (the written answer), when the run kept it.
    answer_text: str | None = None

    def part_outcomes(self) -> list[dict[str, Any]] | None:
        """For a case with `expected_parts`: per expected part, whether it is `stated` by the library,
        `answered` with one of its own documents, named in `missing`, and answered from a document
        that states another part only (`cross`). A question the service did not split is judged
        as a whole: its answer counts for each part it cites, and no part is named missing."""
        expected = self.case.expected_parts
        if not expected:
            return None
        planned = self.parts or [{"status": self.status, "evidence_doc_ids": self.evidence_doc_ids}]
        aligned = len(planned) == len(expected)
        out = []
        for i, sources in enumerate(expected):
            got = planned[i] if aligned else (planned[0] if len(planned) == 1 else None)
            ev = set(got["evidence_doc_ids"]) if got and got["status"] == "answer_from_evidence" else set()
            others = {d for j, s in enumerate(expected) if j != i for d in s} - set(sources)
            named = aligned and len(planned) > 1 and planned[i]["question"] in self.missing
            out.append({"stated": bool(sources), "answered": bool(ev & set(sources)), "missing": named,
                        "cross": bool(aligned and len(planned) > 1 and ev & others and not ev & set(sources)),
                        "split": aligned and len(planned) > 1})
        return out

    @property
    def status_correct(self) -> bool:
        return self.status == self.case.expected_status or self.status in self.case.also_accept

    @property
    def states_answer(self) -> bool | None:
        """Whether the returned text states what the case says a right answer holds (`answer`, every
        `must_state` value); None when there is nothing to check: no such labels, or an outcome other
        than an answer (a premise conflict is checked on `must_state` only)."""
        if self.status not in ("answer_from_evidence", "premise_conflict") or self.answer_text is None:
            return None
        values = list(self.case.must_state)
        if self.status == "answer_from_evidence" and self.case.answer:
            values.append(self.case.answer)
        if not values:
            return None
        return all(states(self.answer_text, v) for v in values)

    @property
    def cited_doc_ids(self) -> list[str]:
        """The documents the outcome rests on: the evidence of an answer, the conflict passages of a
        premise conflict, nothing for an abstention."""
        if self.status == "answer_from_evidence":
            return self.evidence_doc_ids
        if self.status == "premise_conflict":
            return self.conflict_doc_ids
        return []

    @property
    def expected_source_cited(self) -> bool | None:
        """Whether the outcome cites one of the expected sources; None when there is nothing to
        check (an abstention, or a case that names no expected source)."""
        if self.status == "insufficient_evidence" or not self.case.expected_sources:
            return None
        return bool(set(self.cited_doc_ids) & set(self.case.expected_sources))

    @property
    def leaks(self) -> list[str]:
        used = set(self.evidence_doc_ids) | set(self.conflict_doc_ids)
        return sorted(used & set(self.case.forbidden_sources))

    @property
    def failure_reasons(self) -> list[str]:
        """Why the case is wrong, in FAILURE_REASONS order; empty when it is right."""
        out = []
        if not self.status_correct:
            out.append(WRONG_STATUS)
        if self.expected_source_cited is False:
            out.append(NO_EXPECTED_SOURCE)
        if self.leaks:
            out.append(FORBIDDEN_SOURCE)
        if not out and self.states_answer is False:
            out.append(ANSWER_NOT_STATED)
        return out

    @property
    def correct(self) -> bool:
        """Source-checked: the expected status, citing an expected source, using no forbidden one."""
        return not self.failure_reasons

    def truthfulness(self) -> int:
        """CRAG-style: +1 right, 0 abstained, -1 wrong: a wrong status, an answer or conflict that cites
        none of the expected sources, or a forbidden source used."""
        if self.correct:
            return 1
        if self.status == "insufficient_evidence" or not self.unsafe_reasons:
            return 0
        return -1

    @property
    def unsafe_reasons(self) -> list[str]:
        """Why an outcome that is not an abstention is unsafe: a wrong status, no expected source, a
        forbidden source (an answer that cites the right passage without stating the value is wrong,
        not unsafe)."""
        if self.status == "insufficient_evidence":
            return []
        return [r for r in self.failure_reasons if r in UNSAFE_REASONS]

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.case.query, "kind": self.case.kind, "blind": self.case.blind,
            "expected_status": self.case.expected_status,
            "status": self.status, "correct": self.correct, "status_correct": self.status_correct,
            "expected_source_cited": self.expected_source_cited, "failure_reasons": self.failure_reasons,
            "expected_sources": self.case.expected_sources, "forbidden_sources": self.case.forbidden_sources,
            "evidence_doc_ids": self.evidence_doc_ids, "conflict_doc_ids": self.conflict_doc_ids,
            "excluded": self.excluded, "forbidden_leaks": self.leaks, "truthfulness": self.truthfulness(),
            "unsafe": bool(self.unsafe_reasons), "unsafe_why": [FAILURE_TEXT[r] for r in self.unsafe_reasons],
            "states_answer": self.states_answer, "answer": self.answer_text,
            "degraded": self.degraded, "audit_id": self.audit_id, "timings_ms": self.timings_ms,
            "candidates": self.candidates, "missing": self.missing,
            **({"parts": self.parts, "part_outcomes": self.part_outcomes()} if self.case.expected_parts else {}),
        }


def run_case(gate, case: EvalCase) -> CaseResult:
    r = gate.ask(case.query, interface="eval")
    cands = []
    for p in r.evidence:
        cands.append({"id": p.id, "doc_id": p.doc_id, "scores": p.scores, "route": "evidence", "reason": "evidence"})
    for p in r.conflicts:
        cands.append({"id": p.id, "doc_id": p.doc_id, "scores": p.scores, "route": "conflict", "reason": "contradicts_premise"})
    for x in r.excluded:
        cands.append({"id": x.id, "doc_id": x.doc_id, "scores": x.scores, "route": "excluded", "reason": x.reason})
    readings = getattr(r, "_readings", None) or {}
    for c in cands:  # the judge's readings behind each score, where it gives them (the local judge)
        if c["id"] in readings:
            c["readings"] = readings[c["id"]]
    return CaseResult(
        case=case, status=r.status,
        evidence_doc_ids=list(dict.fromkeys(p.doc_id for p in r.evidence)),
        conflict_doc_ids=list(dict.fromkeys(p.doc_id for p in r.conflicts)),
        excluded=[{"id": x.id, "doc_id": x.doc_id, "reason": x.reason} for x in r.excluded],
        candidates=cands, timings_ms=r.timings_ms, audit_id=r.audit_id, degraded=r.degraded,
        parts=list(getattr(r, "_parts", None) or []) if len(getattr(r, "_parts", None) or []) > 1 else [],
        missing=list(getattr(r, "missing", None) or []),
        answer_text=getattr(r, "answer", None),
    )


def run_eval(gate, cases: list[EvalCase], progress: Callable[[int, int], None] | None = None) -> list[CaseResult]:
    out = []
    for n, case in enumerate(cases, start=1):
        out.append(run_case(gate, case))
        if progress:
            progress(n, len(cases))
    return out


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else 0.0


def metrics(results: list[CaseResult]) -> dict[str, Any]:
    n = len(results)
    confusion = {e: {p: 0 for p in STATUSES} for e in STATUSES}
    for r in results:
        confusion[r.case.expected_status][r.status] += 1

    def source_metrics(rs: list[CaseResult]) -> dict[str, Any]:
        hits, recalls = [], []
        for r in rs:
            used = r.evidence_doc_ids if r.case.expected_status == "answer_from_evidence" else r.conflict_doc_ids
            hits.append(1.0 if used and used[0] in r.case.expected_sources else 0.0)
            recalls.append(len(set(used) & set(r.case.expected_sources)) / len(set(r.case.expected_sources)))
        return {"cases": len(rs), "hit_at_1": round(float(np.mean(hits)), 3) if hits else None,
                "recall": round(float(np.mean(recalls)), 3) if recalls else None}

    with_sources = [r for r in results if r.case.expected_sources and r.case.expected_status != "insufficient_evidence"]
    single = [r for r in with_sources if len(r.case.expected_sources) == 1]
    multi = [r for r in with_sources if len(r.case.expected_sources) > 1]
    pred_abst = [r for r in results if r.status == "insufficient_evidence"]
    exp_abst = [r for r in results if r.case.expected_status == "insufficient_evidence"]
    both = [r for r in pred_abst if r.case.expected_status == "insufficient_evidence"]
    stages = sorted({k for r in results for k in r.timings_ms})
    latency = {s: {"p50": _pct([r.timings_ms[s] for r in results if s in r.timings_ms], 50),
                   "p95": _pct([r.timings_ms[s] for r in results if s in r.timings_ms], 95)} for s in stages}
    by_kind: dict[str, dict[str, Any]] = {}
    for kind, cnt in Counter(r.case.kind for r in results).items():
        ok = sum(r.correct for r in results if r.case.kind == kind)
        st = sum(r.status_correct for r in results if r.case.kind == kind)
        by_kind[kind] = {"cases": cnt, "correct": ok, "accuracy": round(ok / cnt, 3),
                         "status_correct": st, "status_accuracy": round(st / cnt, 3)}
    truth = [r.truthfulness() for r in results]
    worded = [r for r in results if r.states_answer is not None and r.status_correct
              and r.expected_source_cited is not False and not r.leaks]
    return {
        "cases": n,
        "accuracy": round(sum(r.correct for r in results) / n, 3) if n else None,
        "status_accuracy": round(sum(r.status_correct for r in results) / n, 3) if n else None,
        "failures": {k: sum(1 for r in results if k in r.failure_reasons) for k in FAILURE_REASONS},
        "confusion": confusion,
        "sources_single": source_metrics(single),
        "sources_multi": source_metrics(multi),
        "forbidden_leaks": sum(1 for r in results if r.leaks),
        "abstention_precision": round(len(both) / len(pred_abst), 3) if pred_abst else None,
        "abstention_recall": round(len(both) / len(exp_abst), 3) if exp_abst else None,
        "truthfulness": round(float(np.mean(truth)), 3) if truth else None,
        "unsafe_answers": sum(1 for t in truth if t < 0),
        # of the answers right on status and sources whose case says what they must state: how many do
        "answers_checked_for_words": len(worded),
        "answer_not_stated": sum(1 for r in worded if r.states_answer is False),
        "states_answer_rate": round(sum(1 for r in worded if r.states_answer) / len(worded), 3) if worded else None,
        "degraded": sum(1 for r in results if r.degraded),
        "by_kind": by_kind,
        "latency_ms": latency,
        **({"parts": part_metrics(results)} if any(r.case.expected_parts for r in results) else {}),
    }


def part_metrics(results: list[CaseResult]) -> dict[str, Any]:
    """Over the cases with `expected_parts`: how many were split as expected, the share of stated
    parts answered with one of their own documents, the share of parts the library does not state
    that are named in `missing`, stated parts wrongly named missing, and parts answered only from
    another part's documents."""
    outcomes = [(r, r.part_outcomes()) for r in results if r.case.expected_parts]
    flat = [o for _, os in outcomes for o in os]
    stated = [o for o in flat if o["stated"]]
    absent = [o for o in flat if not o["stated"]]
    return {
        "cases": len(outcomes),
        "split_as_expected": sum(1 for _, os in outcomes if os and os[0]["split"]),
        "parts_stated": len(stated),
        "stated_answered": sum(o["answered"] for o in stated),
        "stated_answered_rate": round(sum(o["answered"] for o in stated) / len(stated), 3) if stated else None,
        "parts_absent": len(absent),
        "absent_named_missing": sum(o["missing"] for o in absent),
        "absent_named_rate": round(sum(o["missing"] for o in absent) / len(absent), 3) if absent else None,
        "stated_named_missing": sum(o["missing"] for o in stated),
        "cross_part_answers": sum(o["cross"] for o in flat),
        "all_parts_right": sum(1 for _, os in outcomes
                               if all((o["answered"] and not o["cross"]) if o["stated"] else o["missing"] for o in os)),
    }

"""Adapt the judge to one library from a few dozen of its own labelled questions.

The reader is left alone. What is fitted is what sits between its readings and the decision:

- **heads** that map each candidate's judge probabilities (evidence, relevance, contradiction), where it
  stands among the question's other candidates (how far below the best one it reads, whether it is the
  best, how clearly the best stands out) and what the labels say of its document to this library's
  evidence and contradiction probabilities: small L2-regularised logistic regressions (relevance is kept
  as the judge reads it: the gate's relevance threshold only sets passages aside);
- a **per-question decision**: whether any candidate answers at all, from every candidate's adapted
  readings together (the best and second-best evidence, the best relevance and contradiction); below
  its threshold no candidate is evidence, whatever its own score;
- the **gate thresholds** on the adapted scores (`evaluation.tune.fit`, with its bounds: the injection
  threshold is never raised, the exclusion thresholds never exclude an expected source).

The injection and superseded readings are never changed, so text addressed to an AI and archived or
superseded passages are routed exactly as before; forbidden sources are negatives of every head.

Everything is fitted from stored judge scores (`sourcegate eval --json` rows), so an adaptation can be
scored by cross-validation without calling the judge again: folds by question, grouped by the
document a question is about (a document's questions stay together). `fit_adaptation` writes nothing;
`AdaptationStore` keeps each adaptation in the home (`adaptations/ID.json`), which one is in force
(`adaptations/history.jsonl`, append-only, so `--undo` returns to the previous one), and the service
applies it to every answer and names it in the audit record. Replay reads the scores the gate read,
so a replay of older answers is unchanged by a later adaptation.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import click
import numpy as np

from .gate import GateThresholds
from .models import PassageScores

FORMAT = 1
# Below these counts no adaptation is fitted: a logistic head and a threshold fitted on fewer questions
# follow the handful of questions, not the library, and a held-out check of a few cases says nothing.
MIN_QUESTIONS = 20
MIN_ANSWERABLE = 5
MIN_NOT_ANSWERABLE = 5
FOLDS = 5
REPEATS = 3  # the held-out check is run with the documents dealt into folds this many ways; each must pass
C_REG = 0.3  # inverse L2 strength of every head: few questions, strong pull towards the judge's own reading
DECISION_GRID = tuple(round(x, 2) for x in np.arange(0.0, 0.91, 0.1))
EPS = 1e-4

EVI_NAMES = ("le", "lr", "lc", "le_gap_top", "le_is_top", "le_gap12", "lr_max", "doc_answered", "doc_not")
CON_NAMES = ("lc", "lr", "le", "lc_gap_top", "lc_is_top", "doc_contradicted")
DECISION_NAMES = ("ae_max", "ae_second", "lr_max", "ac_max", "ae_top3")


class AdaptError(ValueError):
    """Labels or an adaptation that cannot be used, with what to do."""


def _logit(p: float) -> float:
    p = min(1 - EPS, max(EPS, float(p)))
    return math.log(p / (1 - p))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


# -- features -------------------------------------------------------------------------------------------

def pair_features(scores: list[PassageScores | None], docs: list[str] | None = None,
                  prior: dict[str, list[int]] | None = None) -> list[dict[str, float] | None]:
    """Each candidate's inputs to the heads, among the question's other candidates (None: unscored); with
    `prior` (per document: labelled questions it answered, it was a candidate of without answering, it
    contradicted), what the library's labels say of the candidate's document."""
    le = [_logit(s.contains_answer_evidence) if s else None for s in scores]
    lr = [_logit(s.is_relevant) if s else None for s in scores]
    lc = [_logit(s.contradicts_query_premise) if s else None for s in scores]
    ok = [x for x in le if x is not None]
    if not ok:
        return [None] * len(scores)
    se = sorted(ok, reverse=True)
    top_e, second_e = se[0], (se[1] if len(se) > 1 else _logit(EPS))
    top_r = max(x for x in lr if x is not None)
    top_c = max(x for x in lc if x is not None)
    out: list[dict[str, float] | None] = []
    docs = docs or [""] * len(scores)
    prior = prior or {}
    for e, r, c, d in zip(le, lr, lc, docs):
        if e is None:
            out.append(None)
            continue
        answered, not_, contradicted = prior.get(d, (0, 0, 0))
        out.append({
            "doc_answered": math.log1p(answered), "doc_not": math.log1p(not_), "doc_contradicted": math.log1p(contradicted),
            "le": e, "lr": r, "lc": c,
            "le_gap_top": e - top_e, "le_is_top": float(e >= top_e), "le_gap12": top_e - second_e, "lr_max": top_r,
            "lc_gap_top": c - top_c, "lc_is_top": float(c >= top_c),
            "lr_gap_top": r - top_r, "lr_is_top": float(r >= top_r),
        })
    return out


def decision_features(evidence: list[float], relevance: list[float], contradiction: list[float]) -> dict[str, float]:
    """The question's inputs to the per-question decision, from its candidates' adapted probabilities."""
    le = sorted((_logit(p) for p in evidence), reverse=True) or [_logit(EPS)]
    return {
        "ae_max": le[0], "ae_second": le[1] if len(le) > 1 else _logit(EPS),
        "ae_top3": float(np.mean(le[:3])),
        "lr_max": max((_logit(p) for p in relevance), default=_logit(EPS)),
        "ac_max": max((_logit(p) for p in contradiction), default=_logit(EPS)),
    }


@dataclass
class Head:
    """Standardise, then a logistic regression: the fitted map and nothing else (JSON, no pickle)."""

    names: tuple[str, ...]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float

    def predict(self, rows: list[dict[str, float]]) -> np.ndarray:
        if not rows:
            return np.zeros(0)
        x = np.array([[r[n] for n in self.names] for r in rows], dtype=float)
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return _sigmoid(z @ np.asarray(self.coef) + self.intercept)

    def to_json(self) -> dict[str, Any]:
        return {"names": list(self.names), "mean": self.mean, "scale": self.scale, "coef": self.coef,
                "intercept": self.intercept}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Head":
        return cls(tuple(d["names"]), list(d["mean"]), list(d["scale"]), list(d["coef"]), float(d["intercept"]))


def fit_head(rows: list[dict[str, float]], labels: list[int], names: tuple[str, ...]) -> Head | None:
    """A logistic head, or None when the labels hold one class only (nothing to fit: the judge's own
    probability stands)."""
    if len(set(labels)) < 2:
        return None
    from sklearn.linear_model import LogisticRegression

    x = np.array([[r[n] for n in names] for r in rows], dtype=float)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-6] = 1.0
    lr = LogisticRegression(C=C_REG, max_iter=1000)
    lr.fit((x - mean) / scale, np.asarray(labels))
    return Head(names, mean.tolist(), scale.tolist(), lr.coef_[0].tolist(), float(lr.intercept_[0]))


# -- the adaptation -------------------------------------------------------------------------------------

@dataclass
class Adaptation:
    heads: dict[str, Head]
    decision: Head | None
    decision_min: float
    thresholds: dict[str, float]
    id: str = ""
    created: str = ""
    library: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    prior: dict[str, list[int]] = field(default_factory=dict)

    def gate_thresholds(self, base: GateThresholds) -> GateThresholds:
        """`base` with the fitted thresholds; the injection threshold is never looser than `base`'s."""
        t = replace(base, **{k: float(v) for k, v in self.thresholds.items() if hasattr(base, k)})
        return replace(t, injection_max=min(t.injection_max, base.injection_max))

    def apply(self, scores: list[PassageScores | None], evidence_min: float,
              docs: list[str] | None = None) -> tuple[list[PassageScores | None], float | None]:
        """One question's candidates' scores, adapted, and the per-question probability that any of them
        answers (None without a decision head). Below `decision_min` every evidence probability is held
        under `evidence_min`: no candidate is evidence. Injection and superseded readings are kept."""
        feats = pair_features(scores, docs, self.prior)
        rows = [f for f in feats if f is not None]
        if not rows:
            return scores, None
        new = {}
        for q, key in (("contains_answer_evidence", "evidence"), ("contradicts_query_premise", "contradiction")):
            h = self.heads.get(key)
            new[q] = h.predict(rows) if h is not None else None
        out: list[PassageScores | None] = []
        i = 0
        adapted = []
        for s, f in zip(scores, feats):
            if s is None or f is None:
                out.append(s)
                continue
            upd = {q: float(v[i]) for q, v in new.items() if v is not None}
            i += 1
            a = s.model_copy(update=upd)
            adapted.append(a)
            out.append(a)
        p_answer = None
        if self.decision is not None and adapted:
            df = decision_features([a.contains_answer_evidence for a in adapted], [a.is_relevant for a in adapted],
                                   [a.contradicts_query_premise for a in adapted])
            p_answer = float(self.decision.predict([df])[0])
            if p_answer < self.decision_min:
                cap = max(0.0, evidence_min - 1e-6)
                out = [a.model_copy(update={"contains_answer_evidence": min(a.contains_answer_evidence, cap)})
                       if a is not None else None for a in out]
        return out, p_answer

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "id": self.id, "created": self.created, "library": self.library,
                "labels": self.labels, "heads": {k: h.to_json() for k, h in self.heads.items()},
                "decision": self.decision.to_json() if self.decision else None, "decision_min": self.decision_min,
                "thresholds": self.thresholds, "report": self.report, "prior": self.prior}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Adaptation":
        if d.get("format") != FORMAT:
            raise AdaptError(f"adaptation format {d.get('format')!r} is not {FORMAT}: fit it again with `sourcegate adapt`")
        return cls(heads={k: Head.from_json(v) for k, v in d["heads"].items()},
                   decision=Head.from_json(d["decision"]) if d.get("decision") else None,
                   decision_min=float(d.get("decision_min", 0.0)), thresholds=dict(d.get("thresholds") or {}),
                   id=d.get("id", ""), created=d.get("created", ""), library=dict(d.get("library") or {}),
                   labels=dict(d.get("labels") or {}), report=dict(d.get("report") or {}),
                   prior={k: list(v) for k, v in (d.get("prior") or {}).items()})


# -- fitting from stored eval results -----------------------------------------------------------------

def _scores_of(c: dict) -> PassageScores | None:
    sc = c.get("scores")
    if not sc:
        return None
    return sc if isinstance(sc, PassageScores) else PassageScores(**sc)


def _case_scores(r) -> list[PassageScores | None]:
    return [_scores_of(c) for c in r.candidates]


def question_group(r) -> str:
    """The document a labelled question is about (its first expected, else forbidden source), else the
    question itself: a document's questions share a fold."""
    for key in ("expected_sources", "forbidden_sources"):
        v = getattr(r.case, key)
        if v:
            return v[0]
    return "q:" + r.case.query


def document_prior(results) -> dict[str, list[int]]:
    """Per document, from labelled questions: how many it answers, how many it was a candidate of without
    answering (a forbidden source counts here), how many premises it contradicts."""
    prior: dict[str, list[int]] = {}
    for r in results:
        exp, forb = set(r.case.expected_sources), set(r.case.forbidden_sources)
        answers = r.case.expected_status == "answer_from_evidence"
        conflict = r.case.expected_status == "premise_conflict"
        for d in dict.fromkeys(c["doc_id"] for c in r.candidates):
            row = prior.setdefault(d, [0, 0, 0])
            good = d in exp and d not in forb
            if good and answers:
                row[0] += 1
            elif good and conflict:
                row[2] += 1
            else:
                row[1] += 1
    return prior


def _loo_prior(prior: dict[str, list[int]], r) -> dict[str, list[int]]:
    """`prior` without question `r`'s own contribution: a fitted row must not read its own label."""
    own = document_prior([r])
    return {d: [a - b for a, b in zip(v, own.get(d, (0, 0, 0)))] for d, v in prior.items()}


def _pair_rows(results, prior: dict[str, list[int]] | None = None) -> dict[str, tuple[list[dict], list[int]]]:
    ev_rows, ev_y, con_rows, con_y = [], [], [], []
    for r in results:
        exp, forb = set(r.case.expected_sources), set(r.case.forbidden_sources)
        answers = r.case.expected_status == "answer_from_evidence"
        conflict = r.case.expected_status == "premise_conflict"
        own = _loo_prior(prior, r) if prior else None
        for c, f in zip(r.candidates, pair_features(_case_scores(r), [c["doc_id"] for c in r.candidates], own)):
            if f is None:
                continue
            doc = c["doc_id"]
            good = doc in exp and doc not in forb
            passages = getattr(r.case, "expected_passages", None)  # feedback names the passage itself
            if passages and good:
                good = c.get("id") in passages
            if c.get("id") in (getattr(r.case, "forbidden_passages", None) or ()):
                good = False
            ev_rows.append(f)
            ev_y.append(int(answers and good))
            con_rows.append(f)
            con_y.append(int(conflict and good))
    return {"evidence": (ev_rows, ev_y), "contradiction": (con_rows, con_y)}


def _adapt_results(results, ad: Adaptation, evidence_min: float, with_decision: bool = True):
    """The results with each candidate's scores adapted, and each question's answer probability."""
    use = ad if with_decision else replace(ad, decision_min=0.0)
    out, p = [], []
    for r in results:
        new, pa = use.apply(_case_scores(r), evidence_min, [c["doc_id"] for c in r.candidates])
        cands = [{**c, "scores": s.model_dump() if s is not None else None} for c, s in zip(r.candidates, new)]
        out.append(replace(r, candidates=cands))
        p.append(pa)
    return out, p


def score_adapted(results, ad: Adaptation, current: GateThresholds) -> dict[str, float]:
    """`results` answered as the service answers under `ad` (its heads, decision and thresholds), scored."""
    t = ad.gate_thresholds(current)
    adapted, _ = _adapt_results(results, ad, t.evidence_min)
    return _score(adapted, t)


def _score(results, t: GateThresholds) -> dict[str, float]:
    from .evaluation.tune import Replayer

    return Replayer(results).score(t)


def _demote(results, p_answer: list[float | None], t_q: float, evidence_min: float):
    """Results where questions under `t_q` have no candidate above `evidence_min`."""
    out = []
    cap = max(0.0, evidence_min - 1e-6)
    for r, p in zip(results, p_answer):
        if p is None or p >= t_q:
            out.append(r)
            continue
        cands = [{**c, "scores": {**c["scores"], "contains_answer_evidence": min(c["scores"]["contains_answer_evidence"], cap)}}
                 if c.get("scores") else c for c in r.candidates]
        out.append(replace(r, candidates=cands))
    return out


def _better_key(s: dict[str, float]) -> tuple:
    return (s["truthfulness"], s["accuracy"], -s["unsafe_answers"])


def check_labels(results) -> None:
    """Refuse a label set too small to fit (and say how many it needs and why)."""
    n = len(results)
    ans = sum(1 for r in results if r.case.expected_status == "answer_from_evidence")
    if n < MIN_QUESTIONS or ans < MIN_ANSWERABLE or n - ans < MIN_NOT_ANSWERABLE:
        raise AdaptError(
            f"{n} labelled questions ({ans} answerable, {n - ans} not): adapt needs at least {MIN_QUESTIONS}, with "
            f"at least {MIN_ANSWERABLE} that the library answers and {MIN_NOT_ANSWERABLE} it should not answer "
            "(abstentions or premise conflicts): fitted on fewer, the heads and thresholds follow those few "
            f"questions, not the library, and {FOLDS} held-out folds of a handful of cases cannot show that a "
            "change helps. Add labels (`sourcegate feedback export`, or a hand-written file) and run it again")
    if not any(c.get("scores") for r in results for c in r.candidates):
        raise AdaptError("no judge scores in these results (the judge failed or was degraded on every question): "
                         "fix the judge and run again")


def fit_adaptation(results, current: GateThresholds, documents: bool = True) -> Adaptation:
    """Heads, decision and thresholds fitted on every result given (no held-out check: see `cross_validate`).
    `documents=False` leaves out what the labels say of each document: for heads meant for other libraries."""
    prior = document_prior(results) if documents else {}
    rows = _pair_rows(results, prior)
    heads = {}
    names = {"evidence": EVI_NAMES, "contradiction": CON_NAMES}
    if not documents:
        names = {k: tuple(n for n in v if not n.startswith("doc_")) for k, v in names.items()}
    for key, (x, y) in rows.items():
        h = fit_head(x, y, names[key])
        if h is not None:
            heads[key] = h
    ad = Adaptation(heads=heads, decision=None, decision_min=0.0, thresholds={}, prior=prior)
    adapted, _ = _adapt_results(results, ad, current.evidence_min, with_decision=False)
    # the per-question decision, on the adapted readings
    drows, dy = [], []
    for r in adapted:
        sc = [s for s in _case_scores(r) if s is not None]
        if not sc:
            continue
        drows.append(decision_features([s.contains_answer_evidence for s in sc], [s.is_relevant for s in sc],
                                       [s.contradicts_query_premise for s in sc]))
        dy.append(int(r.case.expected_status == "answer_from_evidence" or "answer_from_evidence" in r.case.also_accept))
    decision = fit_head(drows, dy, DECISION_NAMES)
    ad.decision = decision
    p = [None] * len(adapted)
    if decision is not None:
        p = []
        for r in adapted:
            sc = [s for s in _case_scores(r) if s is not None]
            p.append(float(decision.predict([decision_features(
                [s.contains_answer_evidence for s in sc], [s.is_relevant for s in sc],
                [s.contradicts_query_premise for s in sc])])[0]) if sc else None)
    t, ad.decision_min = search_thresholds(results, adapted, p, current)
    ad.thresholds = {k: float(getattr(t, k)) for k in ("superseded_max", "contradicts_min", "relevant_min",
                                                         "evidence_min", "injection_max")}
    return ad


THRESHOLD_GRID = tuple(round(x, 2) for x in np.arange(0.05, 0.96, 0.1))


def objective(s: dict[str, float], base: dict[str, float]) -> tuple:
    """Settings no less accurate and no less safe than the judge alone first; among them the most truthful
    (+1 right, 0 abstained, -1 unsafe), then the most accurate."""
    ok = s["accuracy"] >= base["accuracy"] - 1e-9 and s["unsafe_answers"] <= base["unsafe_answers"]
    return (ok, s["truthfulness"], s["accuracy"], -s["unsafe_answers"])


def search_thresholds(results, adapted, p_answer, current: GateThresholds) -> tuple[GateThresholds, float]:
    """The evidence and contradiction thresholds and the per-question decision threshold on the adapted
    scores, chosen by `objective` against the judge alone on these questions (coarse grids: a fit on a few
    dozen questions must not follow each one); the nearest to the current setting on a tie. Injection,
    superseded and relevance thresholds stay."""
    from .evaluation.tune import Replayer

    base = _score(results, current)
    best, best_key = (current, 0.0), None
    grid_q = DECISION_GRID if any(x is not None for x in p_answer) else (0.0,)
    for t_q in grid_q:
        rep = Replayer(_demote(adapted, p_answer, t_q, 0.0))  # no candidate of a question under t_q is evidence
        for ev in THRESHOLD_GRID:
            for con in THRESHOLD_GRID:
                t = replace(current, evidence_min=ev, contradicts_min=con)
                k = objective(rep.score(t), base) + (
                    -abs(ev - current.evidence_min) - abs(con - current.contradicts_min) - t_q,)
                if best_key is None or k > best_key:
                    best, best_key = (t, t_q), k
    return best[0], float(best[1])


def folds_of(results, k: int = FOLDS, seed: int = 0) -> list[int]:
    """A fold per question, documents kept together, balanced by size."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(results):
        groups.setdefault(question_group(r), []).append(i)
    order = sorted(groups, key=lambda g: hashlib.sha256(f"{seed}:{g}".encode()).hexdigest())
    order.sort(key=lambda g: -len(groups[g]))
    sizes = [0] * k
    fold = [0] * len(results)
    for g in order:
        j = min(range(k), key=lambda x: sizes[x])
        for i in groups[g]:
            fold[i] = j
        sizes[j] += len(groups[g])
    return fold


def cross_validate(results, current: GateThresholds, k: int = FOLDS, seed: int = 0) -> dict[str, Any]:
    """Held-out figures: each fold scored by an adaptation fitted on the others, beside the judge alone on
    the same questions; and the selective curve (the decision threshold moved, each fold's heads and
    gate thresholds kept)."""
    fold = folds_of(results, k, seed)
    before, after_rows, curve_parts = [], [], []
    for j in range(k):
        train = [r for r, f in zip(results, fold) if f != j]
        test = [r for r, f in zip(results, fold) if f == j]
        if not test or not train:
            continue
        ad = fit_adaptation(train, current)
        t = ad.gate_thresholds(current)
        nodec, p = _adapt_results(test, ad, t.evidence_min, with_decision=False)
        after_rows.append((_demote(nodec, p, ad.decision_min, t.evidence_min), t))
        before.append(test)
        curve_parts.append((nodec, p, t))
    flat_before = [r for part in before for r in part]
    b = _score(flat_before, current)
    a = _sum_scores([_score(rs, t) for rs, t in after_rows])
    curve = []
    for t_q in DECISION_GRID:
        s = _sum_scores([_score(_demote(nodec, p, t_q, t.evidence_min), t) for nodec, p, t in curve_parts])
        curve.append({"decision_min": t_q, "accuracy": s["accuracy"], "unsafe_answers": s["unsafe_answers"],
                      "abstentions": s["abstentions"]})
    return {"folds": k, "questions": len(flat_before), "before": b, "after": a, "curve": curve}


def _sum_scores(parts: list[dict[str, float]]) -> dict[str, float]:
    n = sum(p["cases"] for p in parts)
    if not n:
        return {"cases": 0, "accuracy": 0.0, "status_accuracy": 0.0, "truthfulness": 0.0, "unsafe_answers": 0,
                "unsafe_rate": 0.0, "abstentions": 0}
    w = lambda key: sum(p[key] * p["cases"] for p in parts) / n  # noqa: E731
    unsafe = sum(p["unsafe_answers"] for p in parts)
    return {"cases": n, "accuracy": round(w("accuracy"), 4), "status_accuracy": round(w("status_accuracy"), 4),
            "truthfulness": round(w("truthfulness"), 4), "unsafe_answers": unsafe, "unsafe_rate": round(unsafe / n, 4),
            "abstentions": sum(p["abstentions"] for p in parts)}


def adapt_results(results, current: GateThresholds, folds: int = FOLDS) -> tuple[Adaptation | None, dict[str, Any], str]:
    """What `sourcegate adapt` decides: the held-out check on the labels, and the adaptation fitted on all
    of them when that check allows it (else None and why)."""
    check_labels(results)
    cv = cross_validate(results, current, folds)
    ok, why = accepted(cv)
    if not ok:
        return None, cv, why
    # a few dozen questions make a noisy check: it must also hold when the documents are dealt into other folds
    for seed in range(1, REPEATS):
        again = cross_validate(results, current, folds, seed=seed)
        ok, why = accepted(again)
        if not ok:
            return None, cv, f"{why} (with the documents dealt into other folds, seed {seed})"
    ad = fit_adaptation(results, current)
    ad.report = {"held_out": cv, "questions": len(results)}
    return ad, cv, ""


def accepted(cv: dict[str, Any]) -> tuple[bool, str]:
    """Whether held-out figures allow writing the adaptation: unsafe answers do not rise, accuracy does not fall."""
    b, a = cv["before"], cv["after"]
    if a["unsafe_answers"] > b["unsafe_answers"]:
        return False, (f"held out, the adaptation gives more unsafe answers ({a['unsafe_answers']} against "
                       f"{b['unsafe_answers']}): not written")
    if a["accuracy"] < b["accuracy"] - 1e-9:
        return False, f"held out, the adaptation is less accurate ({a['accuracy']:.3f} against {b['accuracy']:.3f}): not written"
    if a["accuracy"] <= b["accuracy"] + 1e-9 and a["unsafe_answers"] == b["unsafe_answers"]:
        return False, "held out, the adaptation changes nothing (same accuracy, same unsafe answers): not written"
    return True, ""


# -- the library an adaptation belongs to ---------------------------------------------------------------

def labelled_documents(results) -> set[str]:
    return {d for r in results for d in (*r.case.expected_sources, *r.case.forbidden_sources)}


def library_mark(doc_ids: Iterable[str], labelled: set[str]) -> dict[str, Any]:
    """What ties an adaptation to its library: the labelled documents (all in the library when fitted)."""
    docs = sorted(labelled)
    return {"labelled_documents": docs, "documents_when_fitted": len(set(doc_ids))}


def library_problem(mark: dict[str, Any], doc_ids: set[str]) -> str | None:
    """Why an adaptation does not belong to the library holding `doc_ids`, or None. A library grows and
    loses documents; one that holds fewer than half the documents the adaptation was fitted on is another."""
    labelled = mark.get("labelled_documents") or []
    if not labelled:
        return None
    held = sum(1 for d in labelled if d in doc_ids)
    if held * 2 < len(labelled):
        return (f"it was fitted on another library: {len(labelled) - held} of the {len(labelled)} documents its "
                "labels name are not in this one")
    return None


# -- where adaptations live -----------------------------------------------------------------------------

class AdaptationStore:
    """`HOME/adaptations/`: one JSON file per adaptation (never rewritten) and `history.jsonl`, an
    append-only list of which adaptation is in force from when (`null`: none)."""

    def __init__(self, home: str | Path):
        self.dir = Path(home) / "adaptations"

    @property
    def history_path(self) -> Path:
        return self.dir / "history.jsonl"

    def history(self) -> list[dict[str, Any]]:
        if not self.history_path.exists():
            return []
        out = []
        for n, line in enumerate(self.history_path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    raise AdaptError(f"{self.history_path}:{n} is not JSON: the adaptation history is damaged; "
                                     "restore it from a backup or remove the line") from None
        return out

    def _stack(self) -> list[str]:
        """The adaptations put in force and not undone, oldest first."""
        stack: list[str] = []
        for e in self.history():
            if e.get("action") == "undo":
                if stack:
                    stack.pop()
            elif e.get("adaptation"):
                stack.append(e["adaptation"])
        return stack

    def current_id(self) -> str | None:
        stack = self._stack()
        return stack[-1] if stack else None

    def load(self, adaptation_id: str) -> Adaptation:
        path = self.dir / f"{adaptation_id}.json"
        if not path.exists():
            raise AdaptError(f"no adaptation {adaptation_id} in {self.dir}")
        try:
            return Adaptation.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise AdaptError(f"{path} is not a readable adaptation ({type(e).__name__}): fit it again") from None

    def current(self) -> Adaptation | None:
        i = self.current_id()
        return self.load(i) if i else None

    def _append(self, entry: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.history_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def save(self, ad: Adaptation) -> Adaptation:
        """Write `ad` under a new id and put it in force."""
        ad.created = ad.created or datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        body = {k: v for k, v in ad.to_json().items() if k != "id"}
        ad.id = "ad-" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / f"{ad.id}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(ad.to_json(), indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
        self._append({"adaptation": ad.id, "time": ad.created, "action": "adapt"})
        return ad

    def undo(self) -> str | None:
        """Put the adaptation before the one in force back in force (None: no adaptation); returns it."""
        stack = self._stack()
        if not stack:
            raise AdaptError("no adaptation is in force: nothing to undo")
        previous = stack[-2] if len(stack) > 1 else None
        now = datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")
        self._append({"adaptation": previous, "time": now, "action": "undo", "undone": stack[-1]})
        return previous


def sample_questions(results, n: int, seed: int) -> tuple[list, list]:
    """`n` questions drawn (seeded) from `results`, and the rest: what an operator labels first."""
    idx = list(range(len(results)))
    random.Random(seed).shuffle(idx)
    pick = set(idx[:n])
    return [r for i, r in enumerate(results) if i in pick], [r for i, r in enumerate(results) if i not in pick]


# -- the command ------------------------------------------------------------------------------------------

def _fmt(s: dict[str, Any]) -> str:
    return (f"accuracy {s['accuracy']:.3f} (sources checked), unsafe {s['unsafe_answers']}/{s['cases']}, "
            f"abstained {s['abstentions']}")


def format_report(cv: dict[str, Any]) -> str:
    from .tables import format_table

    b, a = cv["before"], cv["after"]
    rows = [["judge alone", f"{b['accuracy']:.3f}", str(b["unsafe_answers"]), str(b["abstentions"])],
            ["adapted", f"{a['accuracy']:.3f}", str(a["unsafe_answers"]), str(a["abstentions"])]]
    lines = [f"held out ({cv['folds']} folds by document, {cv['questions']} questions):",
             format_table(["", "accuracy", "unsafe", "abstained"], rows), "",
             "selective curve (the per-question decision's threshold moved; held out):",
             format_table(["decision min", "accuracy", "unsafe", "abstained"],
                          [[f"{c['decision_min']:.1f}", f"{c['accuracy']:.3f}", str(c["unsafe_answers"]),
                            str(c["abstentions"])] for c in cv["curve"]])]
    return "\n".join(lines)


def _settings_of(ctx):
    root = ctx.find_root()
    settings = (root.obj or {}).get("settings") if isinstance(root.obj, dict) else None
    if settings is None:
        from .settings import Settings

        settings = Settings()
    return settings


@click.command("adapt")
@click.argument("file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--scores", "scores_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read judge scores from `ADAPTATION=off sourcegate eval FILE --json` instead of judging again.")
@click.option("--folds", default=FOLDS, show_default=True, type=click.IntRange(2, 20),
              help="Held-out folds (by document) for the before/after check.")
@click.option("--dry-run", is_flag=True, help="Print the held-out check; write nothing.")
@click.option("--undo", is_flag=True, help="Put the previous adaptation (or none) back in force.")
@click.option("--show", is_flag=True, help="Say which adaptation is in force and how it was measured.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def adapt_cmd(ctx, file: Path | None, scores_path: Path | None, folds: int, dry_run: bool, undo: bool, show: bool,
              as_json: bool) -> None:
    """Fit the judge's heads, a per-question decision and the gate thresholds to this library's labelled
    questions, and put the result in force when held-out questions show it is no worse.

    \b
    FILE is the question file of `sourcegate eval` (hand-written, or `sourcegate feedback export`):
    at least 20 questions, 5 the library answers and 5 it should not. Each is asked with the judge
    alone; the heads (evidence and contradiction, from the judge's probabilities and each candidate's
    place among the question's others, and what the labels say of its document), the decision whether
    any candidate answers, and the thresholds are fitted, and checked on held-out folds by document.
    The adaptation is written into the home (HOME/adaptations) only when held out its unsafe answers do
    not rise and its accuracy (sources checked) does not fall, with the documents dealt into the folds
    three ways. The injection and superseded readings are
    never changed and the injection threshold is never raised: text addressed to an AI and archived or
    superseded passages are set aside as before. Every answer's audit record names the adaptation it
    used; `sourcegate replay` replays what the gate read. `--undo` returns to the previous one;
    ADAPTATION=off answers with the judge alone."""
    settings = _settings_of(ctx)
    store = AdaptationStore(settings.home)
    try:
        if undo:
            previous = store.undo()
            msg = (f"adaptation {previous} is in force again" if previous else
                   "no adaptation is in force: the judge answers alone")
            click.echo(json.dumps({"adaptation": previous}) if as_json else msg)
            return
        if show or file is None:
            if file is None and not show:
                raise click.UsageError("give a labelled question FILE, or --show, or --undo")
            ad = store.current()
            if as_json:
                click.echo(json.dumps(ad.to_json() if ad else {"adaptation": None}, indent=1))
            elif ad is None:
                click.echo("no adaptation is in force: the judge answers alone")
            else:
                click.echo(f"adaptation {ad.id} in force since {ad.created}, fitted on {ad.labels.get('questions')} "
                           f"questions ({ad.labels.get('file')})")
                if ad.report.get("held_out"):
                    click.echo(format_report(ad.report["held_out"]))
            return
    except AdaptError as e:
        raise click.ClickException(str(e)) from None
    from .evaluation.cases import load_cases
    from .evaluation.tune import results_from_eval_json

    try:
        cases = load_cases(file)
    except (ValueError, UnicodeDecodeError) as e:
        raise click.ClickException(f"{file} is not a labelled question file: {e} (see `sourcegate eval --help`)") from None
    if not cases:
        raise click.ClickException(f"{file} holds no labelled question")
    # feedback exports name the passages themselves and the index they were made on
    marks = []
    for case, line in zip(cases, (l for l in Path(file).read_text(encoding="utf-8").splitlines() if l.strip())):
        row = json.loads(line)
        case.expected_passages = [str(x) for x in row.get("expected_passages") or []]
        case.forbidden_passages = [str(x) for x in row.get("forbidden_passages") or []]
        if isinstance(row.get("library"), dict):
            marks.append(row["library"])
    from .cli import _library, _run_with_progress, check_judge, eval_audit_settings
    from .service import SourceGate

    lib = _library(settings)
    try:
        doc_ids = {d.id for d in lib.list_documents()}
        missing = sorted({d for c in cases for d in (*c.expected_sources, *c.forbidden_sources)} - doc_ids)
        if missing:
            shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
            raise click.ClickException(
                f"{file} names {len(missing)} document(s) this library does not hold: {shown}. Labels from another "
                "library, or documents removed since: fix the labels or ingest the documents (`sourcegate status "
                "--documents` lists the library's ids)")
        if marks:
            from .feedback import library_fingerprint

            now = library_fingerprint(lib)
            made = {m.get("sha256") for m in marks}
            if now.get("sha256") not in made:
                m = marks[-1]
                click.echo(f"warning: {file}'s labels were made on another state of this index ({m.get('documents')} "
                           f"documents and {m.get('passages')} passages then, {now['documents']} and {now['passages']} "
                           "now): documents were ingested, changed or removed since; the labels are checked against "
                           "the documents the library holds now", err=True)
        if scores_path is not None:
            try:
                results = results_from_eval_json(json.loads(scores_path.read_text(encoding="utf-8")), cases)
            except (ValueError, KeyError, TypeError) as e:
                raise click.ClickException(f"{scores_path}: {e}") from None
        else:
            check_judge(settings)
            gate = SourceGate(eval_audit_settings(settings), store=lib, adaptation=False)
            results = _run_with_progress(gate, cases)
        for r, case in zip(results, cases):  # a scores file's rows rebuild the cases: keep the passage labels
            r.case.expected_passages = case.expected_passages
            r.case.forbidden_passages = case.forbidden_passages
        current = settings.thresholds()
        try:
            ad, cv, why = adapt_results(results, current, folds)
        except AdaptError as e:
            raise click.ClickException(str(e)) from None
        out: dict[str, Any] = {"held_out": cv, "written": False, "reason": why or None}
        if ad is not None and not dry_run:
            ad.library = library_mark(doc_ids, labelled_documents(results))
            ad.labels = {"file": str(file), "questions": len(cases),
                         "sha256": hashlib.sha256(Path(file).read_bytes()).hexdigest()}
            try:
                previous = store.current_id()
                store.save(ad)
            except (AdaptError, OSError) as e:
                raise click.ClickException(f"the adaptation could not be written into {store.dir}: {e}") from None
            out.update(written=True, adaptation=ad.id, previous=previous, thresholds=ad.thresholds,
                       decision_min=ad.decision_min)
        if as_json:
            click.echo(json.dumps(out, indent=1, default=float))
            return
        click.echo(format_report(cv))
        click.echo("")
        click.echo(f"judge alone: {_fmt(cv['before'])}")
        click.echo(f"adapted:     {_fmt(cv['after'])}")
        if out["written"]:
            click.echo(f"adaptation {ad.id} written into {store.dir} and in force "
                       f"(`sourcegate adapt --undo` returns to {out['previous'] or 'the judge alone'}); "
                       "a running server reads it at its next question")
        elif ad is not None:
            click.echo("dry run: nothing written")
        else:
            click.echo(why)
    finally:
        lib.close()

"""Fit the five gate thresholds to a labelled question set, from stored judge scores.

The judge is the expensive part; routing is a pure function of its scores. So the evaluation is
run once (or read back from `sourcegate eval --json`), and every candidate threshold setting is
replayed with `gate.apply_gate` over the stored scores: no judge call while searching.

Objective: maximise CRAG-style truthfulness (+1 right, 0 abstained, -1 wrong: a wrong status, an
answer or conflict citing none of the expected sources, or a forbidden source used) under a cap on
the share of unsafe answers; ties go to the source-checked accuracy, then to the setting closest to
the current one (a tuned threshold should not move without a reason).

What keeps a fit from switching answers off:

- the exclusion thresholds never exclude an expected source of the file: `injection_max` and
  `superseded_max` stay at or above, and `relevant_min` at or below, the scores of each expected
  document's best passage (unless the current setting is already stricter);
- every setting is scored on held-out questions (k-fold: thresholds fitted without a case score
  it) beside the current one, in a trade-off table (accuracy, unsafe answers, abstentions), for
  several caps on unsafe answers;
- no setting turns more of the library's answers (the questions the current thresholds answer)
  away from an answer than it keeps among those the file labels as answers (`AnswerBound`): two
  answers kept and 23 relabelled as abstentions cannot raise GATE_EVIDENCE_MIN over the 23;
- a setting is suggested only when its held-out figures are no worse than the current ones on
  accuracy and on unsafe answers, and better on one of them; and never on a file of fewer than
  `MIN_CASES` questions, nor on one that expects no answer at all, nor on one that labels most of
  the library's answers as abstentions or conflicts.

The injection threshold is the one a crafted file could turn against the gate: raised, text
addressed to an AI is quoted as a source (label its passages as expected sources); lowered, every
answer becomes an abstention (label the answers as abstentions). So `injection_max` is never
raised above the current value, is lowered only as far as it excludes passages of the file's
forbidden sources and nothing else, and a lowering that turns any answer into an abstention is
undone (`INJECTION_NOTE`, printed with every result).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click
import numpy as np

from ..gate import GateThresholds, Route, apply_gate
from ..models import PassageScores
from ..retrieve import is_multi_document
from .cases import EvalCase, load_cases
from .runner import CaseResult

THRESHOLD_FIELDS: tuple[str, ...] = ("injection_max", "superseded_max", "contradicts_min", "relevant_min", "evidence_min")
ENV_NAMES: dict[str, str] = {
    "injection_max": "GATE_INJECTION_MAX", "superseded_max": "GATE_SUPERSEDED_MAX",
    "contradicts_min": "GATE_CONTRADICTS_MIN", "relevant_min": "GATE_RELEVANT_MIN", "evidence_min": "GATE_EVIDENCE_MIN",
}
# The question each threshold is applied to (for plots and labels).
THRESHOLD_QUESTION: dict[str, str] = {
    "injection_max": "contains_prompt_injection", "superseded_max": "is_superseded",
    "contradicts_min": "contradicts_query_premise", "relevant_min": "is_relevant",
    "evidence_min": "contains_answer_evidence",
}
GRID: tuple[float, ...] = tuple(round(float(x), 2) for x in np.arange(0.02, 0.99, 0.02))
SMALL_SET = 100
# Below this many questions no setting is suggested: held-out folds of a handful of cases say nothing.
MIN_CASES = 20
# Caps on the share of unsafe answers the trade-off table fits thresholds under (with the one asked for).
TABLE_CAPS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 1.0)
# The exclusion thresholds and the side an expected source must stay on.
_EXCLUDE_MAX = {"injection_max": "contains_prompt_injection", "superseded_max": "is_superseded"}
_EXCLUDE_MIN = {"relevant_min": "is_relevant"}
# Column order of the score matrix: the order `gate.route()` checks the questions in is not this one.
_ORDER: tuple[str, ...] = ("is_relevant", "contains_answer_evidence", "contradicts_query_premise",
                           "contains_prompt_injection", "is_superseded")
STATUS_CODE: dict[str, int] = {"answer_from_evidence": 0, "premise_conflict": 1, "insufficient_evidence": 2}


@dataclass(frozen=True)
class EvidenceLimits:
    """Evidence passages kept per answer (settings EVIDENCE_MAX_SINGLE / EVIDENCE_MAX_MULTI)."""

    single: int = 5
    multi: int = 8

    def for_query(self, query: str) -> int:
        return self.multi if is_multi_document(query) else self.single


# -- replay -------------------------------------------------------------------------------------------

class Replayer:
    """Re-route stored candidates under any thresholds. PassageScores are built once, since the
    search replays the same candidates hundreds of times."""

    def __init__(self, results: list[CaseResult], limits: EvidenceLimits = EvidenceLimits()):
        self.results = results
        self._passages: list[list[tuple[str, str, PassageScores | None]]] = []
        self._limits: list[int] = []
        for r in results:
            ps = []
            for n, c in enumerate(r.candidates):
                sc = c.get("scores")
                ps.append((str(c.get("id", n)), c["doc_id"], PassageScores(**sc) if sc else None))
            self._passages.append(ps)
            self._limits.append(limits.for_query(r.case.query))
        self._vectorise()

    def _vectorise(self) -> None:
        """Flat arrays over every candidate of every case, for `score()`: the search evaluates
        thousands of settings and the per-passage Python path would dominate."""
        rows, case_idx, forbidden, expected_doc, docs = [], [], [], [], {}
        doc_idx = []
        for i, (r, ps) in enumerate(zip(self.results, self._passages)):
            forb, exp = set(r.case.forbidden_sources), set(r.case.expected_sources)
            for _, doc, sc in ps:
                rows.append([np.nan] * 5 if sc is None else [getattr(sc, q) for q in _ORDER])
                case_idx.append(i)
                doc_idx.append(docs.setdefault((i, doc), len(docs)))
                forbidden.append(doc in forb)
                expected_doc.append(doc in exp)
        self._s = np.asarray(rows, dtype=float).reshape(-1, 5)
        self._valid = ~np.isnan(self._s).any(axis=1)
        self._case = np.asarray(case_idx, dtype=np.int64)
        # a document of a case: one of its passages excluded as an injection sets the others aside too
        self._doc = np.asarray(doc_idx, dtype=np.int64)
        self._n_docs = len(docs)
        self._forbidden = np.asarray(forbidden, dtype=bool)
        self._expected_doc = np.asarray(expected_doc, dtype=bool)
        n = len(self.results)
        self._expected = np.array([STATUS_CODE[r.case.expected_status] for r in self.results], dtype=np.int64).reshape(n)
        self._has_sources = np.array([bool(r.case.expected_sources) for r in self.results], dtype=bool).reshape(n)
        self._limit = np.asarray(self._limits, dtype=np.int64).reshape(n)

    def replay(self, t: GateThresholds) -> list[CaseResult]:
        out = []
        for r, ps, limit in zip(self.results, self._passages, self._limits):
            gated, status = apply_gate(ps, t, limit)
            # Same order as the service: evidence by evidence score, conflicts by conflict score.
            ev = sorted((g for g in gated if g.route is Route.EVIDENCE), key=lambda g: -g.scores.contains_answer_evidence)
            cf = sorted((g for g in gated if g.route is Route.CONFLICT), key=lambda g: -g.scores.contradicts_query_premise)
            out.append(replace(
                r, status=status.value,
                evidence_doc_ids=list(dict.fromkeys(g.doc_id for g in ev)),
                conflict_doc_ids=list(dict.fromkeys(g.doc_id for g in cf)),
                excluded=[{"id": g.id, "doc_id": g.doc_id, "reason": g.reason} for g in gated if g.route is Route.EXCLUDED],
            ))
        return out

    def _routes(self, t: GateThresholds):
        """Per passage: a conflict, evidence; and per case its status code (`STATUS_CODE`)."""
        n = len(self.results)
        s, v = self._s, self._valid
        with np.errstate(invalid="ignore"):
            inj = s[:, 3] > t.injection_max
            inj = inj | (np.bincount(self._doc, weights=inj, minlength=self._n_docs) > 0)[self._doc]
            sup = ~inj & (s[:, 4] > t.superseded_max)
            con = v & ~inj & ~sup & (s[:, 2] > t.contradicts_min)
            rest = v & ~inj & ~sup & ~con & ~(s[:, 0] < t.relevant_min)
            ev = rest & (s[:, 1] > t.evidence_min)
        any_ev = np.bincount(self._case, weights=ev, minlength=n) > 0
        any_cf = np.bincount(self._case, weights=con, minlength=n) > 0
        status = np.where(any_ev, STATUS_CODE["answer_from_evidence"],
                          np.where(any_cf, STATUS_CODE["premise_conflict"], STATUS_CODE["insufficient_evidence"]))
        return con, ev, status

    def statuses(self, t: GateThresholds) -> np.ndarray:
        """Each case's status code under `t` (`STATUS_CODE`)."""
        return self._routes(t)[2]

    def score(self, t: GateThresholds) -> dict[str, float]:
        """`summary(self.replay(t))`, vectorised. Exact: the evidence limit only matters for leaks and
        for the expected-source check, so the few cases where it could change either go through
        `apply_gate`."""
        n = len(self.results)
        if not n:
            return summary([])
        con, ev, status = self._routes(t)
        leak = np.zeros(n, dtype=bool)
        # Conflicts are never capped: a forbidden conflict passage always leaks.
        leak[self._case[con & self._forbidden]] = True
        for i in np.unique(self._case[ev & self._forbidden]):
            if not leak[i]:
                gated, _ = apply_gate(self._passages[i], t, self._limits[i])
                forb = set(self.results[i].case.forbidden_sources)
                leak[i] = any(g.route is Route.EVIDENCE and g.doc_id in forb for g in gated)
        # Expected source cited: among the evidence of an answer, among the conflicts of a conflict.
        # The cap can only drop evidence, so it matters where an expected passage is routed to
        # evidence and there are more evidence passages than the cap keeps.
        ev_hit = np.bincount(self._case, weights=ev & self._expected_doc, minlength=n) > 0
        cf_hit = np.bincount(self._case, weights=con & self._expected_doc, minlength=n) > 0
        n_ev = np.bincount(self._case, weights=ev, minlength=n)
        for i in np.flatnonzero(ev_hit & (n_ev > self._limit)):
            gated, _ = apply_gate(self._passages[i], t, self._limits[i])
            exp = set(self.results[i].case.expected_sources)
            ev_hit[i] = any(g.route is Route.EVIDENCE and g.doc_id in exp for g in gated)
        answered = status == STATUS_CODE["answer_from_evidence"]
        conflicted = status == STATUS_CODE["premise_conflict"]
        unsupported = self._has_sources & ((answered & ~ev_hit) | (conflicted & ~cf_hit))
        status_ok = status == self._expected
        correct = status_ok & ~unsupported & ~leak
        abstained = status == STATUS_CODE["insufficient_evidence"]
        truth = np.where(correct, 1, np.where(abstained, 0, -1))
        unsafe = int((truth < 0).sum())
        return {"cases": n, "accuracy": round(float(correct.mean()), 4), "status_accuracy": round(float(status_ok.mean()), 4),
                "truthfulness": round(float(truth.mean()), 4), "unsafe_answers": unsafe, "unsafe_rate": round(unsafe / n, 4),
                "abstentions": int(abstained.sum())}



def _echo(message: object = "", err: bool = False) -> None:
    """`click.echo` without control or invisible characters (a crafted record or label file could
    hold terminal escape sequences): shown as escapes (see `inert.terminal_text`)."""
    from ..inert import terminal_text

    click.echo(terminal_text(str(message)), err=err)

def summary(results: list[CaseResult]) -> dict[str, float]:
    """Accuracy (source-checked), status accuracy, truthfulness and unsafe answers: the numbers the
    tuner trades off."""
    n = len(results)
    if not n:
        return {"cases": 0, "accuracy": 0.0, "status_accuracy": 0.0, "truthfulness": 0.0, "unsafe_answers": 0,
                "unsafe_rate": 0.0, "abstentions": 0}
    truth = [r.truthfulness() for r in results]
    unsafe = sum(1 for x in truth if x < 0)
    return {
        "cases": n,
        "accuracy": round(sum(r.correct for r in results) / n, 4),
        "status_accuracy": round(sum(r.status_correct for r in results) / n, 4),
        "truthfulness": round(float(np.mean(truth)), 4),
        "unsafe_answers": unsafe,
        "unsafe_rate": round(unsafe / n, 4),
        "abstentions": sum(1 for r in results if r.status == "insufficient_evidence"),
    }


# -- search ---------------------------------------------------------------------------------------------

@dataclass
class TableRow:
    """One setting of the trade-off table: its figures on every case of the file (`fitted`) and
    on held-out cases (`held_out`: each case scored by thresholds fitted without it)."""

    label: str
    cap: float | None
    thresholds: GateThresholds
    fitted: dict[str, float]
    held_out: dict[str, float] | None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "max_unsafe": self.cap, "thresholds": self.thresholds.as_dict(),
                "all_cases": self.fitted, "held_out": self.held_out}


@dataclass
class TuneResult:
    thresholds: GateThresholds
    current: GateThresholds
    before: dict[str, float]
    after: dict[str, float]
    max_unsafe_rate: float
    cases: int
    warnings: list[str] = field(default_factory=list)
    cross_validated: dict[str, float] | None = None
    # The trade-off table (the current setting first), the setting suggested from it (None: keep
    # the current one), and why nothing is suggested.
    table: list[TableRow] = field(default_factory=list)
    suggested: GateThresholds | None = None
    refusal: str | None = None
    bounds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=lambda: [INJECTION_NOTE])

    @property
    def gain(self) -> dict[str, float]:
        return {k: round(self.after[k] - self.before[k], 4)
                for k in ("truthfulness", "accuracy", "status_accuracy", "unsafe_rate")}

    def env_lines(self) -> list[str]:
        """The suggested setting as lines to paste (the fitted one when nothing is suggested)."""
        t = self.suggested or self.thresholds
        return [f"{ENV_NAMES[f]}={getattr(t, f):.2f}" for f in THRESHOLD_FIELDS]

    def to_json(self) -> dict[str, Any]:
        return {"thresholds": self.thresholds.as_dict(), "env": self.thresholds.as_env(),
                "current": self.current.as_dict(), "before": self.before, "after": self.after, "gain": self.gain,
                "max_unsafe_rate": self.max_unsafe_rate, "cases": self.cases, "warnings": self.warnings,
                "cross_validated": self.cross_validated, "table": [r.to_json() for r in self.table],
                "suggested": self.suggested.as_env() if self.suggested else None, "refusal": self.refusal,
                "bounds": self.bounds, "notes": self.notes}


INJECTION_NOTE = ("GATE_INJECTION_MAX is never raised by tune (a labelled file could make a passage addressed to "
                  "an AI a source), and lowered only to exclude passages of forbidden sources, never to turn an "
                  "answer into an abstention; set it by hand to loosen it")


def injection_bounds(results: list[CaseResult], current: GateThresholds) -> dict[str, float]:
    """`injection_max` between the highest injection score of a passage the file does not forbid
    (lowering it further would exclude one) and the current value (raising it would loosen it)."""
    top = 0.0
    for r in results:
        forbidden = set(r.case.forbidden_sources) - set(r.case.expected_sources)
        for c in r.candidates:
            sc = c.get("scores")
            if sc and c.get("doc_id") not in forbidden:
                top = max(top, float(sc.get("contains_prompt_injection", 0.0)))
    return {"injection_max>=": min(current.injection_max, top), "injection_max<=": current.injection_max}


def _keep_injection_from_abstaining(rep: "Replayer", t: GateThresholds, current: GateThresholds) -> GateThresholds:
    """`t` with the current `injection_max` when its own turns an answered question into an abstention."""
    if t.injection_max >= current.injection_max:
        return t
    back = replace(t, injection_max=current.injection_max)
    ours, theirs = rep.replay(t), rep.replay(back)
    if any(a.status == "insufficient_evidence" and b.status != "insufficient_evidence" for a, b in zip(ours, theirs)):
        return back
    return t


def source_bounds(results: list[CaseResult], current: GateThresholds) -> dict[str, float]:
    """The loosest exclusion thresholds that keep every expected source of the file: for each case
    that expects sources, each expected document's best passage (most evidence for an answer, most
    contradiction for a conflict) must pass the injection, superseded and relevance rules. A
    current setting already stricter than that is left as it is (the bound never loosens it).
    Returns lower bounds for `injection_max`/`superseded_max` and an upper bound for `relevant_min`."""
    need_max = {f: 0.0 for f in _EXCLUDE_MAX}
    need_min = {f: 1.0 for f in _EXCLUDE_MIN}
    for r in results:
        if r.case.expected_status == "insufficient_evidence" or not r.case.expected_sources:
            continue
        key = "contradicts_query_premise" if r.case.expected_status == "premise_conflict" else "contains_answer_evidence"
        for doc in set(r.case.expected_sources):
            scored = [c["scores"] for c in r.candidates if c.get("doc_id") == doc and c.get("scores")]
            if not scored:
                continue
            best = max(scored, key=lambda sc: sc.get(key, 0.0))
            for f, q in _EXCLUDE_MAX.items():
                need_max[f] = max(need_max[f], float(best.get(q, 0.0)))
            for f, q in _EXCLUDE_MIN.items():
                need_min[f] = min(need_min[f], float(best.get(q, 1.0)))
    bounds = {f"{f}>=": min(getattr(current, f), v) for f, v in need_max.items()}
    bounds.update({f"{f}<=": max(getattr(current, f), v) for f, v in need_min.items()})
    inj = injection_bounds(results, current)
    bounds["injection_max>="] = max(bounds["injection_max>="], inj["injection_max>="])
    bounds["injection_max<="] = inj["injection_max<="]
    return bounds


class AnswerBound:
    """What a label file may switch off, bounded by what the library's answered questions show.

    The questions the current thresholds answer are the library's answers. A setting may turn at
    most as many of those the file labels otherwise (an abstention or a conflict) away from an
    answer as it keeps answering among those the file labels as answers: a file that calls most of the library's answers wrong
    (two answers kept, 23 relabelled as abstentions) cannot raise GATE_EVIDENCE_MIN over them. A
    file whose labels confirm the answers moves the thresholds as its questions show."""

    def __init__(self, rep: "Replayer", current: GateThresholds):
        self.rep = rep
        self.answered = rep.statuses(current) == STATUS_CODE["answer_from_evidence"]
        self.labelled_answer = rep._expected == STATUS_CODE["answer_from_evidence"]

    def switched(self, t: GateThresholds) -> tuple[int, int]:
        """(the library's answers labelled otherwise that `t` turns away from an answer, those labelled
        as answers that it keeps). An answer labelled as one may still be switched off: from the
        wrong document it is unsafe, and abstaining is the fix."""
        still = self.rep.statuses(t) == STATUS_CODE["answer_from_evidence"]
        off = self.answered & ~still & ~self.labelled_answer
        return int(off.sum()), int((self.answered & still & self.labelled_answer).sum())

    def allows(self, t: GateThresholds) -> bool:
        off, kept = self.switched(t)
        return off <= kept

    def dispute(self) -> tuple[int, int]:
        """(the library's answers the file labels otherwise, the library's answers it labels as answers)."""
        return int((self.answered & ~self.labelled_answer).sum()), int((self.answered & self.labelled_answer).sum())


def _allowed(f: str, v: float, bounds: dict[str, float]) -> bool:
    lo, hi = bounds.get(f"{f}>="), bounds.get(f"{f}<=")
    return (lo is None or v >= lo - 1e-12) and (hi is None or v <= hi + 1e-12)


def _clip(t: GateThresholds, bounds: dict[str, float]) -> GateThresholds:
    for f in THRESHOLD_FIELDS:
        v = getattr(t, f)
        lo, hi = bounds.get(f"{f}>="), bounds.get(f"{f}<=")
        if lo is not None and v < lo:
            v = lo
        if hi is not None and v > hi:
            v = hi
        t = replace(t, **{f: v})
    return t


def _objective(s: dict[str, float], t: GateThresholds, anchor: GateThresholds, cap: float) -> tuple:
    feasible = s["unsafe_rate"] <= cap + 1e-12
    dist = sum(abs(getattr(t, f) - getattr(anchor, f)) for f in THRESHOLD_FIELDS)
    return (feasible, s["truthfulness"] if feasible else -s["unsafe_rate"], s["accuracy"], -round(dist, 6))


def _plateau_middle(values: list[float], keys: list[tuple], best: tuple) -> float:
    """Among grid values reaching the best objective (ignoring the distance tie-break), the middle
    of the longest contiguous run: scores are piecewise constant, and the middle of a flat region
    moves least when the judge's scores shift a little on new questions."""
    hits = [k[:3] == best[:3] for k in keys]
    runs, start = [], None
    for i, h in enumerate(hits + [False]):
        if h and start is None:
            start = i
        elif not h and start is not None:
            runs.append((start, i - 1))
            start = None
    a, b = max(runs, key=lambda r: (r[1] - r[0], -r[0]))
    return values[(a + b) // 2]


def _coordinate_search(rep: Replayer, start: GateThresholds, anchor: GateThresholds, cap: float,
                       bounds: dict[str, float], rounds: int = 4,
                       answers: AnswerBound | None = None) -> GateThresholds:
    t = start
    best = _objective(rep.score(t), t, anchor, cap)
    for _ in range(rounds):
        moved = False
        for f in THRESHOLD_FIELDS:
            values = sorted(v for v in set(GRID) | {getattr(t, f)} if _allowed(f, v, bounds)
                            and (answers is None or v == getattr(t, f) or answers.allows(replace(t, **{f: v}))))
            cands = [replace(t, **{f: v}) for v in values]
            keys = [_objective(rep.score(c), c, anchor, cap) for c in cands]
            top = max(keys)
            if top[:3] > best[:3]:
                v = _plateau_middle(values, keys, top)
                t = replace(t, **{f: v})
                best = _objective(rep.score(t), t, anchor, cap)
                moved = True
        if not moved:
            break
    return t


def fit(results: list[CaseResult], current: GateThresholds, max_unsafe_rate: float = 0.0,
        limits: EvidenceLimits = EvidenceLimits()) -> GateThresholds:
    """Best thresholds found by coordinate search from the current and from the default setting,
    within the bounds that keep every expected source of `results` (`source_bounds`) and switch off
    no more of the library's answers than the file confirms (`AnswerBound`)."""
    rep = Replayer(results, limits)
    bounds = source_bounds(results, current)
    answers = AnswerBound(rep, current)
    starts = [s for s in (current, _clip(GateThresholds(), bounds)) if s == current or answers.allows(s)]
    found = {_coordinate_search(rep, start, current, max_unsafe_rate, bounds, answers=answers) for start in starts}
    best = max(sorted(found, key=lambda t: tuple(t.as_dict().values())),
               key=lambda t: _objective(rep.score(t), t, current, max_unsafe_rate))
    best = _keep_injection_from_abstaining(rep, _restore_unneeded(rep, best, current, max_unsafe_rate, answers),
                                           current)
    return best if answers.allows(best) else current


def _restore_unneeded(rep: Replayer, t: GateThresholds, current: GateThresholds, cap: float,
                      answers: AnswerBound | None = None) -> GateThresholds:
    """Put back the current value of every threshold whose move does not change the outcome: a
    search path can drift a threshold that the cases do not constrain, and an operator should only
    see the changes the data asks for."""
    goal = _objective(rep.score(t), t, current, cap)[:3]
    for f in THRESHOLD_FIELDS:
        back = replace(t, **{f: getattr(current, f)})
        if _objective(rep.score(back), back, current, cap)[:3] >= goal and (answers is None or answers.allows(back)):
            t = back
    return t


def cross_validate(results: list[CaseResult], current: GateThresholds, max_unsafe_rate: float,
                   limits: EvidenceLimits = EvidenceLimits(), folds: int = 5) -> dict[str, float] | None:
    """Held-out estimate: fit on k-1 folds (every k-th case held out), score the held-out fold."""
    if folds < 2 or len(results) < 2 * folds:
        return None
    held: list[CaseResult] = []
    for k in range(folds):
        train = [r for i, r in enumerate(results) if i % folds != k]
        test = [r for i, r in enumerate(results) if i % folds == k]
        held.extend(Replayer(test, limits).replay(fit(train, current, max_unsafe_rate, limits)))
    return {**summary(held), "folds": folds}


def _no_worse(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["accuracy"] >= b["accuracy"] - 1e-9 and a["unsafe_answers"] <= b["unsafe_answers"]


def _better(a: dict[str, float], b: dict[str, float]) -> bool:
    """`a` is a held-out improvement on `b`: no worse on accuracy and on unsafe answers, better on one."""
    return _no_worse(a, b) and (a["accuracy"] > b["accuracy"] + 1e-9 or a["unsafe_answers"] < b["unsafe_answers"])


def _choose(table: list[TableRow], n: int, folds: int,
            expects_answers: bool = True, dispute: tuple[int, int] = (0, 0)) -> tuple[TableRow | None, str | None]:
    """The row to suggest, or None and why not."""
    if n < MIN_CASES:
        return None, (f"only {n} cases: no setting is suggested below {MIN_CASES} (held-out figures on so few "
                      "questions cannot show that a change helps); add questions, aim for "
                      f"{SMALL_SET}+ covering the three outcomes")
    if folds < 2:
        return None, "no held-out check was run (--folds below 2): no setting is suggested without one"
    if not expects_answers:
        return None, ("no question of the file expects an answer: thresholds fitted to it would answer nothing; "
                      "a labelled file covers the three outcomes")
    disputed, confirmed = dispute
    if disputed > confirmed:
        return None, (f"the file labels {disputed} of the {disputed + confirmed} questions the current thresholds "
                      f"answer as abstentions or conflicts ({confirmed} as answers): a file that calls "
                      "most of the library's answers wrong is not followed; check its labels against the cited passages")
    current = table[0]
    if current.held_out is None:
        return None, f"too few cases for {folds} held-out folds: lower --folds or add questions"
    better = [r for r in table[1:] if r.held_out is not None and _better(r.held_out, current.held_out)
              and r.thresholds != current.thresholds]
    if not better:
        return None, ("no fitted setting does better than the current one on held-out questions (accuracy and "
                      "unsafe answers): keep the current thresholds")
    best = max(better, key=lambda r: (r.held_out["truthfulness"], r.held_out["accuracy"], -r.held_out["unsafe_answers"],
                                      -(r.cap if r.cap is not None else 1.0)))
    return best, None


def tune(results: list[CaseResult], current: GateThresholds, max_unsafe_rate: float = 0.0,
         limits: EvidenceLimits = EvidenceLimits(), cv_folds: int = 5) -> TuneResult:
    """Fit the thresholds to maximise truthfulness with at most `max_unsafe_rate` unsafe answers,
    build the trade-off table over several caps, and suggest a setting only where held-out figures
    support it (see the module's docstring)."""
    if not results:
        raise ValueError("no evaluation results to tune on: give a non-empty case file")
    if not 0.0 <= max_unsafe_rate <= 1.0:
        raise ValueError(f"max_unsafe_rate must be a share between 0 and 1, got {max_unsafe_rate}")
    rep = Replayer(results, limits)
    n = len(results)
    held_ok = cv_folds > 1 and n >= 2 * cv_folds
    before = rep.score(current)
    table = [TableRow("current", None, current, before, {**before, "folds": cv_folds} if held_ok else None)]
    fits: dict[float, GateThresholds] = {}
    for cap in sorted(set(TABLE_CAPS) | {max_unsafe_rate}):
        t = fit(results, current, cap, limits)
        fits[cap] = t
        cv = cross_validate(results, current, cap, limits, cv_folds) if held_ok else None
        label = "fitted, no unsafe cap" if cap >= 1.0 else f"fitted, unsafe cap {cap:.2f}"
        table.append(TableRow(label, cap, t, rep.score(t), cv))
    best = fits[max_unsafe_rate]
    after = rep.score(best)
    chosen, refusal = _choose(table, n, cv_folds,
                              any(r.case.expected_status == "answer_from_evidence" for r in results),
                              AnswerBound(rep, current).dispute())
    warnings = []
    if n < SMALL_SET:
        warnings.append(f"only {n} cases: thresholds fitted on so few questions overfit them; "
                        f"check the held-out figures and prefer a set of {SMALL_SET}+ cases")
    if after["unsafe_rate"] > max_unsafe_rate:
        warnings.append(f"no setting meets the unsafe cap {max_unsafe_rate}; the result minimises unsafe answers")
    if before["unsafe_rate"] > max_unsafe_rate and after["truthfulness"] < before["truthfulness"]:
        warnings.append("the current thresholds break the unsafe cap; the fitted ones trade truthfulness to meet it")
    answered = sum(1 for r in rep.replay(best) if r.status != "insufficient_evidence")
    if answered == 0 and any(r.case.expected_status != "insufficient_evidence" for r in results):
        warnings.append("the fitted thresholds abstain on every question: under this unsafe cap the judge's scores do "
                        "not separate answerable from unanswerable questions in this set (see the report's score "
                        "distributions); a looser --max-unsafe or a better judge is needed to answer anything")
    unscored = sum(1 for r in results if r.candidates and not any(c.get("scores") for c in r.candidates))
    if unscored:
        warnings.append(f"{unscored} of {n} cases have no judge scores (judge failed or degraded): thresholds cannot "
                        "change their outcome; fix the judge and run the evaluation again")
    kinds = {r.case.expected_status for r in results}
    if len(kinds) < 3:
        warnings.append(f"the cases only expect {', '.join(sorted(kinds))}: thresholds for the other outcomes are unconstrained")
    cv = next((r.held_out for r in table[1:] if r.cap == max_unsafe_rate), None)
    return TuneResult(thresholds=best, current=current, before=before, after=after,
                      max_unsafe_rate=max_unsafe_rate, cases=n, warnings=warnings, cross_validated=cv,
                      table=table, suggested=chosen.thresholds if chosen else None, refusal=refusal,
                      bounds=source_bounds(results, current))


# -- reading a previous `sourcegate eval --json` --------------------------------------------------------

def results_from_eval_json(data: dict[str, Any], cases: list[EvalCase]) -> list[CaseResult]:
    """Rebuild CaseResults from `eval --json` output. The case file supplies the expected status and
    expected sources the results are scored against (the forbidden sources too, where that output
    does not carry them); cases are matched by position and checked by query."""
    rows = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ValueError("the scores file is not `sourcegate eval --json` output: expected {\"cases\": [...]}")
    if len(rows) != len(cases):
        raise ValueError(f"the scores file has {len(rows)} cases but the case file has {len(cases)}: "
                         "run `sourcegate eval --json` on the same case file")
    out = []
    for n, (row, case) in enumerate(zip(rows, cases), start=1):
        if row.get("query") != case.query:
            raise ValueError(f"case {n}: the scores file asks {row.get('query')!r}, the case file {case.query!r}: "
                             "run `sourcegate eval --json` on the same case file")
        if "candidates" not in row:
            raise ValueError(f"case {n}: no 'candidates' with scores in the scores file: re-run `sourcegate eval --json`")
        if row.get("forbidden_sources") is not None:
            case = replace(case, forbidden_sources=list(row["forbidden_sources"]))
        out.append(CaseResult(
            case=case, status=row["status"], evidence_doc_ids=list(row.get("evidence_doc_ids") or []),
            conflict_doc_ids=list(row.get("conflict_doc_ids") or []), excluded=list(row.get("excluded") or []),
            candidates=list(row["candidates"]), timings_ms=dict(row.get("timings_ms") or {}),
            audit_id=row.get("audit_id"), degraded=bool(row.get("degraded")),
        ))
    return out


def format_tradeoff(res: TuneResult) -> str:
    """The trade-off table: each setting's accuracy, unsafe answers and abstentions, on every case
    and held out, and the thresholds it changes."""
    from ..tables import format_table

    rows = []
    for r in res.table:
        h = r.held_out
        changed = ", ".join(f"{ENV_NAMES[f].removeprefix('GATE_').lower()} {getattr(r.thresholds, f):.2f}"
                            for f in THRESHOLD_FIELDS if getattr(r.thresholds, f) != getattr(res.current, f))
        rows.append([r.label, f"{r.fitted['accuracy']:.3f}", str(r.fitted["unsafe_answers"]), str(r.fitted["abstentions"]),
                     f"{h['accuracy']:.3f}" if h else "-", str(h["unsafe_answers"]) if h else "-",
                     str(h["abstentions"]) if h else "-",
                     "-" if r.label == "current" else (changed or "no change")])
    folds = next((r.held_out.get("folds") for r in res.table if r.held_out), None)
    head = (f"{res.cases} cases; held-out: {folds}-fold cross-validation (each case scored by thresholds fitted "
            "without it)" if folds else f"{res.cases} cases; no held-out figures")
    return head + "\n" + format_table(["setting", "accuracy", "unsafe", "abstained", "held-out accuracy",
                                       "held-out unsafe", "held-out abstained", "thresholds changed"], rows)


def _fmt(s: dict[str, float]) -> str:
    return (f"truthfulness {s['truthfulness']:+.3f}, accuracy {s['accuracy']:.3f} (status {s['status_accuracy']:.3f}), "
            f"unsafe {s['unsafe_answers']}/{s['cases']}")


@click.command("tune")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--max-unsafe", "max_unsafe", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
              help="Highest share of unsafe answers (wrong status, no expected source cited, or a forbidden "
                   "source used) accepted.")
@click.option("--scores", "scores_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read judge scores from a previous `sourcegate eval FILE --json` instead of judging again.")
@click.option("--folds", default=5, show_default=True, type=int, help="Folds for the held-out estimate (0: skip).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the HTML report (plots, sweeps) of the run under the current thresholds.")
@click.pass_context
def tune_cmd(ctx: click.Context, file: Path, max_unsafe: float, scores_path: Path | None, folds: int, as_json: bool,
             report_path: Path | None) -> None:
    """Fit the gate thresholds to labelled questions for the best truthfulness under an unsafe cap.

    Prints a trade-off table first (accuracy, unsafe answers and abstentions of the current setting
    and of settings fitted under several unsafe caps, on every case and held out), then the
    warnings, then a setting to paste only when its held-out figures beat the current ones. No
    setting ever excludes an expected source of FILE as an injection, superseded or irrelevant;
    GATE_INJECTION_MAX is never raised, and lowered only to exclude forbidden sources, never to
    turn an answer into an abstention; no setting switches off more of the questions the current
    thresholds answer than it keeps among FILE's answers; nothing is suggested on fewer than 20
    cases, nor on a file that expects no answer or labels most of the library's answers otherwise.

    FILE is the question file of `sourcegate eval` (see `sourcegate eval --help`)."""
    root = ctx.find_root()
    settings = (root.obj or {}).get("settings") if isinstance(root.obj, dict) else None
    if settings is None:
        from ..settings import Settings

        settings = Settings()
    try:
        cases = load_cases(file)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if scores_path is not None:
        try:
            data = json.loads(scores_path.read_text(encoding="utf-8"))
            results = results_from_eval_json(data, cases)
        except (ValueError, KeyError, TypeError) as e:
            raise click.ClickException(f"{scores_path}: {e}") from None
    else:
        from ..cli import check_judge, eval_audit_settings
        from ..embed import get_embedder
        from ..library import open_library
        from ..service import SourceGate
        from .runner import run_eval

        check_judge(settings)
        embedder = get_embedder(settings.embedder)
        # the thresholds are fitted to the judge's own scores: an adaptation in force is left out
        gate = SourceGate(eval_audit_settings(settings), store=open_library(settings, embedder.id, embedder.dim),
                          embedder=embedder, adaptation=False)
        try:
            results = run_eval(gate, cases)
        finally:
            gate.close()
    limits = EvidenceLimits(settings.evidence_max_single, settings.evidence_max_multi)
    try:
        res = tune(results, settings.thresholds(), max_unsafe, limits, cv_folds=folds)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if report_path is not None:
        from .report import write_report
        from .runner import metrics

        write_report(results, metrics(results), report_path, thresholds=settings.thresholds(), limits=limits)
        _echo(f"report written to {report_path}", err=True)
    if as_json:
        _echo(json.dumps(res.to_json(), indent=2))
        return
    # The trade-off first, then the warnings, and only then anything to paste.
    _echo(format_tradeoff(res))
    _echo("")
    _echo(f"before: {_fmt(res.before)}")
    if res.suggested is not None and res.suggested == res.thresholds:
        _echo(f"after:  {_fmt(res.after)}  (fitted under --max-unsafe {res.max_unsafe_rate:.2f})")
    else:  # an `after:` would read as what the settings below give, and they are not these
        _echo(f"fitted: {_fmt(res.after)}  (under --max-unsafe {res.max_unsafe_rate:.2f}; not the setting "
              + ("suggested below)" if res.suggested is not None else "suggested: see below)"))
    _echo(f"gain:   truthfulness {res.gain['truthfulness']:+.3f}, accuracy {res.gain['accuracy']:+.3f} "
               f"(on the {res.cases} cases the thresholds were fitted to)")
    if res.cross_validated:
        cv = res.cross_validated
        _echo(f"held-out ({cv['folds']}-fold): {_fmt(cv)}")
    for w in res.warnings:
        _echo(f"warning: {w}", err=True)
    for note in res.notes:
        _echo(f"note: {note}")
    _echo("")
    if res.suggested is None:
        _echo(f"no change suggested: {res.refusal}")
        return
    row = next(r for r in res.table[1:] if r.thresholds == res.suggested)
    _echo(f"suggested ({row.label}; held-out accuracy {row.held_out['accuracy']:.3f} against "
               f"{res.table[0].held_out['accuracy']:.3f}, unsafe {row.held_out['unsafe_answers']} against "
               f"{res.table[0].held_out['unsafe_answers']}); to use it, set:")
    for line in res.env_lines():
        _echo(line)

"""A self-contained HTML evaluation report: metrics, per-case table and plots.

One file, no external resources: plots are PNGs from matplotlib's Agg backend, inlined as base64.
Sweeps and the reliability diagram are computed from the scores stored with each case; the
judge is never called here.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ..gate import GateThresholds
from ..models import QUESTION_TEXT, QUESTIONS
from .cases import STATUSES
from .labels import LABEL_DEFINITIONS, labelled_scores
from .runner import FAILURE_REASONS, FAILURE_TEXT, CaseResult
from .tune import (
    GRID,
    THRESHOLD_FIELDS,
    THRESHOLD_QUESTION,
    EvidenceLimits,
    Replayer,
    summary,
)

STAGES = ("retrieve", "retrieve_embed_query", "retrieve_search", "retrieve_rerank", "judge", "route", "answer", "total")
RELIABILITY_BINS = 10


# -- extra metrics (computed here so the runner stays as it is) ---------------------------------------

def _auroc(y: list[int], s: list[float]) -> float | None:
    if len(set(y)) < 2:
        return None
    from sklearn.metrics import roc_auc_score

    return round(float(roc_auc_score(y, s)), 3)


def reliability(scores: list[float], labels: list[int], bins: int = RELIABILITY_BINS) -> list[dict[str, float]]:
    """Per probability bin: mean predicted probability, observed positive rate, count."""
    s, y = np.asarray(scores, float), np.asarray(labels, float)
    idx = np.minimum((s * bins).astype(int), bins - 1)
    out = []
    for b in range(bins):
        m = idx == b
        if m.any():
            out.append({"bin": b, "predicted": float(s[m].mean()), "observed": float(y[m].mean()), "count": int(m.sum())})
    return out


def judge_quality(results: list[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per question: labelled positives/negatives, AUROC, Brier score, expected calibration error."""
    out = {}
    for q, (s, y) in labelled_scores(results).items():
        row: dict[str, Any] = {"positives": int(sum(y)), "negatives": int(len(y) - sum(y))}
        if y:
            sa, ya = np.asarray(s), np.asarray(y)
            row["auroc"] = _auroc(y, s)
            row["brier"] = round(float(np.mean((sa - ya) ** 2)), 4)
            rel = reliability(s, y)
            row["ece"] = round(sum(b["count"] * abs(b["predicted"] - b["observed"]) for b in rel) / len(y), 4)
        out[q] = row
    return out


def extra_metrics(results: list[CaseResult], metrics: dict[str, Any]) -> dict[str, Any]:
    """Metrics the report shows that `runner.metrics()` may not carry; existing keys are kept."""
    m = dict(metrics)
    n = len(results)
    s = summary(results)
    m.setdefault("accuracy", s["accuracy"] if n else None)
    m.setdefault("truthfulness", s["truthfulness"])
    m.setdefault("unsafe_answers", s["unsafe_answers"])
    m.setdefault("unsafe_rate", s["unsafe_rate"] if n else None)
    m.setdefault("judge_quality", judge_quality(results))
    return m


# -- plots -------------------------------------------------------------------------------------------------

def _plt():
    import matplotlib

    matplotlib.use("Agg")  # no display on servers; must precede pyplot
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    _plt().close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _img(b64: str, alt: str) -> str:
    return f'<img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def plot_distribution(question: str, scores: list[float], labels: list[int], threshold: float | None) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    bins = np.linspace(0, 1, 21)
    pos = [x for x, y in zip(scores, labels) if y]
    neg = [x for x, y in zip(scores, labels) if not y]
    # Each class normalised to its own size: negatives usually outnumber positives 10 to 1 or more.
    if pos:
        ax.hist(pos, bins=bins, weights=np.full(len(pos), 1 / len(pos)), alpha=0.6, color="tab:green",
                label=f"positive ({len(pos)})")
    if neg:
        ax.hist(neg, bins=bins, weights=np.full(len(neg), 1 / len(neg)), alpha=0.6, color="tab:red",
                label=f"negative ({len(neg)})")
    if threshold is not None:
        ax.axvline(threshold, color="black", ls="--", lw=1, label=f"threshold {threshold:.2f}")
    if not scores:
        ax.text(0.5, 0.5, "no labelled candidates", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlim(0, 1)
    ax.set_title(question, fontsize=10)
    ax.set_xlabel("judge probability")
    ax.set_ylabel("share of the class")
    ax.legend(fontsize=7)
    return _png(fig)


def sweep(rep: Replayer, t: GateThresholds, field: str, grid: tuple[float, ...] = GRID) -> dict[str, list[float]]:
    """Accuracy (source-checked and status only), truthfulness and unsafe rate as one threshold
    varies, the others fixed."""
    from dataclasses import replace

    xs = sorted(set(grid) | {0.0, 1.0, getattr(t, field)})
    rows = [rep.score(replace(t, **{field: x})) for x in xs]
    return {"x": xs, "accuracy": [r["accuracy"] for r in rows], "status_accuracy": [r["status_accuracy"] for r in rows],
            "truthfulness": [r["truthfulness"] for r in rows], "unsafe_rate": [r["unsafe_rate"] for r in rows]}


def plot_sweep(field: str, sw: dict[str, list[float]], current: float) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.6, 3.0))
    ax.plot(sw["x"], sw["accuracy"], label="accuracy (source-checked)", color="tab:blue")
    ax.plot(sw["x"], sw["status_accuracy"], label="status accuracy", color="tab:blue", ls="--", alpha=0.5)
    ax.plot(sw["x"], sw["truthfulness"], label="truthfulness", color="tab:green")
    ax.plot(sw["x"], sw["unsafe_rate"], label="unsafe rate", color="tab:red", ls=":")
    ax.axvline(current, color="black", ls="--", lw=1, label=f"current {current:.2f}")
    ax.set_xlim(0, 1)
    ax.set_ylim(-1.05, 1.05)
    ax.set_title(f"sweep of {field}", fontsize=10)
    ax.set_xlabel(f"{field} ({THRESHOLD_QUESTION[field]})")
    ax.legend(fontsize=7)
    return _png(fig)


def plot_reliability(labelled: dict[str, tuple[list[float], list[int]]]) -> str:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.0, 4.0))
    ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=1, label="perfect calibration")
    drawn = 0
    for q, (s, y) in labelled.items():
        if len(y) < 2:
            continue
        rel = reliability(s, y)
        ax.plot([b["predicted"] for b in rel], [b["observed"] for b in rel], marker="o", label=f"{q} (n={len(y)})")
        drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no labelled candidates", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("predicted probability (bin mean)")
    ax.set_ylabel("observed frequency of positives")
    ax.set_title("judge reliability", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


# -- HTML ----------------------------------------------------------------------------------------------------

def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.3f}"
    return _e(x)


def _table(headers: list[str], rows: list[list[str]], cls: str = "", tid: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    attrs = (f' id="{tid}"' if tid else "") + (f' class="{cls}"' if cls else "")
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _metrics_section(m: dict[str, Any]) -> str:
    ss, sm = m.get("sources_single") or {}, m.get("sources_multi") or {}
    fails = m.get("failures") or {}
    rows = [
        ["cases", _num(m.get("cases"))],
        ["accuracy (expected status, citing an expected source, no forbidden source)",
         f'<span id="accuracy">{_num(m.get("accuracy"))}</span>'],
        ["status accuracy (status only)", f'<span id="status-accuracy">{_num(m.get("status_accuracy"))}</span>'],
        *[[f"cases failed: {FAILURE_TEXT[k]}", f'<span id="failures-{k}">{_num(fails.get(k))}</span>']
          for k in FAILURE_REASONS if k in fails],
        ["truthfulness (CRAG: +1 right, 0 abstained, −1 wrong or leaking)", _num(m.get("truthfulness"))],
        ["unsafe answers (truthfulness −1)", f'{_num(m.get("unsafe_answers"))} (rate {_num(m.get("unsafe_rate"))})'],
        ["forbidden-source leaks", _num(m.get("forbidden_leaks"))],
        ["abstention precision", _num(m.get("abstention_precision"))],
        ["abstention recall", _num(m.get("abstention_recall"))],
        [f"single-source hit@1 ({_num(ss.get('cases'))} cases)", _num(ss.get("hit_at_1"))],
        ["single-source recall", _num(ss.get("recall"))],
        [f"multi-source hit@1 ({_num(sm.get('cases'))} cases)", _num(sm.get("hit_at_1"))],
        ["multi-source recall", _num(sm.get("recall"))],
        ["degraded (judge unavailable)", _num(m.get("degraded"))],
    ]
    out = ["<h2>Metrics</h2>", _table(["metric", "value"], rows, tid="metrics")]
    conf = m.get("confusion") or {}
    crow = []
    for e in STATUSES:
        cells = [f"<b>{_e(e)}</b>"]
        for p in STATUSES:
            cells.append(f'<span class="cm" data-expected="{e}" data-got="{p}">{_e((conf.get(e) or {}).get(p, 0))}</span>')
        crow.append(cells)
    out += ["<h3>Confusion matrix (rows: expected, columns: got)</h3>",
            _table(["expected \\ got", *STATUSES], crow, tid="confusion")]
    lat = m.get("latency_ms") or {}
    lrows = [[_e(s), _num(lat[s].get("p50")), _num(lat[s].get("p95"))] for s in STAGES if s in lat]
    lrows += [[_e(s), _num(v.get("p50")), _num(v.get("p95"))] for s, v in lat.items() if s not in STAGES]
    out += ["<h3>Latency per stage (ms)</h3>", _table(["stage", "p50", "p95"], lrows, tid="latency")]
    kinds = m.get("by_kind") or {}
    if kinds:
        out += ["<h3>By kind</h3>", _table(["kind", "cases", "correct", "accuracy", "status accuracy"],
                                           [[_e(k), _num(v["cases"]), _num(v["correct"]), _num(v["accuracy"]),
                                             _num(v.get("status_accuracy"))]
                                            for k, v in sorted(kinds.items())])]
    jq = m.get("judge_quality") or {}
    if jq:
        out += ["<h3>Judge quality on labelled candidates</h3>",
                _table(["question", "positives", "negatives", "AUROC", "Brier", "ECE"],
                       [[_e(q), _num(v.get("positives")), _num(v.get("negatives")), _num(v.get("auroc")),
                         _num(v.get("brier")), _num(v.get("ece"))] for q, v in jq.items()], tid="judge-quality")]
    return "\n".join(out)


def _cases_section(results: list[CaseResult]) -> str:
    rows = []
    for r in results:
        reasons: dict[str, int] = {}
        for x in r.excluded:
            reasons[x["reason"]] = reasons.get(x["reason"], 0) + 1
        rows.append([
            _e(r.case.query), _e(r.case.kind), _e(r.case.expected_status), _e(r.status),
            '<span class="ok">ok</span>' if r.correct else '<span class="miss">MISS</span>',
            _e(", ".join(FAILURE_TEXT[k] for k in r.failure_reasons) or "–"),
            _e(", ".join(r.case.expected_sources) or "–"),
            _e(", ".join(r.evidence_doc_ids) or "–"), _e(", ".join(r.conflict_doc_ids) or "–"),
            _e(", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "–"),
            _e(", ".join(r.leaks) or "–"), _num(r.truthfulness()), _num(r.timings_ms.get("total")),
        ])
    return "<h2>Cases</h2>" + _table(
        ["query", "kind", "expected", "got", "", "why", "expected sources", "evidence docs", "conflict docs", "excluded",
         "leaks", "truth", "ms"],
        rows, cls="cases", tid="cases")


CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;vertical-align:top}
th{background:#f3f3f3}.ok{color:#080}.miss{color:#b00;font-weight:bold}.plots{display:flex;flex-wrap:wrap;gap:8px}
.plot{border:1px solid #eee}dt{font-weight:bold;margin-top:.5em}.cases td:first-child{max-width:380px}"""


def render_report(results: list[CaseResult], metrics: dict[str, Any], thresholds: GateThresholds,
                  limits: EvidenceLimits = EvidenceLimits()) -> str:
    m = extra_metrics(results, metrics)
    labelled = labelled_scores(results)
    rep = Replayer(results, limits)
    dist = [_img(plot_distribution(q, *labelled[q], _threshold_for(q, thresholds)), f"score distribution {q}")
            for q in QUESTIONS]
    sweeps = [_img(plot_sweep(f, sweep(rep, thresholds, f), getattr(thresholds, f)), f"sweep {f}")
              for f in THRESHOLD_FIELDS]
    relia = _img(plot_reliability(labelled), "reliability diagram")
    trows = [[_e(f), _num(getattr(thresholds, f)), _e(THRESHOLD_QUESTION[f])] for f in THRESHOLD_FIELDS]
    defs = "".join(f"<dt>{_e(q)}</dt><dd>{_e(QUESTION_TEXT[q])}<br><i>label:</i> {_e(LABEL_DEFINITIONS[q])}</dd>"
                   for q in QUESTIONS)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    parts = [
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>sourcegate evaluation</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>sourcegate evaluation</h1><p>{len(results)} cases, generated {when}.</p>",
        "<h2>Thresholds</h2>", _table(["threshold", "value", "applied to"], trows, tid="thresholds"),
        _metrics_section(m),
        "<h2>Score distributions</h2><p>Judge probabilities of labelled candidates; dashed line: the threshold "
        "applied to that question.</p>",
        f'<div class="plots">{"".join(dist)}</div>',
        "<h2>Threshold sweeps</h2><p>Each threshold varied alone, the others at their current value, re-routing "
        "the stored scores with the gate (no judge calls). Accuracy counts a case right when the status is the "
        "expected one, an answer (or conflict) cites at least one expected source and no forbidden source is used; "
        "unsafe: a wrong status, an answer or conflict citing none of the expected sources, or a forbidden source "
        "used.</p>",
        f'<div class="plots">{"".join(sweeps)}</div>',
        "<h2>Reliability</h2><p>Candidates binned by predicted probability (10 bins); observed share of positives "
        "per bin. Points below the diagonal: the judge is over-confident there.</p>",
        f'<div class="plots">{relia}</div>',
        "<h2>Label definitions</h2><p>Labels come from the cases only (expected and forbidden sources, expected "
        "status, kind); candidates the cases do not settle are left out.</p>", f"<dl>{defs}</dl>",
        _cases_section(results),
        "</body></html>",
    ]
    return "\n".join(parts)


def _threshold_for(question: str, t: GateThresholds) -> float | None:
    for f, q in THRESHOLD_QUESTION.items():
        if q == question:
            return float(getattr(t, f))
    return None


def write_report(results: list[CaseResult], metrics: dict[str, Any], path: str | Path,
                 thresholds: GateThresholds | None = None, limits: EvidenceLimits | None = None) -> Path:
    """Write the HTML report to `path` (parent folders are created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = render_report(results, metrics, thresholds or GateThresholds(), limits or EvidenceLimits())
    path.write_text(doc, encoding="utf-8")
    return path

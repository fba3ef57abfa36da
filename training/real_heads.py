"""The local judge's reader heads fitted on people's questions over real documents
(`../shared/data/real/train`: 1,398 questions, seven sources), with a leave-one-source-out figure.

Pairs: each question against its expected passages, its hard negatives (`relevant_sources`: on the
subject, not answering), its twins and archived revisions with another value (`forbidden_sources`), and
the passages of its source's library nearest to it by embedding (what retrieval hands the judge).
Labels, from the question's labels only:
- evidence (`contains_answer_evidence`): 1 for an expected or agreeing archived passage of an answerable
  question, 0 for every other passage of any question (a false premise's contradicting passage is left
  out: it must be routed as a conflict, not scored as evidence);
- contradiction (`contradicts_query_premise`): 1 for the expected passages of a false-premise question
  (and of a superseded question that expects a conflict), 0 for every other pair.

Features: what the judge computes for the pair before its reader heads (the interpretable heads'
probabilities, the question's type, whether the languages differ) and the reader's readings (answerable,
span margin and form, yes / no / open, NLI), `sourcegate.judges.local.reader_stage.stack_features`.

Heads: logistic regressions on standardised inputs (`--hidden N` adds a hidden layer; measured, not
better), continuing from the earlier heads (their logit is an input), with no isotonic steps and no
plateaus. `--positive-weight W` weighs the evidence heads' positive pairs: at 1 the output is calibrated
to the candidate population (expected calibration error 0.008) and the gate at 0.55 answers little; more
trades safety for answers. Measured and not shipped: see `training/reader/README.md`.

    python -m training.real_heads --collect              # pairs and features -> .cache/real_heads/pairs.jsonl (~30 min on 2 busy cores)
    python -m training.real_heads --nearest              # only which passages each question is read against (~75 s)
    python -m training.real_heads --loso DIR             # per source S: heads fitted without S -> DIR/S/ (a weights folder)
    python -m training.real_heads --ship                 # heads fitted on all seven sources -> src/sourcegate/judges/weights/
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.bench_real_train import PARTS, library  # noqa: E402
from sourcegate.judges.local import LocalJudge  # noqa: E402
from training.weights_folder import SHIPPED, linked_weights  # noqa: E402

CACHE = ROOT / ".cache" / "real_heads"
PAIRS = CACHE / "pairs.jsonl"
NEAREST_FILE = CACHE / "nearest.json"  # question id -> the passages it is read against (`--nearest`)
WEIGHTS = SHIPPED
NEAREST = 8
ANSWERABLE = {"factual", "twin", "yes_no_yes", "yes_no_no", "superseded", "fr_en", "en_fr", "two_part"}


def _load(p: Path) -> list[dict]:
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".json":
        return json.loads(text)
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def candidates_for(q: dict, ids: list[str], vecs: np.ndarray, v: np.ndarray) -> list[str]:
    """The passages a question is read against: its labelled passages (expected, hard negatives, twins and
    other revisions, archived), then the `NEAREST` of its library by embedding (`ids` with their `vecs`)."""
    near = [ids[j] for j in np.argsort(-(vecs @ v))[:NEAREST]]
    cand = list(dict.fromkeys(list(q.get("expected_sources") or []) + list(q.get("relevant_sources") or [])
                              + list(q.get("forbidden_sources") or []) + list(q.get("archived_sources") or []) + near))
    known = set(ids)
    return [c for c in cand if c in known]


def _library_vectors(emb, part: str) -> tuple[dict, list[str], np.ndarray, list[dict], np.ndarray]:
    lib = library(part)
    corpus = {r["id"]: r for r in _load(lib / "corpus.json")}
    ids = list(corpus)
    vecs = np.asarray(emb.embed([f"{corpus[i].get('title') or ''}\n{corpus[i]['text']}" for i in ids]), dtype=np.float32)
    questions = _load(lib / "questions.jsonl")
    qv = np.asarray(emb.embed([q["query"] for q in questions]), dtype=np.float32)
    return corpus, ids, vecs, questions, qv


def collect_nearest() -> None:
    """Only which passages each question is read against (`NEAREST_FILE`; a few minutes): what
    `training.reader.people` needs to build its examples, without the judge's readings of `collect`."""
    from sourcegate.embed import get_embedder

    emb = get_embedder()
    CACHE.mkdir(parents=True, exist_ok=True)
    out: dict[str, list[str]] = {}
    for part in PARTS:
        _, ids, vecs, questions, qv = _library_vectors(emb, part)
        for q, v in zip(questions, qv):
            out[q["id"]] = candidates_for(q, ids, vecs, v)
        print(f"{part}: {len(questions)} questions", flush=True)
    tmp = NEAREST_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(NEAREST_FILE)


def collect() -> None:
    from sourcegate.embed import get_embedder
    from sourcegate.judges import JudgeInput
    from sourcegate.judges.local import passage_features

    emb = get_embedder()
    judge = CapturingJudge(embedder=emb)
    CACHE.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with open(PAIRS, "w", encoding="utf-8") as out:
        for part in PARTS:
            corpus, ids, vecs, questions, qv = _library_vectors(emb, part)
            feats = {i: passage_features(corpus[i]["text"], corpus[i].get("title") or "", embedder=emb, vector=v)
                     for i, v in zip(ids, vecs)}
            for q, v in zip(questions, qv):
                cand = candidates_for(q, ids, vecs, v)
                inputs = [JudgeInput(id=c, text=corpus[c]["text"], title=corpus[c].get("title") or "",
                                     status=corpus[c].get("status"), version=corpus[c].get("version"),
                                     passage_features=feats[c], embedding=vecs[ids.index(c)]) for c in cand]
                judgement, base = judge.judge_detailed(q["query"], inputs)
                for k, c in enumerate(cand):
                    b = base.get(k)
                    r = judge.last_readings.get(k)
                    res = judgement.results[k]
                    if b is None or res.scores is None:
                        continue
                    out.write(json.dumps({
                        "part": part, "qid": q["id"], "kind": q["kind"], "query": q["query"], "passage": c,
                        "lang": q.get("lang"), "evidence": evidence_label(q, c), "contradiction": contradiction_label(q, c),
                        "base": {k2: v2 for k2, v2 in b.items() if isinstance(v2, (int, float, bool, str)) or v2 is None},
                        "reading": None if r is None else {f: getattr(r, f) for f in (
                            "p_answer", "span_margin", "p_contradiction", "p_entailment", "p_yes", "p_no", "p_open")}
                                                       | {"span_context": r.span_context or r.span},
                        "shipped": {"evi": res.scores.contains_answer_evidence, "con": res.scores.contradicts_query_premise,
                                    "rel": res.scores.is_relevant},
                    }, ensure_ascii=False) + "\n")
            print(f"{part}: {len(questions)} questions ({time.time() - t0:.0f} s)", flush=True)


def evidence_label(q: dict, pid: str) -> int | None:
    exp = set(q.get("expected_sources") or []) | set(q.get("archived_sources") or [])
    if q["kind"] in ANSWERABLE and q["expected_status"] == "answer_from_evidence":
        return int(pid in exp)
    if pid in exp:
        return None  # a passage that contradicts a premise: a conflict, not evidence either way
    return 0


def contradiction_label(q: dict, pid: str) -> int:
    return int(q["expected_status"] == "premise_conflict" and pid in set(q.get("expected_sources") or []))


class CapturingJudge(LocalJudge):
    """The local judge, keeping the reader's readings of the last question (for fitting its heads)."""

    last_readings: dict = {}

    def _reader_stage(self, query, q, passages, base, infos):
        readings = super()._reader_stage(query, q, passages, base, infos)
        self.last_readings = readings
        return readings


EVI_NAMES = ("lo_evi", "lo_rel", "lo_ans", "margin", "margin_pos", "span_ok", "lo_settle", "xling", "capped",
             "q_freq", "q_quant", "q_when", "q_who", "q_where", "q_define", "q_directive", "q_why", "q_how", "q_what",
             "lo_v1")
POLAR_NAMES = ("lo_evi", "lo_rel", "lo_ans", "margin", "lo_settle", "lo_yes", "lo_no", "lo_open", "capped", "lo_v1")
# Measured and left out: each passage's standing among those read for its question (its answerable logit
# minus the best other's, ...) lifts the pair AUROC (0.775 -> 0.812 leave one source out) but makes the best
# of unrelated passages evidence, so more questions with no answer in the library are answered.
CON_NAMES = ("lo_con", "lo_rel", "lo_nli_con", "lo_nli_ent", "has_premise", "lo_ans", "margin", "xling", "polar")


PRIOR = ROOT / "training" / "data" / "reader_heads_v1.json"


def prior_heads() -> dict:
    """The reader heads these continue from (fitted by `training/reader/stack.py` on SQuAD, CondaQA and
    hand-written procedures), kept in `PRIOR` and shipped inside `reader_heads.json` as `prior_heads`."""
    return json.loads(PRIOR.read_text())["heads"]


def load_pairs() -> list[dict]:
    """The collected pairs that the reader read, with their stacking features."""
    from sourcegate import text as T
    from sourcegate.judges.local.reader import Reading
    from sourcegate.judges.local.model import Head
    from sourcegate.judges.local.reader_stage import _logit, stack_features

    priors = {k: Head(v) for k, v in prior_heads().items()}

    out = []
    for line in PAIRS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if not r["reading"]:
            continue
        rd = dict(r["reading"])
        ctx = rd.pop("span_context", "")
        reading = Reading(span=ctx, span_context=ctx, **rd)
        base = dict(r["base"])
        base["polar"] = T.is_polar(r["query"])
        base.setdefault("caps", [])
        r["f"] = stack_features(base, reading)
        r["polar"] = bool(base["polar"]) and not base.get("xling")
        prior = priors["evi_polar" if r["polar"] else "evi_rd"]
        r["f"]["lo_v1"] = _logit(float(prior.predict(np.asarray([[r["f"].get(n, 0.0) for n in prior.names]]))[0]))
        out.append(r)
    return out


def _matrix(rows: list[dict], names) -> np.ndarray:
    return np.asarray([[r["f"].get(n, 0.0) for n in names] for r in rows], dtype=np.float64)


def fit_head(rows: list[dict], names, label: str, hidden: int = 0, positive_weight: float = 1.0) -> dict:
    """A head in `local_judge.json`'s format: standardise, (one ReLU layer), logistic output."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    X = _matrix(rows, names)
    y = np.asarray([r[label] for r in rows], dtype=int)
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale < 1e-6] = 1.0
    Z = (X - mean) / scale
    d = {"names": list(names), "mean": mean.tolist(), "scale": scale.tolist()}
    if hidden:
        m = MLPClassifier(hidden_layer_sizes=(hidden,), alpha=1e-2, max_iter=600, random_state=0).fit(Z, y)
        d.update(hidden_w=m.coefs_[0].tolist(), hidden_b=m.intercepts_[0].tolist(), coef=m.coefs_[1].ravel().tolist(),
                 intercept=float(m.intercepts_[1][0]))
    else:
        m = LogisticRegression(C=1.0, max_iter=2000, class_weight={0: 1.0, 1: positive_weight}).fit(Z, y)
        d.update(coef=m.coef_.ravel().tolist(), intercept=float(m.intercept_[0]))
    d["fit_rows"] = int(len(y))
    d["fit_positive"] = int(y.sum())
    return d


def predict(head: dict, rows: list[dict]) -> np.ndarray:
    from sourcegate.judges.local.model import Head

    h = Head(head)
    return h.predict(_matrix(rows, head["names"])) if rows else np.zeros(0)


HEAD_SPECS = {
    # name: (label, row filter, feature names)
    "evi_rd": ("evidence", lambda r: r["evidence"] is not None and not r["polar"], EVI_NAMES),
    "evi_polar": ("evidence", lambda r: r["evidence"] is not None and r["polar"], POLAR_NAMES),
    "con_rd": ("contradiction", lambda r: True, CON_NAMES),
}


def fit_all(rows: list[dict], hidden: int, positive_weight: float = 1.0) -> dict:
    """The three heads; `positive_weight` weighs the evidence heads' positive pairs (the contradiction
    head stays calibrated to the pairs as they come)."""
    return {name: fit_head([r for r in rows if keep(r)], names, label, hidden,
                           positive_weight if label == "evidence" else 1.0)
            for name, (label, keep, names) in HEAD_SPECS.items()}


def scores(heads: dict, rows: list[dict]) -> dict[str, np.ndarray]:
    """Each head's probability for the rows it applies to (NaN elsewhere), and the evidence as the judge
    combines them (the yes/no head for yes/no questions)."""
    out = {}
    for name, (label, keep, _) in HEAD_SPECS.items():
        m = np.asarray([keep(r) for r in rows])
        p = np.full(len(rows), np.nan)
        if m.any():
            p[m] = predict(heads[name], [r for r, k in zip(rows, m) if k])
        out[name] = p
    return out


def auroc(y, p) -> float | None:
    from sklearn.metrics import roc_auc_score

    y, p = np.asarray(y), np.asarray(p)
    m = ~np.isnan(p)
    y, p = y[m], p[m]
    return round(float(roc_auc_score(y, p)), 4) if len(set(y.tolist())) == 2 else None


def ece(y, p, bins: int = 10) -> float:
    y, p = np.asarray(y, dtype=float), np.asarray(p, dtype=float)
    idx = np.minimum((p * bins).astype(int), bins - 1)
    return round(float(sum(abs(y[idx == b].mean() - p[idx == b].mean()) * (idx == b).mean() for b in range(bins) if (idx == b).any())), 4)


Q_NAMES = ("q_freq", "q_quant", "q_when", "q_who", "q_where", "q_define", "q_directive", "q_why", "q_how", "q_what",
           "q_yesno", "polar", "xling")


def question_only(rows: list[dict], part: str, test: list[dict]) -> np.ndarray:
    """The evidence probability from what the question alone says (its type, yes/no, language against the
    passage's, length), fitted without `part`: the baseline any answerability figure stands beside."""
    from sklearn.linear_model import LogisticRegression

    def X(rs):
        return np.hstack([_matrix(rs, Q_NAMES), np.asarray([[len(r["query"].split())] for r in rs], dtype=float)])

    fit = [r for r in rows if r["part"] != part and r["evidence"] is not None]
    m = LogisticRegression(max_iter=2000, class_weight="balanced").fit(X(fit), [r["evidence"] for r in fit])
    return m.predict_proba(X(test))[:, 1]


def report(rows: list[dict], heads_for) -> dict:
    """Leave-one-source-out AUROC of evidence and contradiction, beside the shipped judge's scores of the
    same pairs and a question-only baseline (`question_only`)."""
    ev_y, ev_new, ev_old, ev_q = [], [], [], []
    con_y, con_new, con_old = [], [], []
    per = {}
    for part in PARTS:
        test = [r for r in rows if r["part"] == part]
        s = scores(heads_for(part), test)
        evi = np.where(np.isnan(s["evi_polar"]), s["evi_rd"], s["evi_polar"])
        m = np.asarray([r["evidence"] is not None for r in test])
        y = np.asarray([r["evidence"] if r["evidence"] is not None else 0 for r in test])
        old = np.asarray([r["shipped"]["evi"] for r in test])
        qb = question_only(rows, part, test)
        cy = np.asarray([r["contradiction"] for r in test])
        per[part] = {"evidence_auroc": auroc(y[m], evi[m]), "evidence_auroc_shipped": auroc(y[m], old[m]),
                     "contradiction_auroc": auroc(cy, s["con_rd"]),
                     "contradiction_auroc_shipped": auroc(cy, [r["shipped"]["con"] for r in test])}
        ev_y += y[m].tolist(); ev_new += evi[m].tolist(); ev_old += old[m].tolist(); ev_q += qb[m].tolist()
        con_y += cy.tolist(); con_new += s["con_rd"].tolist(); con_old += [r["shipped"]["con"] for r in test]
    ev_new, ev_y = np.asarray(ev_new), np.asarray(ev_y)
    return {"pairs_read": len(rows), "evidence_auroc": auroc(ev_y, ev_new), "evidence_auroc_shipped": auroc(ev_y, ev_old),
            "evidence_question_only_auroc": auroc(ev_y, ev_q),
            "evidence_ece": ece(ev_y, ev_new), "evidence_ece_shipped": ece(ev_y, ev_old),
            "negatives_above_0.55": round(float(np.mean(ev_new[ev_y == 0] > 0.55)), 3),
            "negatives_above_0.55_shipped": round(float(np.mean(np.asarray(ev_old)[ev_y == 0] > 0.55)), 3),
            "positives_above_0.55": round(float(np.mean(ev_new[ev_y == 1] > 0.55)), 3),
            "positives_above_0.55_shipped": round(float(np.mean(np.asarray(ev_old)[ev_y == 1] > 0.55)), 3),
            "contradiction_auroc": auroc(con_y, con_new), "contradiction_auroc_shipped": auroc(con_y, con_old),
            "by_source": per}


def write_weights(heads: dict, out: Path, meta: dict) -> None:
    """A weights folder: the shipped files, with these reader heads."""
    linked_weights(out, own=("reader_heads.json",))
    old = json.loads((WEIGHTS / "reader_heads.json").read_text())
    doc = {**{k: v for k, v in old.items() if k not in ("heads", "prior_heads")}, **meta, "heads": heads,
           "prior_heads": prior_heads()}
    (out / "reader_heads.json").write_text(json.dumps(doc, indent=1) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--collect", action="store_true")
    ap.add_argument("--nearest", action="store_true", help="only the passages each question is read against (for "
                                                             "training.reader.people), without the judge's readings")
    ap.add_argument("--loso", type=Path, metavar="DIR")
    ap.add_argument("--ship", action="store_true")
    ap.add_argument("--hidden", type=int, default=0, help="units of the heads' hidden layer (0: logistic regression)")
    ap.add_argument("--positive-weight", type=float, default=2.0,
                    help="weight of the evidence heads' positive pairs: the gate's operating point (measured, see the "
                         "README of training/)")
    a = ap.parse_args(argv)
    if a.nearest:
        collect_nearest()
    if a.collect:
        collect()
    if a.loso or a.ship:
        rows = load_pairs()
        folds = {p: fit_all([r for r in rows if r["part"] != p], a.hidden, a.positive_weight) for p in PARTS}
        rep = report(rows, lambda p: folds[p])
        print(json.dumps(rep, indent=1))
        meta = {"what": "reader heads fitted on people's questions over real documents (training/real_heads.py): "
                        "logistic regressions, balanced classes, no isotonic steps; the focus and frequency caps are an "
                        "input (`capped`), not applied on top",
                "recipe": f"python -m training.real_heads --collect; --ship --hidden {a.hidden} "
                          f"--positive-weight {a.positive_weight}",
                "caps_read": True,
                # the contradiction head applies by default when it separates the real pairs better than the
                # interpretable head does, leave one source out
                "contradiction_by_default": bool((rep["contradiction_auroc"] or 0) > (rep["contradiction_auroc_shipped"] or 0)),
                "leave_one_source_out": rep}
        if a.loso:
            for p, heads in folds.items():
                write_weights(heads, a.loso / p, {**meta, "held_out_source": p})
        if a.ship:
            heads = fit_all(rows, a.hidden, a.positive_weight)
            old = json.loads((WEIGHTS / "reader_heads.json").read_text())
            doc = {**{k: v for k, v in old.items() if k not in ("heads", "prior_heads")}, **meta, "heads": heads,
                   "prior_heads": prior_heads()}
            (WEIGHTS / "reader_heads.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

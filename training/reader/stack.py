"""Fit the reader's heads in the local judge (`reader_heads.json`) on SQuAD 2.0 dev articles that the
reader never trained on (`data.is_stack_article`).

    python -m training.reader.stack [--weights src/sourcegate/judges/weights] [--data ../shared/data]

Rows: a seeded sample of 800 held-out questions, each against its own paragraph (answerable, or human-written unanswerable),
against its paragraph with the answer sentences removed, and against another paragraph of the same
article. Every row is judged by the interpretable judge (no reader) and read by the reader, the
questions' passages in one call as in the judge. Plus the hand-written procedure chunks of
`training/data/evidence_procedures_dev.jsonl` (development data: each question against a chunk that
answers it, a chunk of the same subject that does not, and one of another procedure), weighted as much
as the SQuAD rows together. Articles and groups are split in two by hash: the logistic regression is
fitted on one half and its isotonic calibration on the other. The reported figures of the
shipped judge come from other data (`python -m training.reader.evaluate`, `scripts/eval_local_judge.py`).
`--platt` calibrates with a logistic map instead of isotonic steps (smooth; measured a little below the
isotonic heads on held-out people's questions, `bench/README.md`). `--people` adds people's questions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import zlib
from pathlib import Path

import numpy as np

from .data import (DEFAULT_CACHE, DEFAULT_DATA, REPO, SEED, answer_removed, is_condaqa_eval, is_stack_article,
                   read_jsonl_lines)

PROCEDURES_DEV = REPO / "training" / "data" / "evidence_procedures_dev.jsonl"
POLAR_DEV = REPO / "training" / "data" / "polar_procedures_dev.jsonl"
PREMISE_DEV = REPO / "training" / "data" / "false_premise_dev.jsonl"


def is_condaqa_stack(passage_id: str) -> bool:
    """Of CondaQA's held-out passages, the half the yes/no head is fitted on (the other half is reported)."""
    return zlib.crc32(("condaqa-half:" + str(passage_id)).encode()) % 2 == 0
EVI_NAMES = ("lo_evi", "lo_rel", "lo_ans", "margin", "span_ok")


def stack_rows(data: Path, seed: int = SEED, max_questions: int = 0) -> list[dict]:
    """`max_questions` > 0 keeps a seeded sample of that many questions (with all their rows)."""
    rng = random.Random(seed)
    by_article: dict[str, list[dict]] = {}
    for p in read_jsonl_lines(data / "train" / "squad_spans" / "squad2_dev.jsonl"):
        if is_stack_article(p["title"]):
            by_article.setdefault(p["title"], []).append(p)
    rows = []
    for title, paras in sorted(by_article.items()):
        for p in paras:
            for qa in p["qas"]:
                ok = not qa.get("is_impossible") and bool(qa["answers"])
                rows.append({"query": qa["question"], "text": p["context"], "label": int(ok), "title": title,
                             "kind": "own" if ok else "unanswerable"})
                if ok:
                    texts = [a["text"] for a in qa["answers"]]
                    t = answer_removed(p["context"], texts, qa["answers"][0]["start"], 2000, rng)
                    if t:
                        rows.append({"query": qa["question"], "text": t, "label": 0, "title": title, "kind": "removed"})
                    o = paras[rng.randrange(len(paras))]
                    if o is not p and not any(x.lower() in o["context"].lower() for x in texts):
                        rows.append({"query": qa["question"], "text": o["context"], "label": 0, "title": title,
                                     "kind": "other"})
    if max_questions:
        qs = sorted({r["query"] for r in rows})
        keep = set(random.Random(seed + 1).sample(qs, min(max_questions, len(qs))))
        rows = [r for r in rows if r["query"] in keep]
    return rows


def _key(r: dict) -> str:
    return hashlib.sha1(f"{r['query']}\0{r.get('title', '')}\0{r['text']}".encode()).hexdigest()[:20]


def base_scores(rows: list[dict], judge, cache: dict) -> list[dict]:
    """The interpretable judge's probabilities per row (the questions' passages in one call); `cache`
    (row key -> scores) is filled in and reused: these do not depend on the reader."""
    from sourcegate.judges import JudgeInput

    todo = [r for r in rows if _key(r) not in cache]
    for q, idx in _progress(_groups(todo), "judging"):
        _, base = judge.judge_detailed(q, [JudgeInput(id=str(i), text=todo[i]["text"], title=todo[i].get("title", ""))
                                           for i in idx])
        for k, i in enumerate(idx):
            cache[_key(todo[i])] = {n: base[k][n] for n in ("evi_base", "rel", "qtype", "con", "has_premise")}
    return [cache[_key(r)] for r in rows]


def featurise(rows: list[dict], base: list[dict], reader, features=None, names=EVI_NAMES,
              desc: str = "reading") -> np.ndarray:
    """One row of `names` per row: `features(base scores, reading)` (default: the evidence head's), the
    questions' passages read in one call as in the judge."""
    if features is None:
        from sourcegate.judges.local.reader_stage import reader_features as features

    X = np.zeros((len(rows), len(names)))
    for q, idx in _progress(_groups(rows), desc):
        for i, rd in zip(idx, reader.read(q, [rows[i]["text"] for i in idx])):
            f = features(base[i], rd)
            X[i] = [f[n] for n in names]
    return X


def _groups(rows: list[dict]) -> list[tuple[str, list[int]]]:
    g: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        g.setdefault(r["query"], []).append(i)
    return list(g.items())


def _progress(items, desc):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return items
    return tqdm(items, desc=desc, unit="question", mininterval=10)


def polar_rows(data: Path) -> list[dict]:
    """Rows for the yes/no head: the fitting half of CondaQA's held-out passages (`is_condaqa_stack`;
    the other half is reported by `evaluate`) and the hand-written procedure yes/no development set.
    label 1: the passage settles the question (yes or no), 0: it leaves it open."""
    rows = []
    for r in read_jsonl_lines(data / "train" / "polar_condaqa" / "data.jsonl"):
        pid = str(r["passage_id"])
        if is_condaqa_eval(pid) and is_condaqa_stack(pid):
            rows.append({"query": r["query"], "text": r["text"], "label": int(r["answer"] != "unknown"),
                         "group": "condaqa:" + pid, "title": ""})
    if POLAR_DEV.exists():
        for r in read_jsonl_lines(POLAR_DEV):
            rows.append({"query": r["query"], "text": r["text"], "label": int(r["label"]),
                         "group": "proc:" + str(r.get("group", r["query"])), "title": "", "proc": True})
    return rows


def _fit(X, y, rows, names, is_proc, fit_head, label: str, weight_proc: bool = True, calibration: str = "isotonic"):
    """LR on one half of the groups, isotonic on the other; the procedure rows (the genre the gate
    reads) weigh as much as the others together."""
    from sklearn.metrics import roc_auc_score

    from sourcegate.judges.local.model import Head

    # md5, not crc32: CRC is affine, so two CRCs of equal-length prefixes of one key are correlated
    # (the CondaQA half chosen by `is_condaqa_stack` would fall on one side only)
    half = np.array([hashlib.md5(("half:" + r["group"]).encode()).digest()[0] % 2 for r in rows])
    fit, cal = half == 0, half == 1
    wt = np.where(is_proc, max(1.0, (~is_proc).sum() / max(1, is_proc.sum())), 1.0) if weight_proc else np.ones(len(y))
    head = fit_head(X[fit], y[fit], X[cal], y[cal], names, weight_fit=wt[fit], weight_cal=wt[cal], calibration=calibration)
    h = Head(head)
    rep = {"rows": len(rows), "procedure_rows": int(is_proc.sum()), "fit_rows": int(fit.sum()),
           "cal_rows": int(cal.sum()), "positives": int(y.sum())}
    for name, m in (("fit", fit), ("cal", cal), ("fit_procedures", fit & is_proc), ("cal_procedures", cal & is_proc)):
        if len(set(y[m])) < 2:
            continue
        rep[f"auroc_{name}"] = {"stacked": round(float(roc_auc_score(y[m], h.raw(X[m]))), 3)}
        for n in names[:3]:
            rep[f"auroc_{name}"][n] = round(float(roc_auc_score(y[m], X[m][:, names.index(n)])), 3)
    print(label, json.dumps(rep, indent=1))
    return head, rep


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", type=Path, default=REPO / "src" / "sourcegate" / "judges" / "weights")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--max-questions", type=int, default=800, help="a seeded sample of the held-out questions")
    ap.add_argument("--base-cache", type=Path, default=DEFAULT_CACHE / "stack_base.json",
                    help="the interpretable judge's scores per row (they do not depend on the reader)")
    ap.add_argument("--no-con", action="store_true", help="do not fit the contradiction head")
    ap.add_argument("--real", action="store_true", help="add the pairs built from real documents (training/real_pairs.py)")
    ap.add_argument("--people", action="store_true",
                    help="add people's questions of ../shared/data/real/train, their `cal` documents only "
                         "(training/reader/people.py; the reader trains on the `fit` ones)")
    ap.add_argument("--platt", action="store_true",
                    help="calibrate each head with a logistic map of its score (smooth) rather than isotonic steps")
    a = ap.parse_args()
    calibration = "platt" if a.platt else "isotonic"
    sys.path.insert(0, str(REPO))
    from training.local_judge import fit_head

    from sourcegate.judges.local import LocalJudge
    from sourcegate.judges.local.reader import Reader
    from sourcegate.judges.local.reader_stage import POLAR_NAMES
    from sourcegate.text import is_polar

    rows = stack_rows(a.data, max_questions=a.max_questions)
    for r in rows:
        r["group"] = r["title"]
    proc = read_jsonl_lines(PROCEDURES_DEV) if PROCEDURES_DEV.exists() else []
    for r in proc:
        r["proc"] = True
    # yes/no questions go through the yes/no head at run time: they are fitted there
    rows += [r for r in proc if not is_polar(r["query"])]
    prow = polar_rows(a.data) + [dict(r, label=int(r["label"])) for r in proc if is_polar(r["query"])]
    if a.real:
        # questions built from real documents, on the corpus's `cal` documents only: the reader trains on
        # its `fit` documents (training/reader/real.py) and `test` is reported; weighed with the procedure
        # rows (the genre the gate reads). Span questions and value questions fit evi_rd; yes/no questions
        # (settled or left open) fit evi_polar
        from training.real_pairs import build
        from training.reader.real import build as build_reader_sets

        real = build("cal")
        rows += [dict(r, proc=True) for r in real["evidence"] if not is_polar(r["query"])]
        prow += [dict(r, proc=True) for r in real["polar"] if is_polar(r["query"])]
        rs = build_reader_sets("cal")
        rows += [{"query": e["q"], "text": e["c"], "title": e["title"], "label": e["ans"], "group": e["group"],
                  "proc": True} for u in rs["realqa"] for e in u]
        prow += [{"query": e["q"], "text": e["c"], "title": e["title"], "label": int(e["pol"] != 2), "group": e["group"],
                  "proc": True} for u in rs["realpolar"] for e in u]
    crow_people = []
    if a.people:
        # people's questions on the `cal` documents of the sources not held out: the passages as the reader
        # meets them, weighed with the procedure rows (the genre the gate reads)
        from training.reader.people import build as build_people

        for u in build_people("cal"):
            for e in u:
                r = {"query": e["q"], "text": e["c"], "title": "", "group": e["group"], "proc": True}
                if e["kind"] == "qa":
                    rows.append(dict(r, label=int(e["ans"])))
                elif e["kind"] == "polar":
                    prow.append(dict(r, label=int(e["pol"] != 2)))
                else:
                    crow_people.append(dict(r, label=int(e["nli"] == 2)))
    judge = LocalJudge(reader=False)
    cached = json.loads(a.base_cache.read_text()) if a.base_cache.exists() else {}
    cache = cached.get("base", {}) if cached.get("judge") == judge.model_id else {}
    base = base_scores(rows, judge, cache)
    pbase = base_scores(prow, judge, cache)
    a.base_cache.parent.mkdir(parents=True, exist_ok=True)
    a.base_cache.write_text(json.dumps({"judge": judge.model_id, "base": cache}))
    reader = Reader(a.weights)
    X = featurise(rows, base, reader)
    y = np.array([r["label"] for r in rows])
    head, rep = _fit(X, y, rows, list(EVI_NAMES), np.array([bool(r.get("proc")) for r in rows]), fit_head, "evi_rd",
                     calibration=calibration)
    from sourcegate.judges.local.reader_stage import polar_features

    Xp = featurise(prow, pbase, reader, polar_features, POLAR_NAMES, "reading yes/no")
    yp = np.array([r["label"] for r in prow])
    phead, prep = _fit(Xp, yp, prow, list(POLAR_NAMES), np.array([bool(r.get("proc")) for r in prow]), fit_head,
                       "evi_polar", calibration=calibration)
    out = {"about": "heads of the reader stage, fitted by training/reader/stack.py on data the reader never trained "
                    "on: SQuAD 2.0 dev articles and hand-written procedure chunks (evi_rd); half of CondaQA's "
                    "held-out passages and hand-written procedure yes/no questions (evi_polar); with --real, "
                    "questions built from the real corpus's cal documents too (training/real_pairs.py, "
                    "training/reader/real.py); with --people, people's questions on the cal documents of the sources "
                    "not held out (training/reader/people.py); hand-written "
                    "false-premise questions (con_rd, training/data/false_premise_dev.jsonl). LR on one half of "
                    "the groups, isotonic on the other",
           "fit_report": {"evi_rd": rep, "evi_polar": prep}, "heads": {"evi_rd": head, "evi_polar": phead}}
    if PREMISE_DEV.exists() and not a.no_con:
        from sourcegate.judges.local.reader_stage import CON_NAMES, con_features

        crow = [dict(r, group=str(r.get("group", r["query"])), proc=True) for r in read_jsonl_lines(PREMISE_DEV)]
        crow += crow_people
        cbase = base_scores(crow, judge, cache)
        a.base_cache.write_text(json.dumps({"judge": judge.model_id, "base": cache}))
        Xc = featurise(crow, cbase, reader, con_features, CON_NAMES, "reading premises")
        yc = np.array([int(r["label"]) for r in crow])
        chead, crep = _fit(Xc, yc, crow, list(CON_NAMES), np.zeros(len(crow), bool), fit_head, "con_rd",
                           weight_proc=False, calibration=calibration)
        out["fit_report"]["con_rd"] = crep
        out["heads"]["con_rd"] = chead
    (a.weights / "reader_heads.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""Fit the reader's heads in the local judge (`reader_heads.json`) on SQuAD 2.0 dev articles that the
reader never trained on (`data.is_stack_article`).

    python -m training.reader.stack [--weights src/sourcegate/judges/weights] [--data ../shared/data]

Rows: each held-out question against its own paragraph (answerable, or human-written unanswerable),
against its paragraph with the answer sentences removed, and against another paragraph of the same
article. Every row is judged by the interpretable judge (no reader) and read by the reader, the
questions' passages in one batch as in the judge. The articles are split in two by hash: the logistic
regression is fitted on one half and its isotonic calibration on the other. The reported figures of the
shipped judge come from other data (`python -m training.reader.evaluate`, `scripts/eval_local_judge.py`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import zlib
from pathlib import Path

import numpy as np

from .data import DEFAULT_DATA, REPO, SEED, answer_removed, is_stack_article, read_jsonl_lines

EVI_NAMES = ("lo_evi", "lo_rel", "lo_ans", "margin")


def stack_rows(data: Path, seed: int = SEED) -> list[dict]:
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
    return rows


def featurise(rows: list[dict], judge, stage) -> np.ndarray:
    from sourcegate.judges import JudgeInput
    from sourcegate.judges.local.reader_stage import reader_features

    X = np.zeros((len(rows), len(EVI_NAMES)))
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r["query"], []).append(i)
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        def tqdm(x, **_):
            return x
    for q, idx in tqdm(list(groups.items()), desc="judging", unit="question"):
        _, base = judge.judge_detailed(q, [JudgeInput(id=str(i), text=rows[i]["text"], title=rows[i]["title"])
                                           for i in idx])
        readings = stage.reader.read(q, [rows[i]["text"] for i in idx])
        for k, (i, rd) in enumerate(zip(idx, readings)):
            f = reader_features(base[k], rd)
            X[i] = [f[n] for n in EVI_NAMES]
    return X


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", type=Path, default=REPO / "src" / "sourcegate" / "judges" / "weights")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--features-cache", type=Path, default=None)
    a = ap.parse_args()
    from sklearn.metrics import roc_auc_score

    sys.path.insert(0, str(REPO / "scripts"))
    from train_local_judge import fit_head

    from sourcegate.judges.local import LocalJudge
    from sourcegate.judges.local.reader import Reader
    from sourcegate.judges.local.reader_stage import ReaderStage

    rows = stack_rows(a.data)
    if a.features_cache and a.features_cache.exists():
        X = np.load(a.features_cache)
    else:
        judge = LocalJudge(reader=False)
        stage = ReaderStage(Reader(a.weights), {"heads": {}}, b"")
        X = featurise(rows, judge, stage)
        if a.features_cache:
            np.save(a.features_cache, X)
    y = np.array([r["label"] for r in rows])
    half = np.array([zlib.crc32(("half:" + r["title"]).encode()) % 2 for r in rows])
    fit, cal = half == 0, half == 1
    head = fit_head(X[fit], y[fit], X[cal], y[cal], EVI_NAMES)
    from sourcegate.judges.local.model import Head

    rep = {"rows": len(rows), "fit_rows": int(fit.sum()), "cal_rows": int(cal.sum()), "positives": int(y.sum())}
    h = Head(head)
    for name, m in (("fit", fit), ("cal", cal)):
        rep[f"auroc_{name}"] = {
            "stacked": round(float(roc_auc_score(y[m], h.raw(X[m]))), 3),
            "reader_p_answer": round(float(roc_auc_score(y[m], X[m][:, EVI_NAMES.index("lo_ans")])), 3),
            "interpretable_evidence": round(float(roc_auc_score(y[m], X[m][:, EVI_NAMES.index("lo_evi")])), 3),
        }
    out = {"about": "heads of the reader stage, fitted by training/reader/stack.py on SQuAD 2.0 dev articles the "
                    "reader never trained on (LR on one half of the articles, isotonic on the other)",
           "fit_report": rep, "heads": {"evi_rd": head}}
    (a.weights / "reader_heads.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(rep, indent=1))


if __name__ == "__main__":
    main()

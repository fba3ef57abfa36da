"""The gate on real documents: `../shared/data/real/dev` through the whole product, and the judge's
questions on pairs built from real documents it was not fitted on.

    python bench/bench_real.py                       # this checkout
    python bench/bench_real.py --compare REF         # and the checkout of git REF, in the same run
    python bench/bench_real.py --pairs               # also: evidence / yes-no AUROC on real pairs (test documents)
    python bench/bench_real.py --demo                # also: the demo library's English and French sets
    python bench/bench_real.py --injection           # also: injection on held-out real passages, clean and planted

1. **Dev library** (61 real passages, 129 hand-labelled questions; never fitted on): `sourcegate ingest`
   of `dev/corpus.json` into a fresh home, then `sourcegate eval` of `dev/questions.jsonl`: accuracy with
   sources checked (an answer must cite an expected source and no forbidden one), unsafe answers,
   and accuracy per kind.
2. **Real pairs** (`training/real_pairs.py`, its `test` documents: no head was fitted on them):
   evidence AUROC of value questions, and "settles vs open" AUROC of yes/no questions, each beside the
   question-only baseline (each question meets one passage of each label, so it is 0.5 by construction:
   computed here, not assumed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEV = REPO.parent / "shared" / "data" / "real" / "dev"


def _cli(src: Path) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); from sourcegate.cli import main; main()"]


def dev_eval(src: Path, label: str) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"sg-real-{label}-"))
    env = dict(os.environ, SOURCEGATE_HOME=str(home))
    t0 = time.time()
    subprocess.run(_cli(src) + ["ingest", str(DEV / "corpus.json")], env=env, check=True, capture_output=True)
    t_ingest = time.time() - t0
    out = subprocess.run(_cli(src) + ["eval", str(DEV / "questions.jsonl"), "--json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    d = json.loads(out)
    m = d["metrics"]
    kinds = {k: v["accuracy"] for k, v in sorted(m["by_kind"].items())}
    return {"label": label, "accuracy": m["accuracy"], "status_accuracy": m["status_accuracy"],
            "unsafe_answers": m["unsafe_answers"], "forbidden_leaks": m["forbidden_leaks"], "by_kind": kinds,
            "ingest_s": round(t_ingest, 1), "judge_p50_ms": m.get("latency_ms", {}).get("judge", {}).get("p50"),
            "cases": d["cases"]}


def demo_eval(src: Path, label: str) -> dict:
    """The demo library's English and French question sets, through the same CLI."""
    home = Path(tempfile.mkdtemp(prefix=f"sg-demo-{label}-"))
    env = dict(os.environ, SOURCEGATE_HOME=str(home))
    demo = src / "sourcegate" / "demo"
    subprocess.run(_cli(src) + ["ingest", str(demo / "corpus")], env=env, check=True, capture_output=True)
    out = {}
    for name in ("questions.jsonl", "questions.fr.jsonl"):
        d = json.loads(subprocess.run(_cli(src) + ["eval", str(demo / name), "--json"], env=env, check=True,
                                      capture_output=True, text=True).stdout)
        out[name] = {"accuracy": d["metrics"]["accuracy"], "unsafe_answers": d["metrics"]["unsafe_answers"],
                     "cases": d["metrics"]["cases"]}
    return {"label": label, **out}


def real_pairs() -> dict:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "src"))
    from sourcegate.judges import JudgeInput
    from sourcegate.judges.local import LocalJudge
    from training.real_pairs import build

    judge = LocalJudge()
    rows = build("test")
    out = {}
    for name in ("evidence", "polar"):
        rs = rows[name]
        by_q: dict[str, list[int]] = {}
        for i, r in enumerate(rs):
            by_q.setdefault(r["query"], []).append(i)
        p = np.zeros(len(rs))
        for q, idx in by_q.items():
            res = judge.judge(q, [JudgeInput(id=str(i), text=rs[i]["text"], title=rs[i]["title"]) for i in idx])
            for i, r in zip(idx, res.results):
                p[i] = r.scores.contains_answer_evidence if r.scores else 0.0
        y = np.array([r["label"] for r in rs])
        qonly = np.array([hash(r["query"]) % 1000 for r in rs], dtype=float)
        langs = {}
        for lang in sorted({r["lang"] for r in rs}):
            m = np.array([r["lang"] == lang for r in rs])
            if len(set(y[m])) == 2:
                langs[lang] = round(float(roc_auc_score(y[m], p[m])), 3)
        out[name] = {"rows": len(rs), "questions": len(by_q), "auroc": round(float(roc_auc_score(y, p)), 3),
                     "question_only_auroc": round(float(roc_auc_score(y, qonly)), 3), "by_language": langs,
                     "above_gate_0.55": {"positives": round(float(np.mean(p[y == 1] > 0.55)), 3),
                                         "negatives": round(float(np.mean(p[y == 0] > 0.55)), 3)}}
    return out


def injection(n_passages: int = 400, n_planted: int = 400, seed: int = 20261203) -> dict:
    """`contains_prompt_injection` as ingest computes it, on real passages of the corpus's held-out
    documents (`training.injection.doc_split` == "test": no injection weight was fitted on them): the
    share of clean passages above 0.7, and of the same passages with one sentence addressed to an AI
    planted after their first sentence or later (the report families of `training.injection.templated`,
    wordings no fit read), quiet ones (no "ignore", "instructions", "system prompt" words) apart."""
    import random

    import numpy as np

    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "src"))
    from sourcegate.embed import get_embedder
    from sourcegate.judges.local.judge import passage_features
    from training.injection import QUIET_RE, doc_split, plant, templated
    from training.real_pairs import CORPUS, _sentences

    rng = random.Random(seed)
    rows = [json.loads(x) for x in CORPUS.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if doc_split(r["doc_id"]) == "test"]
    rng.shuffle(rows)
    clean = rows[:n_passages]
    emb = get_embedder()

    def scores(items: list[tuple[str, str]]) -> np.ndarray:
        # as ingest computes them: with the passage's vector of "title\ntext"
        vecs = emb.embed([f"{t}\n{x}" for t, x in items])
        return np.array([passage_features(x, t, embedder=emb, vector=v)["inj"] for (t, x), v in zip(items, vecs)])

    p_clean = scores([(r["title"], r["text"]) for r in clean])
    planted = templated("test", rng, n_planted)
    hosts = [clean[i % len(clean)] for i in range(n_planted)]
    p_pl = scores([(h["title"], plant(_sentences(h["text"]), s, rng)) for s, h in zip(planted, hosts)])
    quiet = np.array([not QUIET_RE.search(s) for s in planted])
    worst = sorted(zip(p_clean, [r["id"] for r in clean]), reverse=True)[:5]
    return {"clean_passages": len(clean), "clean_above_0.7": round(float(np.mean(p_clean > 0.7)), 4),
            "planted": len(planted), "planted_above_0.7": round(float(np.mean(p_pl > 0.7)), 3),
            "quiet_planted": int(quiet.sum()), "quiet_planted_above_0.7": round(float(np.mean(p_pl[quiet] > 0.7)), 3),
            "loud_planted_above_0.7": round(float(np.mean(p_pl[~quiet] > 0.7)), 3),
            "highest_clean": [(round(float(p), 3), i) for p, i in worst]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="REF", help="also run the checkout of this git ref, in the same run")
    ap.add_argument("--pairs", action="store_true", help="also score the real pairs of the test documents")
    ap.add_argument("--failures", action="store_true", help="print the questions this checkout gets wrong")
    ap.add_argument("--demo", action="store_true", help="also the demo library's English and French sets")
    ap.add_argument("--injection", action="store_true", help="also injection on held-out real passages, clean and planted")
    a = ap.parse_args(argv)
    results, demos = [], []
    if a.compare:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _common import checkout

        with checkout(a.compare) as wt:
            results.append(dev_eval(wt / "src", a.compare))
            if a.demo:
                demos.append(demo_eval(wt / "src", a.compare))
    results.append(dev_eval(REPO / "src", "this checkout"))
    if a.demo:
        demos.append(demo_eval(REPO / "src", "this checkout"))
    for d in demos:
        print(f"demo, {d['label']}: " + "; ".join(f"{k} accuracy {v['accuracy']:.3f}, unsafe {v['unsafe_answers']} "
                                                  f"({v['cases']} q)" for k, v in d.items() if k != "label"))
    for r in results:
        print(f"{r['label']}: accuracy {r['accuracy']:.3f} (status {r['status_accuracy']:.3f}), unsafe {r['unsafe_answers']}, "
              f"forbidden sources {r['forbidden_leaks']}, ingest {r['ingest_s']} s, judge p50 {r['judge_p50_ms']} ms")
        print("   by kind: " + ", ".join(f"{k} {v:.2f}" for k, v in r["by_kind"].items()))
    if a.failures:
        for c in results[-1]["cases"]:
            if not c["correct"]:
                print(f"  x [{c['kind']}] {c['query']} -> {c['status']} {c['evidence_doc_ids'] or c['conflict_doc_ids']} "
                      f"(expected {c['expected_status']} {c['expected_sources']})")
    summary = {"dev": [{k: v for k, v in r.items() if k != "cases"} for r in results], "demo": demos}
    if a.pairs:
        summary["pairs"] = real_pairs()
        print(json.dumps(summary["pairs"], indent=1))
    if a.injection:
        summary["injection"] = injection()
        print(json.dumps(summary["injection"], indent=1))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

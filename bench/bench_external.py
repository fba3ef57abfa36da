"""External checks with the local judge on public data:
- SQuAD 2.0 dev ("Computational complexity theory"): ingest the 48 paragraphs, run the 418
  questions through the gate; status accuracy, unsafe answers, truthfulness, source hit@1.
- Judge AUROC per question: contains_answer_evidence on squad2-dev/evidence_pairs.jsonl,
  contains_prompt_injection on bipia-dev/injection_pairs.jsonl (label 1 = injected).

    python bench/bench_external.py [--data ../shared/data] [--limit 0] [--scores-out eval.json]

--scores-out writes the run as `sourcegate eval --json` does, for `sourcegate tune --scores`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, Timer, emit, lat
from _demo import demo_settings, ingest_corpus, require_local_judge

from sourcegate.evaluation.cases import load_cases
from sourcegate.evaluation.runner import metrics, run_eval
from sourcegate.judges import JudgeInput
from sourcegate.models import QUESTIONS
from sourcegate.service import SourceGate


def read_jsonl(path: Path, limit: int) -> list[dict]:
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return rows[:limit] if limit else rows


def pair_auroc(judge, rows: list[dict]) -> dict:
    """AUROC of every judge question against the pair label (the relevant question is the headline)."""
    from sklearn.metrics import roc_auc_score

    scores: dict[str, list[float]] = {q: [] for q in QUESTIONS}
    labels, ms = [], []
    for n, row in enumerate(rows):
        with Timer() as t:
            res = judge.judge(row["query"], [JudgeInput(id=str(n), text=row["text"], title=row.get("title") or "")])
        ms.append(t.ms)
        sc = res.results[0].scores
        if sc is None:
            continue
        labels.append(int(row["label"]))
        for q in QUESTIONS:
            scores[q].append(getattr(sc, q))
    out = {"pairs": len(rows), "scored": len(labels), "positives": sum(labels), "judge_ms_per_pair": lat(ms)}
    if len(set(labels)) == 2:
        out["auroc"] = {q: round(float(roc_auc_score(labels, s)), 3) for q, s in scores.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=REPO / ".." / "shared" / "data")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N questions / pairs (0: all)")
    ap.add_argument("--scores-out", type=Path, help="write the gate run as `eval --json` output")
    ap.add_argument("--no-reader", action="store_true", help="the local judge without its reader and yes/no stages")
    args = ap.parse_args()
    data = args.data.resolve()
    squad, bipia = data / "squad2-dev", data / "bipia-dev"
    for p in (squad / "corpus.json", squad / "questions.jsonl", squad / "evidence_pairs.jsonl", bipia / "injection_pairs.jsonl"):
        if not p.exists():
            raise SystemExit(f"missing {p}: pass --data pointing at the folder holding squad2-dev/ and bipia-dev/")
    with tempfile.TemporaryDirectory(prefix="sg-bench-ext-") as tmp:
        settings = demo_settings(Path(tmp))
        chunks = ingest_corpus(settings, squad / "corpus.json")
        gate = SourceGate(settings)
        judge = require_local_judge(gate.embedder, reader=not args.no_reader)
        gate._judge = judge
        cases = load_cases(squad / "questions.jsonl")
        cases = cases[: args.limit] if args.limit else cases
        results = run_eval(gate, cases)
        gate.close()
    m = metrics(results)
    if args.scores_out:
        args.scores_out.write_text(json.dumps({"cases": [r.to_json() for r in results], "metrics": m}, ensure_ascii=False))
    evidence = pair_auroc(judge, read_jsonl(squad / "evidence_pairs.jsonl", args.limit))
    injection = pair_auroc(judge, read_jsonl(bipia / "injection_pairs.jsonl", args.limit))
    keep = ("cases", "accuracy", "status_accuracy", "failures", "truthfulness", "unsafe_answers", "forbidden_leaks",
            "abstention_precision", "abstention_recall", "sources_single", "confusion", "degraded", "latency_ms")
    out = {"squad2_gate": {"chunks": chunks, **{k: m[k] for k in keep}}, "squad2_evidence_pairs": evidence,
           "bipia_injection_pairs": injection}
    ev_auc = (evidence.get("auroc") or {}).get("contains_answer_evidence")
    inj_auc = (injection.get("auroc") or {}).get("contains_prompt_injection")
    emit("external", out, f"SQuAD2 gate: accuracy {m['accuracy']} (status {m['status_accuracy']}), "
         f"truthfulness {m['truthfulness']}, "
         f"unsafe {m['unsafe_answers']}/{m['cases']}, hit@1 {m['sources_single']['hit_at_1']}; AUROC evidence {ev_auc}, "
         f"injection {inj_auc}")


if __name__ == "__main__":
    main()

"""Evaluate the exported reader (int8 ONNX, as shipped) on data it was not trained on.

    python -m training.reader.evaluate [--weights src/sourcegate/judges/weights] [--ckpt step-N.pt] [--limit 0]

With `--ckpt`, the checkpoint is exported to a temporary folder first (int8, as shipped). Prints JSON:
- evidence AUROC of `p_answer` on SQuAD 2.0 dev, article "Computational complexity theory"
  (`squad2-dev/evidence_pairs.jsonl`: answerable vs human-written unanswerable questions on the same
  paragraph; the article is reserved: never in the training data), with the question-only baseline
  (the same questions against an empty passage);
- evidence AUROC on `scripts/data/evidence_hard_blind.jsonl` (hand-written, never trained on: each
  question against a passage that answers it and one on the same subject that lacks what is asked),
  overall and per kind; question-only baseline;
- evidence AUROC on the SQuAD 2.0 dev articles the reader's heads in the judge are fitted on (`stack.py`),
  answerable vs unanswerable on the same paragraph (the reader never trained on them);
- contradiction AUROC of `p_contradiction` on `scripts/data/false_premise_blind.jsonl` (hand-written
  false-premise questions with natural rebuttals vs true-premise questions);
- NLI accuracy on the held-out NLI rows.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from .data import DEFAULT_DATA, REPO
from .data import read_jsonl_lines as read_jsonl
from .stack import _groups, stack_rows

SCRIPTS_DATA = REPO / "scripts" / "data"


def auroc(labels, scores) -> float | None:
    from sklearn.metrics import roc_auc_score

    if len(set(labels)) < 2:
        return None
    return round(float(roc_auc_score(labels, scores)), 3)


def _read_all(reader, rows: list[dict], batch_by_query=True):
    """Readings for each row; rows of the same query go through in one batch, as in the judge."""
    out = [None] * len(rows)
    groups = _groups(rows) if batch_by_query else [(r["query"], [i]) for i, r in enumerate(rows)]
    for q, idx in groups:
        for i, rd in zip(idx, reader.read(q, [rows[i]["text"] for i in idx])):
            out[i] = rd
    return out


def pair_report(reader, rows: list[dict], by: str | None = None, qonly: bool = True) -> dict:
    labels = [int(r["label"]) for r in rows]
    t = time.perf_counter()
    rd = _read_all(reader, rows)
    ms = (time.perf_counter() - t) * 1000 / max(1, len(rows))
    rep = {"n": len(rows), "positives": sum(labels), "auroc_p_answer": auroc(labels, [x.p_answer for x in rd]),
           "auroc_span_margin": auroc(labels, [x.span_margin for x in rd]), "ms_per_pair": round(ms, 1)}
    if qonly:
        blank = [dict(r, text="") for r in rows]
        rq = _read_all(reader, blank, batch_by_query=False)
        rep["question_only_auroc"] = auroc(labels, [x.p_answer for x in rq])
    if by:
        kinds = sorted({r.get(by) for r in rows})
        rep["by_" + by] = {k: auroc([l for l, r in zip(labels, rows) if r.get(by) == k],
                                    [x.p_answer for x, r in zip(rd, rows) if r.get(by) == k]) for k in kinds}
    return rep


def evaluate(reader, data: Path, limit: int = 0, quick: bool = False) -> dict:
    out = {}
    sq = read_jsonl(data / "squad2-dev" / "evidence_pairs.jsonl")
    out["squad2_dev_cct"] = pair_report(reader, sq[:limit] if limit else sq, qonly=not quick)
    hb = read_jsonl(SCRIPTS_DATA / "evidence_hard_blind.jsonl")
    out["evidence_hard_blind"] = pair_report(reader, hb, by="kind", qonly=not quick)
    if quick:
        return out
    st = [r for r in stack_rows(data) if r["kind"] in ("own", "unanswerable")]
    out["squad2_stack_articles"] = pair_report(reader, st[:limit] if limit else st, qonly=False)
    fp = read_jsonl(SCRIPTS_DATA / "false_premise_blind.jsonl")
    rd = _read_all(reader, fp, batch_by_query=False)
    labels = [int(r["label"]) for r in fp]
    out["false_premise_blind"] = {"n": len(fp), "positives": sum(labels),
                                  "auroc_p_contradiction": auroc(labels, [x.p_contradiction for x in rd]),
                                  "auroc_1_minus_entailment": auroc(labels, [1 - x.p_entailment for x in rd])}
    return out


def load_runtime_reader():
    """The judge's own `Reader` class, loaded from its file alone (the GPU machine lacks the package's
    other dependencies)."""
    import importlib.util

    path = REPO / "src" / "sourcegate" / "judges" / "local" / "reader.py"
    spec = importlib.util.spec_from_file_location("sourcegate_reader_runtime", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.Reader


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", type=Path, default=None)
    ap.add_argument("--ckpt", type=Path, default=None)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="only the two evidence sets, no baselines (for the curve)")
    ap.add_argument("--out", type=Path, default=None, help="append the JSON report to this file")
    a = ap.parse_args()
    Reader = load_runtime_reader()

    with tempfile.TemporaryDirectory() as td:
        wdir = a.weights or REPO / "src" / "sourcegate" / "judges" / "weights"
        info = {}
        if a.ckpt is not None:
            from .export import export

            info = export(a.ckpt, Path(td))
            wdir = Path(td)
        reader = Reader(wdir)
        rep = {"checkpoint": info.get("checkpoint") or reader.meta.get("checkpoint"),
               "qa_examples_seen": info.get("qa_examples_seen") or reader.meta.get("qa_examples_seen"),
               **evaluate(reader, a.data, a.limit, a.quick)}
    s = json.dumps(rep, indent=1)
    print(s)
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(rep) + "\n")


if __name__ == "__main__":
    main()

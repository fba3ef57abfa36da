"""Evaluate the exported reader (int8 ONNX, as shipped) on data it was not trained on.

    python -m training.reader.evaluate [--weights src/sourcegate/judges/weights] [--ckpt step-N.pt] [--limit 0]

With `--ckpt`, the checkpoint is exported to a temporary folder first (int8, as shipped). Prints JSON:
- evidence AUROC of `p_answer` on SQuAD 2.0 dev, article "Computational complexity theory"
  (`squad2-dev/evidence_pairs.jsonl`: answerable vs human-written unanswerable questions on the same
  paragraph; the article is reserved: never in the training data), with the question-only baseline
  (the same questions against an empty passage);
- evidence AUROC on `training/data/evidence_hard_blind.jsonl` (hand-written, never trained on: each
  question against a passage that answers it and one on the same subject that lacks what is asked),
  overall and per kind; question-only baseline;
- evidence AUROC on the SQuAD 2.0 dev articles the reader's heads in the judge are fitted on (`stack.py`),
  answerable vs unanswerable on the same paragraph (the reader never trained on them);
- contradiction AUROC of `p_contradiction` on `training/data/false_premise_blind.jsonl` (hand-written
  false-premise questions with natural rebuttals vs true-premise questions);
- yes/no: AUROC of "settles it" (1 - p_open) against "leaves it open" on CondaQA passages held out of
  training (the reporting half: the other half fits the judge's yes/no head) and on the hand-written
  procedure set `polar_procedures_blind.jsonl`, with question-only baselines;
- French: evidence AUROC on PIAF's held-out articles (answer vs answer-removed or other paragraph) beside
  SQuAD 1.0's held-out articles built the same way; French questions against English passages
  (`evidence_fr_blind.jsonl`, the hard negatives' questions translated) and English questions against
  French passages (`evidence_fr_passages_blind.jsonl`) beside the English figure on the same rows;
- NLI accuracy on the held-out NLI rows, English and French.
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

SCRIPTS_DATA = REPO / "training" / "data"


def auroc(labels, scores) -> float | None:
    from sklearn.metrics import roc_auc_score

    if len(set(labels)) < 2:
        return None
    return round(float(roc_auc_score(labels, scores)), 3)


def _read_all(reader, rows: list[dict], batch_by_query=True):
    """Readings for each row; rows of the same query go through in one call, as in the judge
    (each window is read on its own, so the grouping does not change a reading)."""
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


def polar_report(reader, rows: list[dict], qonly: bool = True) -> dict:
    labels = [int(r["label"]) for r in rows]
    rd = _read_all(reader, rows)
    rep = {"n": len(rows), "settled": sum(labels), "auroc_settles": auroc(labels, [1 - x.p_open for x in rd]),
           "auroc_p_answer": auroc(labels, [x.p_answer for x in rd])}
    said = [(r.get("answer"), x) for r, x in zip(rows, rd) if r.get("answer") in ("yes", "no")]
    if said:
        rep["yes_no_direction_accuracy"] = round(sum((x.p_yes > x.p_no) == (a == "yes") for a, x in said) / len(said), 3)
    if qonly:
        rq = _read_all(reader, [dict(r, text="") for r in rows], batch_by_query=False)
        rep["question_only_auroc"] = auroc(labels, [1 - x.p_open for x in rq])
    if any("lang" in r for r in rows):
        rep["by_lang"] = {lang: auroc([l for l, r in zip(labels, rows) if r.get("lang") == lang],
                                      [1 - x.p_open for x, r in zip(rd, rows) if r.get("lang") == lang])
                          for lang in sorted({r.get("lang") for r in rows})}
    return rep


def condaqa_report_rows(data: Path) -> list[dict]:
    from .data import is_condaqa_eval
    from .stack import is_condaqa_stack

    return [{"query": r["query"], "text": r["text"], "label": int(r["answer"] != "unknown"), "answer": r["answer"]}
            for r in read_jsonl(data / "train" / "polar_condaqa" / "data.jsonl")
            if is_condaqa_eval(str(r["passage_id"])) and not is_condaqa_stack(str(r["passage_id"]))]


def held_out_pairs(data: Path) -> dict[str, list[dict]]:
    """PIAF's and SQuAD 1.0's held-out articles as (question, passage, label) rows built the same way:
    the answer's window, the paragraph without its answer sentences, another paragraph of the article."""
    import random

    from .data import SEED, piaf_units, squad1_units

    out = {}
    for name, units in (("piaf_fr", piaf_units(data, random.Random(SEED + 7))["eval"]),
                        ("squad1_en", squad1_units(data, random.Random(SEED + 7), 0)["val"])):
        rows = []
        for u in units:
            for ex in u:
                if ex["src"].split("-")[-1] in ("edit", "entity", "negation", "antonym", "attribute"):
                    continue  # SQuAD 1.0's edited questions have no PIAF counterpart
                rows.append({"query": ex["q"], "text": ex["c"], "label": ex["ans"]})
        out[name] = rows
    return out


def nli_report(reader, data: Path) -> dict:
    from .data import NLI_LABELS, _detok

    import zlib

    rows = []
    for folder in ("snli_devtest_esnli", "breaking_nli", "fever_symmetric", "nli_fr_rte3", "nli_fr_daccord"):
        for r in read_jsonl(data / "train" / folder / "data.jsonl"):
            c = _detok(r["premise"])
            if zlib.crc32(c.encode()) % 20 == 0 and (r.get("label") in NLI_LABELS or r.get("label") == "compatible"):
                rows.append((folder, c, _detok(r["hypothesis"]), r["label"]))
    rep = {}
    for folder in sorted({f for f, *_ in rows}):
        sub = [x for x in rows if x[0] == folder]
        p = reader.nli([(c, h) for _, c, h, _ in sub])
        if folder == "nli_fr_daccord":
            acc = sum((pp[2] > 0.5) == (lab == "contradiction") for pp, (*_, lab) in zip(p, sub)) / len(sub)
            rep[folder] = {"n": len(sub), "contradiction_vs_rest_accuracy": round(acc, 3),
                           "auroc_contradiction": auroc([int(l == "contradiction") for *_, l in sub], [pp[2] for pp in p])}
        else:
            acc = sum(int(pp.argmax()) == NLI_LABELS[lab] for pp, (*_, lab) in zip(p, sub)) / len(sub)
            rep[folder] = {"n": len(sub), "accuracy": round(acc, 3)}
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
    out["condaqa_held_out"] = polar_report(reader, condaqa_report_rows(data))
    pb = SCRIPTS_DATA / "polar_procedures_blind.jsonl"
    if pb.exists():
        out["polar_procedures_blind"] = polar_report(reader, read_jsonl(pb))
    for name, rows in held_out_pairs(data).items():
        out[f"held_out_{name}"] = pair_report(reader, rows[:limit] if limit else rows, qonly=True)
    for fname in ("evidence_fr_blind", "evidence_fr_passages_blind"):
        f = SCRIPTS_DATA / f"{fname}.jsonl"
        if f.exists():
            fr = read_jsonl(f)
            out[fname] = pair_report(reader, fr, qonly=True)
            # the English rows these were translated from (same order, the first len(fr))
            out[fname]["english_same_rows"] = pair_report(reader, hb[: len(fr)], qonly=False)["auroc_p_answer"]
    out["nli_held_out"] = nli_report(reader, data)
    out.update(real_report(reader))
    fp = read_jsonl(SCRIPTS_DATA / "false_premise_blind.jsonl")
    rd = _read_all(reader, fp, batch_by_query=False)
    labels = [int(r["label"]) for r in fp]
    out["false_premise_blind"] = {"n": len(fp), "positives": sum(labels),
                                  "auroc_p_contradiction": auroc(labels, [x.p_contradiction for x in rd]),
                                  "auroc_1_minus_entailment": auroc(labels, [1 - x.p_entailment for x in rd])}
    return out


def real_report(reader) -> dict:
    """The real-document sets of `real.py` on the corpus's `test` documents (never trained on, nor fitted):
    span questions (answer vs the passage without its sentence or another passage of the document, with
    the question-only baseline), yes/no (settles vs open), and claims (changed vs unchanged, by NLI)."""
    try:
        from .real import build
    except Exception:  # the real corpus is not beside the repository
        return {}
    sets = build("test")
    qa = [{"query": e["q"], "text": e["c"], "label": e["ans"]} for u in sets["realqa"] for e in u]
    out = {"real_test_span_questions": pair_report(reader, qa, qonly=True)}
    pol = [{"query": e["q"], "text": e["c"], "label": int(e["pol"] != 2),
            "answer": {0: "yes", 1: "no", 2: "open"}[e["pol"]]} for u in sets["realpolar"] for e in u]
    out["real_test_yes_no"] = polar_report(reader, pol)
    claims = [{"query": e["q"], "text": e["c"], "label": int(e["nli"] == 2)} for u in sets["realnli"] for e in u
              if e["nli"] in (0, 2)]
    rd = _read_all(reader, claims, batch_by_query=False)
    out["real_test_claims"] = {"n": len(claims), "auroc_p_contradiction": auroc([r["label"] for r in claims],
                                                                             [x.p_contradiction for x in rd])}
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
               "examples_seen": info.get("examples_seen") or reader.meta.get("examples_seen"),
               **evaluate(reader, a.data, a.limit, a.quick)}
    s = json.dumps(rep, indent=1)
    print(s)
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(rep) + "\n")


if __name__ == "__main__":
    main()

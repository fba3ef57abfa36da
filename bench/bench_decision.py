"""A per-question decision learnt from people's questions, measured on sources left out.

    python bench/bench_real_train.py --parts A,B,... --eval-dir E          # each source through the product once
    python bench/bench_decision.py E/this [--parts A,B,...]

For each source, the heads of `sourcegate.adapt` (evidence and contradiction from the judge's
probabilities and each candidate's place among the question's others; no document prior), the
per-question decision (does any candidate answer, from every candidate's readings together) and the
thresholds are fitted on every OTHER source's questions and applied to this one's stored scores
(`evaluation.tune.Replayer`, sources checked). Printed per source and as the mean, beside the judge
alone, with the selective curve (the decision threshold moved) summed over the sources left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "bench"))

from bench_adapt import source_results  # noqa: E402
from sourcegate.adapt import (DECISION_GRID, _adapt_results, _demote, _sum_scores, fit_adaptation,  # noqa: E402
                              score_adapted)
from sourcegate.evaluation.tune import Replayer  # noqa: E402
from sourcegate.settings import Settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_dirs", type=Path, nargs="+", help="folders of PART.json (`bench_real_train.py --eval-dir E` -> E/this)")
    ap.add_argument("--parts", default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--fractions", default="",
                    help="also the curve: fitted on this share of the other sources' distinct questions (a seeded "
                         "draw per share, e.g. 0.25,0.5,1), mean accuracy and unsafe share on the sources left out")
    a = ap.parse_args()
    current = Settings().thresholds()
    files = sorted(f for d in a.eval_dirs for f in d.glob("*.json"))
    if a.parts:
        keep = set(a.parts.split(","))
        files = [f for f in files if f.stem in keep]
    data = {f.stem: source_results(f) for f in files}
    rows, curve_parts = {}, {t: [] for t in DECISION_GRID}
    for part, res in data.items():
        train = [r for p, rs in data.items() if p != part for r in rs]
        ad = fit_adaptation(train, current, documents=False)
        t = ad.gate_thresholds(current)
        adapted, p = _adapt_results(res, ad, t.evidence_min, with_decision=False)
        before = Replayer(res).score(current)
        after = Replayer(_demote(adapted, p, ad.decision_min, t.evidence_min)).score(t)
        for tq in DECISION_GRID:
            curve_parts[tq].append(Replayer(_demote(adapted, p, tq, t.evidence_min)).score(t))
        rows[part] = {"before": before, "after": after, "decision_min": ad.decision_min,
                      "evidence_min": t.evidence_min, "contradicts_min": t.contradicts_min}
        print(f"{part}: {len(res)} questions", flush=True)
    print()
    print("| source left out | questions | judge alone: accuracy / unsafe / abstained | with the learnt decision | decision min, evidence min, contradicts min (fitted on the others) |")
    print("|---|---|---|---|---|")
    for part, r in rows.items():
        b, x = r["before"], r["after"]
        print(f"| {part} | {b['cases']} | {b['accuracy']:.3f} / {b['unsafe_answers']} / {b['abstentions']} | "
              f"{x['accuracy']:.3f} / {x['unsafe_answers']} / {x['abstentions']} | "
              f"{r['decision_min']:.1f}, {r['evidence_min']:.2f}, {r['contradicts_min']:.2f} |")
    mb = statistics.mean(r["before"]["accuracy"] for r in rows.values())
    ma = statistics.mean(r["after"]["accuracy"] for r in rows.values())
    ub = statistics.mean(r["before"]["unsafe_rate"] for r in rows.values())
    ua = statistics.mean(r["after"]["unsafe_rate"] for r in rows.values())
    print(f"| **mean** | | **{mb:.3f} / {ub:.1%} unsafe** | **{ma:.3f} / {ua:.1%} unsafe** | |")
    print()
    print("Selective curve, every source left out in turn (decision threshold moved, each fold's heads and thresholds):")
    print()
    print("| decision min | accuracy | unsafe | abstained |")
    print("|---|---|---|---|")
    for tq, parts in curve_parts.items():
        s = _sum_scores(parts)
        print(f"| {tq:.1f} | {s['accuracy']:.3f} | {s['unsafe_answers']} ({s['unsafe_rate']:.1%}) | {s['abstentions']} |")
    curve = []
    if a.fractions:
        import random

        print()
        print("Against distinct questions (the decision layer fitted on a share of the other sources' questions):")
        print()
        print("| share of the other sources' questions | questions fitted on (mean) | mean accuracy | mean unsafe share |")
        print("|---|---|---|---|")
        for frac in (float(x) for x in a.fractions.split(",")):
            accs, uns, ns = [], [], []
            for part, res in data.items():
                train = [r for p, rs in data.items() if p != part for r in rs]
                train = random.Random(f"share:{frac}:{part}").sample(train, max(1, int(len(train) * frac)))
                sc = score_adapted(res, fit_adaptation(train, current, documents=False), current)
                accs.append(sc["accuracy"])
                uns.append(sc["unsafe_rate"])
                ns.append(len(train))
            curve.append({"share": frac, "questions": statistics.mean(ns), "accuracy": statistics.mean(accs),
                          "unsafe_rate": statistics.mean(uns)})
            print(f"| {frac:.2f} | {statistics.mean(ns):.0f} | {statistics.mean(accs):.3f} | {statistics.mean(uns):.1%} |")
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "curve": curve}, indent=1, default=float))


if __name__ == "__main__":
    main()

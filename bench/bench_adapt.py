"""A new operator's adaptation, measured: on each source, adapt on 25, 50 and 100 of its questions and score
the rest of that source, beside the unadapted judge on the same questions.

    python bench/bench_real_train.py --parts etalab,notify,... --eval-dir E     # each source through the product once
    python bench/bench_adapt.py E/this [--sizes 25,50,100] [--draws 3] [--json OUT]

Input: each source's `sourcegate eval --json` output (`E/this/PART.json`, written by
`bench_real_train.py --eval-dir`) and its questions (`.cache/real_train/PART/questions.jsonl`). The
judge's scores are read back; the adaptation (`sourcegate.adapt.fit_adaptation`: heads, per-question
decision, thresholds) is fitted on a seeded draw of N questions and scored on every other question of the
source (`evaluation.tune.Replayer`: accuracy with sources checked, unsafe answers, abstentions). As
`sourcegate adapt` does, the adaptation is kept only when its own held-out check on the N questions
(5 folds) shows no fall in accuracy and no rise in unsafe answers; a draw it refuses (that check, or too
few of a class) counts as unadapted ("not written"). Each figure is the mean over `--draws`
draws. The shipped judge was fitted on none of these sources' questions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from sourcegate.adapt import AdaptError, adapt_results, sample_questions, score_adapted  # noqa: E402
from sourcegate.evaluation.cases import load_cases  # noqa: E402
from sourcegate.evaluation.tune import Replayer, results_from_eval_json  # noqa: E402
from sourcegate.settings import Settings  # noqa: E402

LIBS = REPO / ".cache" / "real_train"


def source_results(eval_json: Path):
    """A source's eval output with its questions: the file kept beside it (`PART.questions.jsonl`, a
    sample), else the library's."""
    part = eval_json.stem
    kept = eval_json.with_name(f"{part}.questions.jsonl")
    cases = load_cases(kept if kept.exists() else LIBS / part / "questions.jsonl")
    return results_from_eval_json(json.loads(eval_json.read_text()), cases)


def run_source(results, current, sizes, draws):
    rows = {}
    for n in sizes:
        if n >= len(results) - 10:
            continue
        per = []
        for d in range(draws):
            fit_on, rest = sample_questions(results, n, seed=1000 * n + d)
            before = Replayer(rest).score(current)
            try:
                ad, _, _ = adapt_results(fit_on, current)  # what `sourcegate adapt` would write, or None
            except AdaptError:
                ad = None
            if ad is None:
                after, refused = before, True
            else:
                after, refused = score_adapted(rest, ad, current), False
            per.append((before, after, refused))
        rows[n] = {
            "scored": len(results) - n,
            "before_accuracy": statistics.mean(b["accuracy"] for b, _, _ in per),
            "after_accuracy": statistics.mean(a["accuracy"] for _, a, _ in per),
            "before_unsafe": statistics.mean(b["unsafe_answers"] for b, _, _ in per),
            "after_unsafe": statistics.mean(a["unsafe_answers"] for _, a, _ in per),
            "before_abstained": statistics.mean(b["abstentions"] for b, _, _ in per),
            "after_abstained": statistics.mean(a["abstentions"] for _, a, _ in per),
            "refused": sum(r for _, _, r in per),
        }
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_dirs", type=Path, nargs="+", help="folders of PART.json (`bench_real_train.py --eval-dir E` -> E/this)")
    ap.add_argument("--sizes", default="25,50,100")
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--parts", default=None, help="comma-separated sources (default: every PART.json)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    current = Settings().thresholds()
    files = sorted(f for d in a.eval_dirs for f in d.glob("*.json"))
    if a.parts:
        keep = set(a.parts.split(","))
        files = [f for f in files if f.stem in keep]
    report = {}
    for f in files:
        res = source_results(f)
        report[f.stem] = {"questions": len(res), "sizes": run_source(res, current, sizes, a.draws)}
        print(f"{f.stem}: {len(res)} questions", flush=True)
    print()
    print("| source | N | scored | accuracy before -> after | unsafe before -> after | abstained before -> after | not written |")
    print("|---|---|---|---|---|---|---|")
    for n in sizes:
        gains, halved, worse, rows = [], 0, 0, 0
        for part, r in report.items():
            s = r["sizes"].get(n)
            if not s:
                continue
            rows += 1
            print(f"| {part} | {n} | {s['scored']} | {s['before_accuracy']:.3f} -> {s['after_accuracy']:.3f} | "
                  f"{s['before_unsafe']:.1f} -> {s['after_unsafe']:.1f} | {s['before_abstained']:.1f} -> "
                  f"{s['after_abstained']:.1f} | {s['refused']} |")
            gains.append(s["after_accuracy"] - s["before_accuracy"])
            halved += s["after_unsafe"] <= s["before_unsafe"] / 2
            worse += s["after_accuracy"] < s["before_accuracy"] - 1e-9 or s["after_unsafe"] > s["before_unsafe"]
        if rows:
            b = statistics.mean(r["sizes"][n]["before_accuracy"] for r in report.values() if n in r["sizes"])
            aa = statistics.mean(r["sizes"][n]["after_accuracy"] for r in report.values() if n in r["sizes"])
            bu = sum(r["sizes"][n]["before_unsafe"] for r in report.values() if n in r["sizes"])
            au = sum(r["sizes"][n]["after_unsafe"] for r in report.values() if n in r["sizes"])
            print(f"| **mean, N={n}** | | | **{b:.3f} -> {aa:.3f}** (+{statistics.mean(gains):.3f}) | "
                  f"**{bu:.1f} -> {au:.1f}** (sum) | | unsafe halved in {halved}/{rows}, worse in {worse}/{rows} |")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

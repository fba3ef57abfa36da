"""Questions that ask several things, on the demo corpus with the local judge: the multi-part sets
(bench/multipart/dev.jsonl, blind.jsonl) and the demo's own question sets, each answered with the
planner and with every question taken whole (as before the planner), in one run.

    python bench/bench_parts.py [--sets dev,blind,demo] [--plan-only]

It also times the planner itself on the demo's questions of one part (what it adds to their path);
`--plan-only` does only that.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit
from _demo import DEMO, demo_settings, ingest_corpus, require_local_judge

from sourcegate.evaluation.cases import load_cases
from sourcegate.evaluation.runner import metrics, run_eval
from sourcegate.plan import Part
from sourcegate.service import SourceGate

HERE = Path(__file__).resolve().parent
SETS = {
    "dev": [HERE / "multipart" / "dev.jsonl"],
    "blind": [HERE / "multipart" / "blind.jsonl"],
    "demo": [DEMO / "questions.jsonl", DEMO / "questions.fr.jsonl"],
}


def summary(results) -> dict:
    m = metrics(results)
    keep = ("cases", "accuracy", "status_accuracy", "forbidden_leaks", "unsafe_answers", "sources_multi", "parts")
    out = {k: m[k] for k in keep if k in m}
    out["judge_ms"] = m["latency_ms"].get("judge")
    out["total_ms"] = m["latency_ms"].get("total")
    return out


def time_plan(planned, rounds: int = 20) -> dict:
    """Microseconds of `plan` on the demo questions of one part, after a first call that reads the
    library's identifiers (kept for a minute)."""
    qs = [c.query for path in SETS["demo"] for c in load_cases(path)]
    one = [q for q in qs if len(planned(q)) == 1]
    us = []
    for _ in range(rounds):
        for q in one:
            t0 = time.perf_counter()
            planned(q)
            us.append((time.perf_counter() - t0) * 1e6)
    us.sort()
    return {"questions": len(one), "p50": round(statistics.median(us), 1), "p95": round(us[int(0.95 * len(us))], 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", default="dev,blind,demo")
    ap.add_argument("--plan-only", action="store_true", help="only time the planner on the one-part demo questions")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sg-bench-parts-") as tmp:
        settings = demo_settings(Path(tmp), audit_enabled=False)
        ingest_corpus(settings, DEMO / "corpus")
        gate = SourceGate(settings)
        planned = gate._plan
        data: dict = {"plan_us_one_part": time_plan(planned)}
        if args.plan_only:
            gate.close()
            emit("parts", data, f"plan() on one-part demo questions: p50 {data['plan_us_one_part']['p50']} us, "
                                f"p95 {data['plan_us_one_part']['p95']} us")
            return
        gate._judge = require_local_judge(gate.embedder)
        whole = lambda q: [Part(q)]  # noqa: E731  every question as one part, as before the planner
        for name in args.sets.split(","):
            cases = [c for path in SETS[name] for c in load_cases(path)]
            gate._plan = planned
            with_planner = run_eval(gate, cases)
            gate._plan = whole
            without = run_eval(gate, cases)
            split = [a for a in with_planner if len(planned(a.case.query)) > 1]
            one_part = [(a, b) for a, b in zip(with_planner, without) if len(planned(a.case.query)) == 1]
            data[name] = {
                "with_planner": summary(with_planner), "whole_questions": summary(without),
                "questions_split": len(split),
                # Questions of one part must be decided exactly as before: same status, same documents.
                "one_part_questions": len(one_part),
                "one_part_same_decision": sum(1 for a, b in one_part if (a.status, a.evidence_doc_ids, a.conflict_doc_ids)
                                              == (b.status, b.evidence_doc_ids, b.conflict_doc_ids)),
                "cases": [{"query": a.case.query, "parts": [p["question"] for p in a.parts] or [a.case.query],
                           "status": a.status, "missing": a.missing, "status_whole": b.status,
                           "part_outcomes": a.part_outcomes()} for a, b in zip(with_planner, without)
                          if a.case.expected_parts or len(planned(a.case.query)) > 1],
            }
        gate.close()
    line = "; ".join(
        f"{k}: {v['questions_split']} split, " + (
            f"stated parts answered {v['with_planner']['parts']['stated_answered']}/{v['with_planner']['parts']['parts_stated']} "
            f"(whole: {v['whole_questions']['parts']['stated_answered']}), absent named "
            f"{v['with_planner']['parts']['absent_named_missing']}/{v['with_planner']['parts']['parts_absent']}, cross-part "
            f"{v['with_planner']['parts']['cross_part_answers']}, " if "parts" in v["with_planner"] else "")
        + f"one-part same decision {v['one_part_same_decision']}/{v['one_part_questions']}"
        for k, v in data.items() if k in SETS)
    emit("parts", data, line + f"; plan() on one-part demo questions p50 {data['plan_us_one_part']['p50']} us")


if __name__ == "__main__":
    main()

"""The gate on the seven sources of `../shared/data/real/train` and the project's own sources
(`training/people`), each source's library alone, through the
whole product (`sourcegate ingest`, `sourcegate eval`): accuracy with sources checked, status accuracy,
unsafe answers, per source, per kind and the mean.

    python bench/bench_real_train.py [--compare REF] [--parts pgdocs,scuba] [--fold-weights DIR] [--eval-dir E]
    python bench/bench_real_train.py --parts pgdocs,scuba --sweep E/this [E/REF]   # no run: the kept scores replayed

`--eval-dir E` keeps each source's `sourcegate eval --json` output (E/this/PART.json, E/REF/PART.json);
`--sweep` replays those scores under each evidence threshold (`evaluation.tune.Replayer`, no judge call):
two judges compared at the same number of unsafe answers, not only at the default threshold.

`--fold-weights DIR`: the leave-one-source-out figure. Each source is answered with the local judge's
weights in `DIR/<source>/` (`SOURCEGATE_JUDGE_WEIGHTS`), fitted without that source's questions
(`python -m training.real_heads --loso DIR`). Without it the shipped weights answer every source: a
figure for a library the judge was fitted on, once the shipped heads have seen these questions.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN = REPO.parent / "shared" / "data" / "real" / "train"
SHARED_PARTS = ("etalab", "notify", "openstack-a", "openstack-b", "pgdocs", "scuba", "vitam")
sys.path.insert(0, str(REPO))
from training.people.common import people_sources  # noqa: E402

NEW_PARTS = people_sources()  # the project's own sources (training/people/parts)
PARTS = SHARED_PARTS + NEW_PARTS
LIBS = REPO / ".cache" / "real_train"


def library(part: str) -> Path:
    """One source's library alone (its questions and every passage of every document they name), built once."""
    out = LIBS / part
    parts = list((TRAIN / "parts").glob(f"{part}.*jsonl")) + list((TRAIN / "parts").glob(f"{part}.jsonl")) \
        if part in SHARED_PARTS else list((REPO / "training" / "people" / "parts").glob(f"{part}*.jsonl"))
    built = out / "questions.jsonl"
    if built.exists() and any(p.stat().st_mtime > built.stat().st_mtime for p in parts):
        built.unlink()  # a part changed since: build again
    if not built.exists():
        out.mkdir(parents=True, exist_ok=True)
        if part in SHARED_PARTS:
            cmd = [sys.executable, str(TRAIN / "build.py"), "--only", part, "--out", str(out)]
        else:
            cmd = [sys.executable, "-m", "training.people.check", "--only", part, "--out", str(out)]
        subprocess.run(cmd, check=part in SHARED_PARTS, capture_output=True, cwd=REPO)
        if not (out / "questions.jsonl").exists():
            raise SystemExit(f"could not build the library of {part}")
    return out


def _cli(src: Path) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(src)!r}); from sourcegate.cli import main; main()"]


def questions_file(lib: Path, max_questions: int = 0) -> Path:
    """The library's questions, or a seeded sample of `max_questions` of them (kept beside them)."""
    path = lib / "questions.jsonl"
    if not max_questions:
        return path
    lines = [l for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    if len(lines) <= max_questions:
        return path
    import random

    keep = sorted(random.Random(f"sample:{lib.name}").sample(range(len(lines)), max_questions))
    out = lib / f"questions.sample{max_questions}.jsonl"
    out.write_text("".join(lines[i] + "\n" for i in keep), encoding="utf-8")
    return out


def run_part(src: Path, part: str, label: str, weights: Path | None, eval_dir: Path | None = None,
             max_questions: int = 0, judge_alone: bool = False) -> dict:
    lib = library(part)
    qfile = questions_file(lib, max_questions)
    home = Path(tempfile.mkdtemp(prefix=f"sg-train-{part}-"))
    env = dict(os.environ, SOURCEGATE_HOME=str(home))
    if judge_alone:
        env["ADAPTATION"] = "off"
    if weights is not None:
        env["SOURCEGATE_JUDGE_WEIGHTS"] = str(weights)
    t0 = time.time()
    subprocess.run(_cli(src) + ["ingest", str(lib / "corpus.json")], env=env, check=True, capture_output=True)
    t1 = time.time()
    out = subprocess.run(_cli(src) + ["eval", str(qfile), "--json"], env=env, check=True,
                         capture_output=True, text=True).stdout
    d = json.loads(out)
    if eval_dir is not None:
        eval_dir.mkdir(parents=True, exist_ok=True)
        (eval_dir / f"{part}.json").write_text(out)
        (eval_dir / f"{part}.questions.jsonl").write_text(qfile.read_text(encoding="utf-8"), encoding="utf-8")
    m = d["metrics"]
    return {"part": part, "label": label, "cases": m["cases"], "accuracy": m["accuracy"],
            "status_accuracy": m["status_accuracy"], "unsafe_answers": m["unsafe_answers"],
            "forbidden_leaks": m["forbidden_leaks"], "by_kind": {k: v["accuracy"] for k, v in m["by_kind"].items()},
            "kind_n": {k: v.get("cases", 0) for k, v in m["by_kind"].items()},
            "ingest_s": round(t1 - t0, 1), "eval_s": round(time.time() - t1, 1),
            "judge_p50_ms": m.get("latency_ms", {}).get("judge", {}).get("p50"),
            "failures": [{"id": c.get("id"), "kind": c["kind"], "query": c["query"], "expected": c["expected_status"],
                          "got": c["status"], "evidence": c.get("evidence_doc_ids")} for c in d["cases"] if not c["correct"]]}


def summary(rows: list[dict]) -> dict:
    n = sum(r["cases"] for r in rows)
    kinds: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    for r in rows:
        for k, a in r["by_kind"].items():
            c = r["kind_n"].get(k) or 0
            kinds[k][0] += a * c
            kinds[k][1] += c
    return {"parts": len(rows), "cases": n,
            "mean_accuracy": round(sum(r["accuracy"] for r in rows) / len(rows), 3),
            "mean_status_accuracy": round(sum(r["status_accuracy"] for r in rows) / len(rows), 3),
            "unsafe_answers": sum(r["unsafe_answers"] for r in rows),
            "unsafe_share": round(sum(r["unsafe_answers"] for r in rows) / max(1, n), 3),
            "by_kind": {k: round(v[0] / v[1], 3) for k, v in sorted(kinds.items()) if v[1]}}


def sweep(eval_dir: Path, parts: list[str], thresholds=tuple(x / 100 for x in range(30, 91, 5))):
    """[(evidence_min, summary)]: the kept eval outputs replayed under each evidence threshold
    (`evaluation.tune.Replayer`: routing is pure code over the stored scores, no judge call)."""
    sys.path.insert(0, str(REPO / "src"))
    from dataclasses import replace

    from sourcegate.evaluation.cases import load_cases
    from sourcegate.evaluation.tune import Replayer, results_from_eval_json, summary as tune_summary
    from sourcegate.gate import GateThresholds

    results = []
    for p in parts:
        f = eval_dir / f"{p}.json"
        if f.exists():
            # the questions that run read: the sample kept beside its output (`--max-questions`), else every one
            asked = eval_dir / f"{p}.questions.jsonl"
            cases = load_cases(asked if asked.exists() else library(p) / "questions.jsonl")
            results += results_from_eval_json(json.loads(f.read_text()), cases)
    if not results:
        raise SystemExit(f"{eval_dir}: no kept eval output of {', '.join(parts)} (PART.json, from --eval-dir)")
    rep = Replayer(results)
    return [(t, tune_summary(rep.replay(replace(GateThresholds(), evidence_min=t)))) for t in thresholds]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", metavar="REF", help="also run the checkout of this git ref, in the same run")
    ap.add_argument("--parts", default=",".join(PARTS))
    ap.add_argument("--fold-weights", type=Path, help="answer source S with the judge weights in DIR/S (leave one source out)")
    ap.add_argument("--json", type=Path, help="write every figure and failure here")
    ap.add_argument("--eval-dir", type=Path, help="keep each source's `sourcegate eval --json` output here (DIR/PART.json), "
                                                  "with every candidate's scores, for `--sweep`")
    ap.add_argument("--judge-alone", action="store_true",
                    help="ADAPTATION=off: the judge's own scores, without the shipped decision layer (what "
                         "training/decision_layer.py and sourcegate adapt fit on)")
    ap.add_argument("--max-questions", type=int, default=0,
                    help="a seeded sample of at most this many questions per source (0: all; the sample is kept beside "
                         "the library and, with --eval-dir, beside the eval output as PART.questions.jsonl)")
    ap.add_argument("--sweep", type=Path, nargs="+", metavar="EVAL_DIR",
                    help="no run: from the eval outputs kept in these folders, the gate's accuracy and unsafe answers "
                         "at each evidence threshold (the other thresholds as configured), sources pooled")
    a = ap.parse_args(argv)
    parts = [p for p in a.parts.split(",") if p]
    if a.sweep:
        for d in a.sweep:
            print(f"{d}:")
            for t, sm in sweep(d, parts):
                print(f"   evidence_min {t:.2f}: accuracy {sm['accuracy']:.3f} status {sm['status_accuracy']:.3f} "
                      f"unsafe {sm['unsafe_answers']} ({sm['unsafe_rate']:.1%}) abstentions {sm['abstentions']}")
        return 0
    results: dict[str, list[dict]] = {}
    runs = []
    if a.compare:
        sys.path.insert(0, str(REPO / "bench"))
        from _common import checkout

        with checkout(a.compare) as wt:
            results[a.compare] = [run_part(wt / "src", p, a.compare, None,
                                           a.eval_dir / a.compare if a.eval_dir else None, a.max_questions,
                                           a.judge_alone)
                                  for p in parts]
    label = "this checkout" + (" (leave one source out)" if a.fold_weights else "")
    results[label] = [run_part(REPO / "src", p, label, (a.fold_weights / p) if a.fold_weights else None,
                               a.eval_dir / "this" if a.eval_dir else None, a.max_questions, a.judge_alone)
                          for p in parts]
    for lab, rows in results.items():
        s = summary(rows)
        runs.append({"label": lab, "summary": s, "parts": rows})
        print(f"{lab}: mean accuracy (sources checked) {s['mean_accuracy']:.3f}, status {s['mean_status_accuracy']:.3f}, "
              f"unsafe {s['unsafe_answers']} of {s['cases']} ({s['unsafe_share']:.1%})")
        for r in rows:
            print(f"   {r['part']:12s} accuracy {r['accuracy']:.3f} status {r['status_accuracy']:.3f} unsafe {r['unsafe_answers']:3d} "
                  f"judge p50 {r['judge_p50_ms']} ms")
        print("   by kind: " + ", ".join(f"{k} {v:.2f}" for k, v in s["by_kind"].items()))
    if a.json:
        a.json.write_text(json.dumps(runs, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

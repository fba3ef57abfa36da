"""The judge's decision layer, fitted on people's questions: `src/sourcegate/judges/weights/decision_layer.json`.

    python bench/bench_real_train.py --judge-alone --parts etalab,...,vitam --eval-dir E1     # the shared train sources
    python bench/bench_real_train.py --judge-alone --parts bids,...,zalando-api --max-questions 120 --eval-dir E2
    python bench/bench_decision.py E1/this E2/this --fractions 0.25,0.5,1               # leave one source out
    python -m training.decision_layer E1/this E2/this [--out src/sourcegate/judges/weights/decision_layer.json]

What it fits is `sourcegate.adapt`'s, on every source's stored judge scores at once and without the
document prior (a new library's documents are unknown to it): evidence and contradiction heads that read
each candidate among the question's others, the per-question decision (does any candidate answer) and
the evidence and contradiction thresholds. The service applies it to every answer when the library's
home has no adaptation of its own (`ADAPTATION=auto`); `ADAPTATION=off` answers with the judge alone.
The eval outputs are the shipped judge's answers to `../shared/data/real/train` (CC BY 4.0 and the
sources' own licences, see its LICENCES.md) and to `training/people` (the project's questions, on
sources whose licences are in `training/people/licences/`); `../shared/data/real/dev` is never read.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "sourcegate" / "judges" / "weights" / "decision_layer.json"


def main(argv=None) -> int:
    sys.path.insert(0, str(REPO / "src"))
    sys.path.insert(0, str(REPO / "bench"))
    from bench_adapt import source_results

    from sourcegate.adapt import fit_adaptation
    from sourcegate.settings import Settings

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("eval_dirs", type=Path, nargs="+")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    files = sorted(f for d in a.eval_dirs for f in d.glob("*.json"))
    results, sources = [], {}
    for f in files:
        rs = source_results(f)
        results += rs
        sources[f.stem] = len(rs)
    ad = fit_adaptation(results, Settings(_env_file=None).thresholds(), documents=False)
    ad.id = "shipped-decision-layer"
    ad.created = datetime.now(timezone.utc).date().isoformat()
    ad.labels = {"questions": len(results), "sources": sources,
                 "recipe": "python -m training.decision_layer (see its docstring)"}
    body = ad.to_json()
    a.out.write_text(json.dumps(body, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{a.out}: fitted on {len(results)} questions of {len(sources)} sources; decision min {ad.decision_min}, "
          f"thresholds {ad.thresholds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The reader alone, on the passage that answers, for questions of sources it never trained on: whether its
yes/no head tells yes from no on the settling passage, and whether the sentence holding its best span states
the answer (beside the answer writer's first lexical sentence).

    python bench/bench_reader_readings.py WEIGHTS_DIR --parts px4,cnil-rgpd,cht,openhab,meshtastic,cartesgouv

Reads `training/people` parts and corpora; 200 yes/no and 200 factual questions, seeded.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from sourcegate import text as T  # noqa: E402
from sourcegate.answer import best_sentences  # noqa: E402
from sourcegate.evaluation.runner import states  # noqa: E402
from sourcegate.judges.local.judge import sentence_at  # noqa: E402
from sourcegate.judges.local.reader import Reader  # noqa: E402
from training.people.common import people_questions  # noqa: E402

PEOPLE = REPO / "training" / "people"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("weights", type=Path)
    ap.add_argument("--parts", required=True)
    ap.add_argument("--n", type=int, default=200)
    a = ap.parse_args()
    parts = tuple(a.parts.split(","))
    rd = Reader(a.weights, threads=2)
    passages = {}
    for k in parts:
        for line in (PEOPLE / "corpus" / f"{k}.jsonl").read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            passages[r["id"]] = r
    yes_no, factual = [], []
    for q in people_questions(parts):
        exp = [x for x in q.get("expected_sources") or [] if x in passages]
        if not exp:
            continue
        p = passages[exp[0]]
        if q["kind"] in ("yes_no_yes", "yes_no_no"):
            yes_no.append((q, p))
        elif q["kind"] == "factual" and q.get("answer") and states(p["text"], q["answer"]):
            factual.append((q, p))
    rng = random.Random(5)
    yes_no = rng.sample(yes_no, min(a.n, len(yes_no)))
    factual = rng.sample(factual, min(a.n, len(factual)))
    right, margins = 0, []
    for q, p in yes_no:
        r = rd.read(q["query"], [p["text"]])[0]
        right += (r.p_yes > r.p_no) == (q["kind"] == "yes_no_yes")
        margins.append(abs(r.p_yes - r.p_no))
    c = collections.Counter()
    for q, p in factual:
        t = p["text"]
        r = rd.read(q["query"], [t])[0]
        sents = T.split_sentences(t, max_sentences=200, min_chars=1)
        s = sentence_at(sents, t, r.span_start, r.span_end) if r.span_start >= 0 else None
        lex = best_sentences(q["query"], t, 1, p.get("title", ""))
        c["span"] += bool(s and states(s, q["answer"]))
        c["lexical"] += bool(lex and states(lex[0], q["answer"]))
    n_yn, n_f = max(1, len(yes_no)), max(1, len(factual))
    print(json.dumps({
        "weights": str(a.weights), "parts": parts,
        "yes_no_questions": len(yes_no), "yes_no_direction_right": round(right / n_yn, 3),
        "always_no_right": round(sum(q["kind"] == "yes_no_no" for q, _ in yes_no) / n_yn, 3),
        "median_yes_no_margin": round(float(np.median(margins)), 3) if margins else None,
        "factual_questions": len(factual), "span_sentence_states_answer": round(c["span"] / n_f, 3),
        "lexical_first_sentence_states_answer": round(c["lexical"] / n_f, 3),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

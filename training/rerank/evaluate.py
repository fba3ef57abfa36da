"""Recall of an answering passage among the candidates, with the pool reordered by a reranker's
held-out scores (`train.py --hold-out`), beside the product's fused order on the same pools.

    python -m training.rerank.evaluate [--pools .cache/rerank/pools-30.jsonl] SCORES.json [...]

Each scores file holds, per question of the sources its model did not train on, one score per passage
of the fused pool's first `RERANK_DEPTH`. Orders compared: the fused order; the reranker alone; and
fused + w x reranker for a few w (the reranker's logit is on its own scale; the fused score is ~0-1).
Figures per kind, per language direction and per source, for `--k` candidates (12).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from .common import CACHE, RERANK_DEPTH, corpus, load_pools

WEIGHTS = (0.0, 0.02, 0.05, 0.1, 0.2, None)  # None: the reranker alone


def lang_of() -> dict[str, str]:
    return {pid: r.get("lang", "?") for pid, r in corpus().items()}


def order(pool: list[dict], scores: list[float] | None, w: float | None, depth: int = RERANK_DEPTH) -> list[dict]:
    head = pool[:depth]
    if scores is None or w == 0.0:
        return pool
    key = (lambda i: scores[i]) if w is None else (lambda i: head[i]["score"] + w * scores[i])
    idx = sorted(range(len(head)), key=lambda i: -key(i))
    return [head[i] for i in idx] + pool[depth:]


def found(pool: list[dict], expected: set[str], k: int) -> bool:
    return any(c["doc"] in expected for c in pool[:k])


def nested_weight(rows: list[dict], scores: dict[str, list[float]], k: int, depth: int) -> dict[str, float]:
    """For each source, the weight that the other sources' held-out scores prefer (a choice made without
    the source it is applied to)."""
    parts = sorted({r["part"] for r in rows})
    out = {}
    for p in parts:
        others = [r for r in rows if r["part"] != p]
        best = max((w for w in WEIGHTS if w), key=lambda w: (sum(found(order(r["pool"], scores.get(r["id"]), w, depth),
                                                                          set(r["expected_sources"]), k) for r in others), -w))
        out[p] = best
    return out


def report(rows: list[dict], scores: dict[str, list[float]], k: int = 12, depth: int = RERANK_DEPTH) -> dict:
    langs = lang_of()
    out = {}
    chosen = nested_weight(rows, scores, k, depth)
    out["weights chosen"] = chosen
    for w in (*WEIGHTS, "nested"):
        name = "fused" if w == 0.0 else ("rerank alone" if w is None else ("nested weight" if w == "nested" else f"fused+{w}xrerank"))
        groups = collections.defaultdict(list)
        for r in rows:
            exp = set(r["expected_sources"])
            wq = chosen[r["part"]] if w == "nested" else w
            hit = found(order(r["pool"], scores.get(r["id"]), wq, depth), exp, k)
            direction = f"{r.get('lang')}->{'+'.join(sorted({langs.get(s, '?') for s in exp}))}"
            for key in ("all", f"kind:{r['kind']}", f"dir:{direction}", f"part:{r['part']}"):
                groups[key].append(hit)
        out[name] = {g: [round(sum(v) / len(v), 3), len(v)] for g, v in sorted(groups.items())}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scores", type=Path, nargs="+")
    ap.add_argument("--pools", type=Path, default=CACHE / "pools-30.jsonl")
    ap.add_argument("--k", type=int, default=12)
    ap.add_argument("--depth", type=int, default=RERANK_DEPTH, help="how many of the fused pool the reranker orders")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    scores = {}
    for f in a.scores:
        scores.update(json.loads(f.read_text()))
    rows = [r for r in load_pools(a.pools) if r["id"] in scores]
    rep = report(rows, scores, a.k, a.depth)
    print("weights chosen without the source:", rep["weights chosen"])
    for name, g in rep.items():
        if name == "weights chosen":
            continue
        print(f"{name:>18}: all {g['all'][0]} ({g['all'][1]})  " + " ".join(f"{k}={v[0]}" for k, v in g.items() if k != "all"))
    if a.json:
        a.json.write_text(json.dumps(rep, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Gate latency with the local judge (judge 12 candidates + route) and end-to-end `ask` latency on
the demo corpus.

    python bench/bench_gate.py [--repeats 5] [--questions FILE.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit, lat, peak_rss_mb
from _demo import (
    DEMO,
    demo_questions,
    demo_settings,
    ingest_corpus,
    require_local_judge,
)

from sourcegate.gate import apply_gate
from sourcegate.judges import JudgeInput
from sourcegate.retrieve import is_multi_document
from sourcegate.service import SourceGate

GOAL_GATE_P95_MS = 150.0
GOAL_ASK_P95_MS = 300.0
CANDIDATES = 12


def twelve_candidates(gate: SourceGate, query: str):
    """The retrieved candidates, topped up with the nearest other chunks so every query judges 12."""
    cands, _ = gate.retriever.retrieve(query)
    if len(cands) < CANDIDATES:
        qv = gate.embedder.embed([query])[0]
        have = {c.id for c in cands}
        extra = [cid for cid, _ in gate.store.dense_search(qv, 3 * CANDIDATES) if cid not in have]
        more = gate.store.get_chunks(extra[: CANDIDATES - len(cands)])
        vecs = gate.store.get_vectors([c.id for c in more])
        for c in more:  # as the retriever does: the judge reuses stored vectors instead of embedding again
            c.embedding = vecs.get(c.id)
        cands += more
    return cands[:CANDIDATES]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-reader", action="store_true", help="the local judge without its reader and yes/no stages")
    ap.add_argument("--compare", action="store_true",
                    help="also time the judge without its reader stage, interleaved")
    ap.add_argument("--threads", type=int, default=0,
                    help="BLAS threads of the embedder (0: the package default, UseEmbedder's 2)")
    ap.add_argument("--questions", type=Path, default=None,
                    help="a JSONL file of {\"query\": ...} to time instead of the 27 original demo questions "
                         "(e.g. only the questions of one part, to compare versions of the code in one run)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sg-bench-gate-") as tmp:
        settings = demo_settings(Path(tmp))
        chunks = ingest_corpus(settings, DEMO / "corpus")
        from sourcegate.embed import UseEmbedder

        gate = SourceGate(settings, embedder=UseEmbedder(threads=args.threads) if args.threads else None)
        judge = require_local_judge(gate.embedder, reader=not args.no_reader)
        gate._judge = judge
        questions = demo_questions() if args.questions is None else [
            json.loads(line)["query"] for line in args.questions.read_text(encoding="utf-8").splitlines() if line.strip()]
        gate_ms, judge_ms, sizes, plain_ms, read = [], [], [], [], []
        plain = None
        if args.compare:
            from sourcegate.judges.local import LocalJudge

            plain = LocalJudge(embedder=gate.embedder, reader=False)
        for q in questions:
            cands = twelve_candidates(gate, q)
            inputs = [JudgeInput(id=c.id, text=c.text, title=c.title, source_type=c.source_type, status=c.status,
                                 version=c.version, passage_features=c.passage_features, embedding=c.embedding)
                      for c in cands]
            judge.judge(q, inputs)  # warm caches for this query shape
            if plain is not None:
                plain.judge(q, inputs)
            for _ in range(args.repeats):
                if plain is not None:
                    with Timer() as tp:
                        plain.judge(q, inputs)
                    plain_ms.append(tp.ms)
                with Timer() as tg:
                    with Timer() as tj:
                        res = judge.judge(q, inputs)
                    apply_gate([(c.id, c.doc_id, r.scores) for c, r in zip(cands, res.results)], gate.thresholds,
                               8 if is_multi_document(q) else 5)
                gate_ms.append(tg.ms)
                judge_ms.append(tj.ms)
                read.append(res.usage.get("passages_read", 0))
                sizes.append(len(cands))
        for q in questions[:3]:
            gate.ask(q, interface="bench")  # warm-up
        ask_ms, ask_sizes, stages = [], [], {}
        for _ in range(args.repeats):
            for q in questions:
                with Timer() as ta:
                    r = gate.ask(q, interface="bench")
                ask_ms.append(ta.ms)
                ask_sizes.append(len(r.evidence) + len(r.conflicts) + len(r.excluded))
                for k, v in r.timings_ms.items():
                    stages.setdefault(k, []).append(v)
        gate.close()
    g95, a95 = lat(gate_ms)["p95"], lat(ask_ms)["p95"]
    data = {
        "embedder_threads": args.threads or "default",
        "judge": judge.name if hasattr(judge, "name") else type(judge).__name__, "demo_chunks": chunks,
        "candidates_per_query": round(sum(sizes) / len(sizes), 1),
        "ask_candidates_per_query": round(sum(ask_sizes) / len(ask_sizes), 1),
        "judge_model": judge.model_id, "passages_read_per_query": round(sum(read) / max(1, len(read)), 1),
        "gate_ms": lat(gate_ms), "judge_ms": lat(judge_ms), "ask_ms": lat(ask_ms),
        "judge_ms_without_reader": lat(plain_ms) if plain_ms else None,
        "ask_stages_ms": {k: lat(v) for k, v in stages.items()}, "peak_rss_mb": peak_rss_mb(),
        "goal_gate_p95_ms": GOAL_GATE_P95_MS, "goal_ask_p95_ms": GOAL_ASK_P95_MS,
        "goal_gate_met": g95 <= GOAL_GATE_P95_MS, "goal_ask_met": a95 <= GOAL_ASK_P95_MS,
    }
    emit("gate", data, f"gate (judge {CANDIDATES} + route) p50/p95 {lat(gate_ms)['p50']}/{g95} ms "
         f"(goal {GOAL_GATE_P95_MS:.0f}: {'met' if g95 <= GOAL_GATE_P95_MS else 'MISSED'}); ask p50/p95 "
         f"{lat(ask_ms)['p50']}/{a95} ms (goal {GOAL_ASK_P95_MS:.0f}: {'met' if a95 <= GOAL_ASK_P95_MS else 'MISSED'})")


if __name__ == "__main__":
    main()

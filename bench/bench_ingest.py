"""Ingest throughput, end to end (parse, chunk, embed with the multilingual embedder, write),
on a generated corpus of maintenance procedures written as Markdown files.

    python bench/bench_ingest.py [--docs 150] [--threads 1]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, peak_rss_mb, procedure_text

from sourcegate.embed import UseEmbedder
from sourcegate.ingest.pipeline import Ingestor
from sourcegate.store.sqlite import SqliteStore

GOAL_CHUNKS_PER_S = 100.0

_worker_embedder = None


def _embed_in_worker(texts: list[str]):
    global _worker_embedder
    if _worker_embedder is None:
        _worker_embedder = UseEmbedder(threads=1)
    return _worker_embedder.embed(texts)


class PoolEmbedder:
    """The multilingual embedder spread over worker processes, one BLAS thread each: the tokenizer
    is pure Python (GIL-bound), so processes, not threads, use both cores. A candidate fix to
    propose for ingestion, measured here without changing the package."""

    id = UseEmbedder.id
    dim = UseEmbedder.dim

    def __init__(self, workers: int):
        from concurrent.futures import ProcessPoolExecutor

        self.workers = workers
        self.pool = ProcessPoolExecutor(workers)

    def warm(self) -> None:
        list(self.pool.map(_embed_in_worker, [["warm up"]] * self.workers))

    def embed(self, texts: list[str]):
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        step = -(-len(texts) // self.workers)
        parts = [texts[i:i + step] for i in range(0, len(texts), step)]
        return np.vstack(list(self.pool.map(_embed_in_worker, parts)))


def write_corpus(root: Path, docs: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    total = 0
    for i in range(docs):
        title, body = procedure_text(rng, paragraphs=12)
        text = f"# {title}\n\n{body}\n"
        (root / f"proc-{i:04d}.md").write_text(text, encoding="utf-8")
        total += len(text)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=150)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of the embedder (UseEmbedder default: 1)")
    ap.add_argument("--workers", type=int, default=0,
                    help="embed in N worker processes (1 BLAS thread each) instead of in-process")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sg-bench-ingest-") as tmp:
        root = Path(tmp) / "corpus"
        root.mkdir()
        chars = write_corpus(root, args.docs)
        embedder = PoolEmbedder(args.workers) if args.workers else UseEmbedder(threads=args.threads)
        t0 = time.perf_counter()
        # Model load, reported apart from the throughput.
        embedder.warm() if args.workers else embedder.embed(["warm up"])
        load_s = time.perf_counter() - t0
        store = SqliteStore(Path(tmp) / "index.db", embedder.id, embedder.dim)
        ing = Ingestor(store, embedder)
        t1 = time.perf_counter()
        report = ing.ingest([root])
        wall = time.perf_counter() - t1
        store.close()
    rate = report.chunks / wall if wall else 0.0
    data = {
        "docs": args.docs, "chars": chars, "chunks": report.chunks, "failed": len(report.failed),
        "embedder": embedder.id, "embedder_threads": 1 if args.workers else args.threads, "workers": args.workers,
        "model_load_s": round(load_s, 2), "ingest_s": round(wall, 2), "chunks_per_s": round(rate, 1),
        "chunks_per_s_including_model_load": round(report.chunks / (wall + load_s), 1),
        "peak_rss_mb": peak_rss_mb(), "goal_chunks_per_s": GOAL_CHUNKS_PER_S, "goal_met": rate >= GOAL_CHUNKS_PER_S,
    }
    emit("ingest", data, f"{report.chunks} chunks in {wall:.1f} s = {rate:.1f} chunks/s "
         f"(goal {GOAL_CHUNKS_PER_S:.0f}: {'met' if rate >= GOAL_CHUNKS_PER_S else 'MISSED'}), "
         f"model load {load_s:.1f} s, peak RSS {data['peak_rss_mb']} MB (main process), "
         f"{'%d worker processes' % args.workers if args.workers else 'threads %d' % args.threads}")


if __name__ == "__main__":
    main()

"""Retrieval latency at 1k, 10k and 100k chunks: dense search, lexical (FTS5 BM25) search and the
full hybrid retrieve with the query embedding included; index build time, DB size, serving RSS.

Vectors: the real multilingual embedder embeds a sample of the generated chunks (--sample,
default 512); every chunk gets the vector of one sampled chunk plus Gaussian noise, re-normalised.
That keeps 512-d vectors with the real embedder's geometry while making 100k chunks affordable
(embedding 100k chunks on 2 cores would take over half an hour). Query vectors and the hybrid
retrieve use the real embedder on real query text.

    python bench/bench_retrieval.py [--sizes 1000,10000,100000] [--workdir /tmp/sourcegate-bench] [--rebuild]

Indexes are kept in --workdir and reused by later runs (pass --rebuild to time the build again).
Each size is served and measured in a fresh process so its RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit, lat, peak_rss_mb, procedure_text, queries

from sourcegate.embed import UseEmbedder
from sourcegate.ingest.chunker import chunk_document
from sourcegate.models import Document
from sourcegate.retrieve import RetrievalSettings, Retriever
from sourcegate.store import SearchFilters
from sourcegate.store.sqlite import SqliteStore

GOAL_P95_MS = 60.0
GOAL_RSS_MB = 1536.0


def build(path: Path, n_chunks: int, sample: int, threads: int, seed: int = 3) -> dict:
    """Write generated documents until `n_chunks` chunks are indexed."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    embedder = UseEmbedder(threads=threads)
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store = SqliteStore(path, embedder.id, embedder.dim)
    base: np.ndarray | None = None
    t0 = time.perf_counter()
    embed_s = 0.0
    written, d = 0, 0
    while written < n_chunks:
        title, body = procedure_text(rng, paragraphs=rng.randint(8, 15))
        status = "archived" if rng.random() < 0.05 else "current"
        doc = Document(id=f"DOC-{d:06d}", title=title, text=body, source_type="procedure", version="1", status=status,
                       content_hash=f"h{d}")
        chunks = chunk_document(doc)[: n_chunks - written]
        if base is None or len(base) < sample:
            te = time.perf_counter()
            real = embedder.embed([c.text for c in chunks])
            embed_s += time.perf_counter() - te
            base = real if base is None else np.vstack([base, real])
            vecs = real
        else:
            picks = base[nprng.integers(0, len(base), len(chunks))]
            vecs = picks + nprng.normal(0, 0.02, picks.shape).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.upsert_document(doc, chunks, vecs.astype(np.float32))
        written += len(chunks)
        d += 1
    build_s = time.perf_counter() - t0
    backend = store.vector_backend
    store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    return {"chunks": written, "documents": d, "build_s": round(build_s, 1), "real_embedding_s": round(embed_s, 1),
            "real_vectors": len(base), "vector_backend": backend}


def serve(path: Path, n_queries: int, threads: int) -> dict:
    """Open the index as a server would and time the three searches (run in a fresh process)."""
    embedder = UseEmbedder(threads=threads)
    store = SqliteStore(path, embedder.id, embedder.dim)
    retriever = Retriever(store, embedder, RetrievalSettings())
    qs = queries(n_queries + 5)
    filters = SearchFilters(exclude_status=("archived",))
    embed_ms, dense_ms, lex_ms, hybrid_ms = [], [], [], []
    for i, q in enumerate(qs):
        with Timer() as t:
            qv = embedder.embed([q])[0]
        with Timer() as td:
            store.dense_search(qv, 15, filters)
        with Timer() as tl:
            store.lexical_search(q, 15, filters)
        with Timer() as th:
            cands, _ = retriever.retrieve(q)
        if i >= 5:  # the first queries warm the page cache and the model
            embed_ms.append(t.ms)
            dense_ms.append(td.ms)
            lex_ms.append(tl.ms)
            hybrid_ms.append(th.ms)
    out = {"embed_query_ms": lat(embed_ms), "dense_ms": lat(dense_ms), "lexical_ms": lat(lex_ms),
           "hybrid_retrieve_ms": lat(hybrid_ms), "candidates": len(cands), "vector_backend": store.vector_backend,
           "serving_peak_rss_mb": peak_rss_mb()}
    store.close()
    return out


def db_size_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 1e6, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sourcegate-bench"))
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--sample", type=int, default=512, help="chunks embedded with the real embedder")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of the query embedder")
    ap.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # internal: measure one index, print JSON
    args = ap.parse_args()
    if args.serve:
        print(json.dumps(serve(args.serve, args.queries, args.threads)))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in [int(x) for x in args.sizes.split(",")]:
        path = args.workdir / f"retrieval-{n}.db"
        meta_path = args.workdir / f"retrieval-{n}.json"
        if args.rebuild or not path.exists() or not meta_path.exists():
            meta = build(path, n, args.sample, args.threads)
            meta_path.write_text(json.dumps(meta))
        else:
            meta = {**json.loads(meta_path.read_text()), "reused": True}
        proc = subprocess.run([sys.executable, __file__, "--serve", str(path), "--queries", str(args.queries),
                               "--threads", str(args.threads)], capture_output=True, text=True, check=True)
        res = json.loads(proc.stdout.strip().splitlines()[-1])
        rows.append({"size": n, **meta, "db_mb": db_size_mb(path), **res})
    big = rows[-1]
    p95 = big["hybrid_retrieve_ms"]["p95"]
    rss = big["serving_peak_rss_mb"]
    data = {"sizes": rows, "goal_p95_ms": GOAL_P95_MS, "goal_rss_mb": GOAL_RSS_MB,
            "goal_p95_met": p95 <= GOAL_P95_MS, "goal_rss_met": rss <= GOAL_RSS_MB}
    line = "; ".join(f"{r['size']:,}: hybrid p50/p95 {r['hybrid_retrieve_ms']['p50']}/{r['hybrid_retrieve_ms']['p95']} ms "
                     f"(dense p95 {r['dense_ms']['p95']}, lexical p95 {r['lexical_ms']['p95']}, embed p95 "
                     f"{r['embed_query_ms']['p95']}), build {r['build_s']} s, {r['db_mb']} MB, RSS {r['serving_peak_rss_mb']} MB"
                     for r in rows)
    verdict = (f"goal p95 <= {GOAL_P95_MS:.0f} ms at {big['size']:,}: {'met' if p95 <= GOAL_P95_MS else 'MISSED by %.0f ms' % (p95 - GOAL_P95_MS)}; "
               f"RSS <= {GOAL_RSS_MB:.0f} MB: {'met' if rss <= GOAL_RSS_MB else 'MISSED'}")
    emit("retrieval", data, line + " | " + verdict)


if __name__ == "__main__":
    main()

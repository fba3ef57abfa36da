"""Candidate fixes for retrieval at 100k chunks, measured on the index bench_retrieval.py built
(run that first). Nothing in the package changes; each fix is a prototype of a store change.

Dense (top 15, status filter as the retriever applies it):
- sqlite-vec float[512] as shipped (baseline, brute force in SQLite);
- sqlite-vec bit[512] (binary quantisation) for a coarse top 120, rescored exactly with the float vectors;
- numpy: the float32 matrix held in memory (205 MB at 100k), one BLAS matrix-vector product.
(int8 in numpy was tried and dropped: numpy's integer matmul has no BLAS path and is slower than float32.)
Lexical (top 15):
- FTS5 OR of every query term (baseline);
- the same without terms found in more than 5 % of chunks (their BM25 weight is near zero but each
  of them makes SQLite score most of the index); identifiers and rare terms are always kept.
Recall@15 is measured against the exact baseline of each search.

    python bench/bench_store_fixes.py [--db /tmp/sourcegate-bench/retrieval-100000.db]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Timer, emit, lat, peak_rss_mb, queries

from sourcegate.embed import UseEmbedder
from sourcegate.store import SearchFilters
from sourcegate.store.sqlite import SqliteStore, fts_query

K = 15


def load_matrix(store: SqliteStore) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rows = store._conn.execute("SELECT rowid, embedding, status FROM chunks_vec").fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1).copy()
    ok = np.array([r[2] != "archived" for r in rows])
    return ids, mat, ok


def build_bit_table(store: SqliteStore) -> None:
    c = store._conn
    if c.execute("SELECT name FROM sqlite_master WHERE name='bench_vec_bit'").fetchone():
        return
    c.execute(f"CREATE VIRTUAL TABLE bench_vec_bit USING vec0(embedding bit[{store.dim}], status text)")
    c.execute("BEGIN")
    c.execute("INSERT INTO bench_vec_bit(rowid, embedding, status) SELECT rowid, vec_quantize_binary(embedding), status FROM chunks_vec")
    c.execute("COMMIT")


def dense_bit(store: SqliteStore, q: np.ndarray, coarse: int = 120) -> list[int]:
    c = store._conn
    rows = c.execute("SELECT rowid FROM bench_vec_bit WHERE embedding MATCH vec_quantize_binary(?) AND k = ? AND status != 'archived'",
                     [q.tobytes(), coarse]).fetchall()
    ids = [r[0] for r in rows]
    vecs = c.execute(f"SELECT rowid, embedding FROM chunks_vec WHERE rowid IN ({','.join('?' * len(ids))})", ids).fetchall()
    m = np.frombuffer(b"".join(v[1] for v in vecs), dtype=np.float32).reshape(len(vecs), -1)
    order = np.argsort(-(m @ q))[:K]
    return [vecs[i][0] for i in order]


def dense_numpy(ids: np.ndarray, mat: np.ndarray, ok: np.ndarray, q: np.ndarray) -> list[int]:
    s = mat @ q
    s[~ok] = -np.inf
    top = np.argpartition(-s, K)[:K]
    return [int(ids[i]) for i in top[np.argsort(-s[top])]]


_DF: dict[str, int] = {}


def pruned_fts(store: SqliteStore, query: str, n_chunks: int, max_share: float = 0.05) -> str | None:
    m = fts_query(query)
    if not m:
        return None
    terms = m.split(" OR ")
    for t in terms:
        if t not in _DF:  # document frequencies change slowly: cache them per process
            _DF[t] = store._conn.execute("SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (t,)).fetchone()[0]
    keep = [t for t in terms if " " in t or _DF[t] <= max_share * n_chunks]
    rare = sorted(terms, key=lambda t: _DF[t])[:2]
    return " OR ".join(dict.fromkeys(keep + rare))


def lexical(store: SqliteStore, match: str) -> list[str]:
    sql = ("SELECT c.id FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid WHERE chunks_fts MATCH ? "
           "AND c.status != 'archived' ORDER BY bm25(chunks_fts) LIMIT ?")
    return [r[0] for r in store._conn.execute(sql, [match, K]).fetchall()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path("/tmp/sourcegate-bench/retrieval-100000.db"))
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    if not args.db.exists():
        raise SystemExit(f"no index at {args.db}: run bench/bench_retrieval.py first")
    emb = UseEmbedder(threads=1)
    store = SqliteStore(args.db, emb.id, emb.dim)
    n = store._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    with Timer() as tb:
        build_bit_table(store)
    with Timer() as tl:
        ids, mat, ok = load_matrix(store)
    qs = queries(args.queries, seed=11)
    qv = emb.embed(qs)
    t: dict[str, list[float]] = {k: [] for k in ("vec_float", "vec_bit_rescore", "numpy_f32",
                                                  "fts_all_terms", "fts_pruned")}
    rec: dict[str, list[float]] = {k: [] for k in t}
    filters = SearchFilters(exclude_status=("archived",))
    for i, (q, v) in enumerate(zip(qs, qv)):
        with Timer() as a:
            base = store.dense_search(v, K, filters)
        rid = dict(store._conn.execute(f"SELECT id, rowid FROM chunks WHERE id IN ({','.join('?' * len(base))})",
                                       [b[0] for b in base]).fetchall())
        exact = {rid[b[0]] for b in base}
        with Timer() as b:
            r_bit = dense_bit(store, v)
        with Timer() as c:
            r_np = dense_numpy(ids, mat, ok, v)
        match = fts_query(q)
        with Timer() as e:
            full = lexical(store, match)
        with Timer() as f:
            pr = lexical(store, pruned_fts(store, q, n))
        if i < 3:
            continue  # warm-up
        for k, timer in zip(t, (a, b, c, e, f)):
            t[k].append(timer.ms)
        rec["vec_float"].append(1.0)
        rec["vec_bit_rescore"].append(len(exact & set(r_bit)) / K)
        rec["numpy_f32"].append(len(exact & set(r_np)) / K)
        rec["fts_all_terms"].append(1.0)
        rec["fts_pruned"].append(len(set(full) & set(pr)) / max(1, len(full)))
    store.close()
    out = {"chunks": n, "bit_table_build_s": round(tb.ms / 1000, 1), "matrix_load_s": round(tl.ms / 1000, 1),
           "numpy_f32_matrix_mb": round(mat.nbytes / 1e6, 1), "peak_rss_mb": peak_rss_mb(),
           "methods": {k: {"ms": lat(v), f"recall_at_{K}": round(float(np.mean(rec[k])), 3)} for k, v in t.items()}}
    emit("store_fixes", out, "; ".join(f"{k} p95 {lat(v)['p95']} ms recall {round(float(np.mean(rec[k])), 3)}"
                                       for k, v in t.items()) + f" (at {n:,} chunks, RSS {out['peak_rss_mb']} MB)")


if __name__ == "__main__":
    main()

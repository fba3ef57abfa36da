"""Embedded index: one SQLite file with FTS5 (BM25) for lexical search and sqlite-vec for vectors.

Python builds differ: some `sqlite3` modules cannot load extensions (no `enable_load_extension`).
We use the standard module when it can, `pysqlite3` when it is installed, and otherwise keep the
vectors in a plain table and scan them with numpy (exact, slower at scale, same results).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..models import Candidate, Chunk, Document
from .base import DocumentRecord, SearchFilters, StoreStats

log = logging.getLogger(__name__)


def _connect(path: str, prefer: str = "auto"):
    """Return (connection, vector_backend) where vector_backend is 'sqlite-vec' or 'numpy'."""
    modules = []
    import sqlite3

    modules.append(sqlite3)
    try:
        from pysqlite3 import dbapi2 as pysqlite3  # type: ignore

        modules.insert(0, pysqlite3)
    except ImportError:
        pass
    for mod in modules if prefer != "numpy" else []:
        conn = mod.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
        if hasattr(conn, "enable_load_extension"):
            try:
                import sqlite_vec

                conn.enable_load_extension(True)
                sqlite_vec.load(conn)
                conn.enable_load_extension(False)
                return conn, "sqlite-vec"
            except Exception as e:  # extension not loadable on this build
                log.debug("sqlite-vec not loadable with %s: %s", mod.__name__, e)
        conn.close()
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    if prefer == "numpy":
        return conn, "numpy"
    log.warning(
        "sqlite-vec cannot be loaded by this Python's sqlite3; using exact numpy vector search "
        "(install pysqlite3-binary for the faster index)"
    )
    return conn, "numpy"


_STOP = set(
    """a an the of to in on for and or is are be do does i my we our it this that with at by from how what
    when which who whom why where can should must need much many often there their them as was were will
    le la les un une des du de d l et ou est sont en au aux pour par sur avec dans que qui quoi quel quelle
    quels quelles comment combien faut il elle on ne pas se sa son ses ce cette ces y""".split()
)
_TOKEN = re.compile(r"[\w]+(?:[-/.][\w]+)*", re.UNICODE)


def fts_query(text: str) -> str | None:
    """An FTS5 OR-query of the query's meaningful terms. Identifiers such as "P-200" or "E-47"
    become exact phrases ("p 200"), so they are matched as a unit."""
    terms: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        parts = [p for p in re.split(r"[-/.]", tok) if p]
        if len(parts) > 1 and any(ch.isdigit() for ch in tok):
            terms.append('"' + " ".join(parts) + '"')
            continue
        for p in parts:
            if p not in _STOP and (len(p) > 1 or p.isdigit()):
                terms.append('"' + p + '"')
    seen, uniq = set(), []
    for t in terms:
        if t not in seen:
            seen.add(t)
            uniq.append(t)
    return " OR ".join(uniq) if uniq else None


MIGRATIONS: list[tuple[str, list[str]]] = [
    (
        "0001_documents_and_chunks",
        [
            """CREATE TABLE documents (
                id TEXT PRIMARY KEY, title TEXT NOT NULL, url TEXT, source_type TEXT, version TEXT,
                status TEXT NOT NULL DEFAULT 'current', updated_at TEXT, content_hash TEXT NOT NULL,
                source_path TEXT, chunk_count INTEGER NOT NULL DEFAULT 0, ingested_at TEXT NOT NULL)""",
            """CREATE TABLE chunks (
                rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE,
                doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
                ordinal INTEGER NOT NULL, text TEXT NOT NULL, page INTEGER, heading TEXT,
                status TEXT NOT NULL, features TEXT)""",
            "CREATE INDEX chunks_doc ON chunks(doc_id)",
            "CREATE INDEX documents_status ON documents(status)",
            """CREATE VIRTUAL TABLE chunks_fts USING fts5(text, title, tokenize='porter unicode61 remove_diacritics 2')""",
        ],
    ),
]


class SqliteStore:
    def __init__(self, path: Path, embedder_id: str, dim: int, vector_backend: str = "auto"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.embedder_id = embedder_id
        self.dim = dim
        self._lock = threading.RLock()
        self._conn, self.vector_backend = _connect(str(self.path), vector_backend)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._np_cache: tuple[np.ndarray, np.ndarray, list[str]] | None = None
        self._migrate()

    # -- schema -------------------------------------------------------------------------------
    def _migrate(self) -> None:
        c = self._conn
        with self._lock:
            c.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            done = {r[0] for r in c.execute("SELECT name FROM schema_migrations")}
            vec_sql = (
                f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{self.dim}] distance_metric=cosine, "
                "status text, source_type text, version text)"
                if self.vector_backend == "sqlite-vec"
                else "CREATE TABLE chunks_vec (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL, status TEXT, source_type TEXT, version TEXT)"
            )
            migrations = MIGRATIONS + [("0002_vectors", [vec_sql])]
            for name, statements in migrations:
                if name in done:
                    continue
                c.execute("BEGIN IMMEDIATE")
                try:
                    for s in statements:
                        c.execute(s)
                    c.execute(
                        "INSERT INTO schema_migrations VALUES (?, ?)", (name, datetime.now(timezone.utc).isoformat())
                    )
                    c.execute("COMMIT")
                except Exception:
                    c.execute("ROLLBACK")
                    raise
            row = c.execute("SELECT value FROM meta WHERE key='vector_backend'").fetchone()
            if row and row[0] != self.vector_backend:
                raise RuntimeError(
                    f"The index {self.path} was built with vector backend {row[0]!r} but this Python offers "
                    f"{self.vector_backend!r}. Install pysqlite3-binary (or rebuild the index with a fresh SOURCEGATE_HOME)."
                )
            stored = dict(c.execute("SELECT key, value FROM meta").fetchall())
            if "embedder" in stored and (stored["embedder"] != self.embedder_id or int(stored["dim"]) != self.dim):
                raise RuntimeError(
                    f"The index {self.path} was built with embedder {stored['embedder']} ({stored['dim']}-d), not "
                    f"{self.embedder_id}. Use the same SOURCEGATE_EMBEDDER or a fresh SOURCEGATE_HOME."
                )
            for k, v in (("embedder", self.embedder_id), ("dim", str(self.dim)), ("vector_backend", self.vector_backend)):
                c.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (k, v))

    # -- writes -------------------------------------------------------------------------------
    def _delete_chunks(self, doc_id: str) -> None:
        c = self._conn
        rowids = [r[0] for r in c.execute("SELECT rowid FROM chunks WHERE doc_id=?", (doc_id,))]
        for rid in rowids:
            c.execute("DELETE FROM chunks_fts WHERE rowid=?", (rid,))
            c.execute("DELETE FROM chunks_vec WHERE rowid=?", (rid,))
        c.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        self._np_cache = None

    def upsert_document(self, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
                        features: list[dict | None] | None = None, source_path: str | None = None) -> None:
        if len(chunks) != len(vectors):
            raise ValueError("one vector per chunk is required")
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(chunks) and vectors.shape[1] != self.dim:
            raise ValueError(f"vectors have dimension {vectors.shape[1]}, the index expects {self.dim}")
        features = features or [None] * len(chunks)
        status = doc.status or "current"
        now = datetime.now(timezone.utc).isoformat()
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                self._delete_chunks(doc.id)
                c.execute(
                    """INSERT INTO documents (id, title, url, source_type, version, status, updated_at, content_hash,
                       source_path, chunk_count, ingested_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)
                       ON CONFLICT(id) DO UPDATE SET title=excluded.title, url=excluded.url,
                       source_type=excluded.source_type, version=excluded.version, status=excluded.status,
                       updated_at=excluded.updated_at, content_hash=excluded.content_hash,
                       source_path=excluded.source_path, chunk_count=excluded.chunk_count, ingested_at=excluded.ingested_at""",
                    (doc.id, doc.title, doc.url, doc.source_type, doc.version, status, doc.updated_at,
                     doc.content_hash, source_path, len(chunks), now),
                )
                for ch, vec, feat in zip(chunks, vectors, features):
                    cur = c.execute(
                        "INSERT INTO chunks (id, doc_id, ordinal, text, page, heading, status, features) VALUES (?,?,?,?,?,?,?,?)",
                        (ch.id, doc.id, ch.ordinal, ch.text, ch.page, ch.heading, status,
                         json.dumps(feat, separators=(",", ":")) if feat is not None else None),
                    )
                    rid = cur.lastrowid
                    c.execute("INSERT INTO chunks_fts (rowid, text, title) VALUES (?,?,?)",
                              (rid, ch.text, " ".join(filter(None, [doc.title, ch.heading]))))
                    c.execute(
                        "INSERT INTO chunks_vec (rowid, embedding, status, source_type, version) VALUES (?,?,?,?,?)",
                        (rid, vec.tobytes(), status, doc.source_type or "", doc.version or ""),
                    )
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
            finally:
                self._np_cache = None

    def delete_document(self, doc_id: str) -> bool:
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                self._delete_chunks(doc_id)
                n = c.execute("DELETE FROM documents WHERE id=?", (doc_id,)).rowcount
                c.execute("COMMIT")
            except BaseException:
                c.execute("ROLLBACK")
                raise
        return n > 0

    # -- reads --------------------------------------------------------------------------------
    def _record(self, r) -> DocumentRecord:
        return DocumentRecord(id=r[0], title=r[1], url=r[2], source_type=r[3], version=r[4], status=r[5],
                              updated_at=r[6], content_hash=r[7], source_path=r[8], chunk_count=r[9])

    _DOC_COLS = "id, title, url, source_type, version, status, updated_at, content_hash, source_path, chunk_count"

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        with self._lock:
            r = self._conn.execute(f"SELECT {self._DOC_COLS} FROM documents WHERE id=?", (doc_id,)).fetchone()
        return self._record(r) if r else None

    def list_documents(self) -> list[DocumentRecord]:
        with self._lock:
            rows = self._conn.execute(f"SELECT {self._DOC_COLS} FROM documents ORDER BY id").fetchall()
        return [self._record(r) for r in rows]

    @staticmethod
    def _filter_sql(filters: SearchFilters, prefix: str = "") -> tuple[str, list]:
        clauses, params = [], []
        for s in filters.exclude_status:
            clauses.append(f"{prefix}status != ?")
            params.append(s)
        for col in ("status", "source_type", "version"):
            val = getattr(filters, col)
            if val is not None:
                clauses.append(f"{prefix}{col} = ?")
                params.append(val)
        return " AND ".join(clauses), params

    def dense_search(self, vector: np.ndarray, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if k <= 0:
            return []
        with self._lock:
            if self.vector_backend == "sqlite-vec":
                where, params = self._filter_sql(filters)
                sql = "SELECT v.rowid, v.distance FROM chunks_vec v WHERE v.embedding MATCH ? AND k = ?"
                if where:
                    sql += " AND " + where
                rows = self._conn.execute(sql, [q.tobytes(), k, *params]).fetchall()
                hits = [(rid, 1.0 - float(d)) for rid, d in rows]
            else:
                hits = self._numpy_search(q, k, filters)
            if not hits:
                return []
            ids = dict(self._conn.execute(
                f"SELECT rowid, id FROM chunks WHERE rowid IN ({','.join('?' * len(hits))})", [h[0] for h in hits]
            ).fetchall())
        return [(ids[rid], s) for rid, s in hits if rid in ids]

    def _numpy_search(self, q: np.ndarray, k: int, filters: SearchFilters) -> list[tuple[int, float]]:
        if self._np_cache is None:
            rows = self._conn.execute("SELECT rowid, embedding, status, source_type, version FROM chunks_vec").fetchall()
            rowids = np.array([r[0] for r in rows], dtype=np.int64)
            mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), self.dim) if rows else np.zeros((0, self.dim), np.float32)
            self._np_cache = (rowids, mat, [(r[2], r[3], r[4]) for r in rows])
        rowids, mat, meta = self._np_cache
        if not len(rowids):
            return []
        sims = mat @ q
        keep = np.array([
            m[0] not in filters.exclude_status
            and (filters.status is None or m[0] == filters.status)
            and (filters.source_type is None or m[1] == filters.source_type)
            and (filters.version is None or m[2] == filters.version)
            for m in meta
        ])
        sims = np.where(keep, sims, -np.inf)
        top = np.argsort(-sims)[:k]
        return [(int(rowids[i]), float(sims[i])) for i in top if np.isfinite(sims[i])]

    def lexical_search(self, query: str, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        match = fts_query(query)
        if not match or k <= 0:
            return []
        where, params = self._filter_sql(filters, prefix="c.")
        where = where.replace("c.source_type", "d.source_type").replace("c.version", "d.version")
        sql = (
            "SELECT c.id, -bm25(chunks_fts) AS s FROM chunks_fts JOIN chunks c ON c.rowid = chunks_fts.rowid "
            "JOIN documents d ON d.id = c.doc_id WHERE chunks_fts MATCH ?"
            + (" AND " + where if where else "")
            + " ORDER BY bm25(chunks_fts) LIMIT ?"
        )
        with self._lock:
            rows = self._conn.execute(sql, [match, *params, k]).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def get_chunks(self, chunk_ids: list[str]) -> list[Candidate]:
        if not chunk_ids:
            return []
        with self._lock:
            rows = self._conn.execute(
                f"""SELECT c.id, c.doc_id, d.title, c.text, d.url, d.version, d.status, d.source_type, d.content_hash,
                    c.page, c.heading, c.features FROM chunks c JOIN documents d ON d.id = c.doc_id
                    WHERE c.id IN ({','.join('?' * len(chunk_ids))})""",
                chunk_ids,
            ).fetchall()
        by_id = {
            r[0]: Candidate(id=r[0], doc_id=r[1], title=r[2], text=r[3], url=r[4], version=r[5], status=r[6],
                            source_type=r[7], content_hash=r[8], page=r[9], heading=r[10],
                            passage_features=json.loads(r[11]) if r[11] else None)
            for r in rows
        }
        return [by_id[i] for i in chunk_ids if i in by_id]

    def get_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        if not chunk_ids:
            return {}
        with self._lock:
            rows = self._conn.execute(
                f"""SELECT c.id, v.embedding FROM chunks c JOIN chunks_vec v ON v.rowid = c.rowid
                    WHERE c.id IN ({','.join('?' * len(chunk_ids))})""",
                chunk_ids,
            ).fetchall()
        return {r[0]: np.frombuffer(r[1], dtype=np.float32) for r in rows}

    def stats(self) -> StoreStats:
        with self._lock:
            docs = self._conn.execute("SELECT count(*) FROM documents").fetchone()[0]
            chunks = self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            by_status: dict[str, dict[str, int]] = {}
            for status, nd, nc in self._conn.execute(
                "SELECT status, count(*), coalesce(sum(chunk_count), 0) FROM documents GROUP BY status ORDER BY status"
            ):
                by_status[status] = {"documents": nd, "chunks": nc}
        return StoreStats(documents=docs, chunks=chunks, by_status=by_status, embedder=self.embedder_id,
                          location=str(self.path))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

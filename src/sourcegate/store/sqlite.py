"""Embedded index: one SQLite file with FTS5 (BM25) for lexical search and sqlite-vec for vectors.

Python builds differ: some `sqlite3` modules cannot load extensions (no `enable_load_extension`).
We use the standard module when it can, `pysqlite3` when it is installed, and otherwise keep the
vectors in a plain table and scan them with numpy (exact, slower at scale, same results).
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ..models import Candidate, Chunk, Document
from ..normalize import fold
from ..text import QUERY_STOP as _STOP, WORD_TOKEN as _TOKEN
from .base import (DocumentRecord, EmbedderMismatch, ExportedDocument, ReadersRule, ReembedRow, SearchFilters,
                   StoreStats, checked_upsert, reembed_text, text_digest)

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




def fts_query(text: str) -> str | None:
    """An FTS5 OR-query of the query's meaningful terms. Identifiers such as "P-200" or "E-47"
    become exact phrases ("p 200"), so they are matched as a unit."""
    terms = fts_terms(text)
    return " OR ".join(terms) if terms else None


def _stem(word: str) -> str:
    """The form FTS5's porter tokenizer indexes a word under (accents folded, Porter stem)."""
    return _porter().stemWord(fold(word))


@functools.lru_cache(maxsize=1)
def _porter():
    import snowballstemmer

    return snowballstemmer.stemmer("porter")


def fts_terms(text: str) -> list[str]:
    """Quoted FTS5 terms and phrases of a query, in order, without duplicates."""
    terms: list[str] = []
    for tok in _TOKEN.findall(text.lower()):
        parts = [p for p in re.split(r"[-/.]", tok) if p]
        if len(parts) > 1 and any(ch.isdigit() for ch in tok):
            terms.append('"' + " ".join(parts) + '"')
            continue
        for p in parts:
            if p not in _STOP and (len(p) > 1 or p.isdigit()):
                terms.append('"' + p + '"')
    return list(dict.fromkeys(terms))


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


LATER_MIGRATIONS: list[tuple[str, list[str]]] = [
    (
        # Filter columns inside the full-text index, so a filtered BM25 search needs no join.
        "0003_fts_filter_columns",
        [
            """CREATE VIRTUAL TABLE chunks_fts_new USING fts5(text, title, status UNINDEXED, source_type UNINDEXED,
               version UNINDEXED, tokenize='porter unicode61 remove_diacritics 2')""",
            """INSERT INTO chunks_fts_new (rowid, text, title, status, source_type, version)
               SELECT f.rowid, f.text, f.title, c.status, coalesce(d.source_type, ''), coalesce(d.version, '')
               FROM chunks_fts f JOIN chunks c ON c.rowid = f.rowid JOIN documents d ON d.id = c.doc_id""",
            "DROP TABLE chunks_fts",
            "ALTER TABLE chunks_fts_new RENAME TO chunks_fts",
        ],
    ),
    (
        # Other front-matter and sidecar keys (`model`, `product`), a JSON object, for filters.
        "0004_document_metadata",
        ["ALTER TABLE documents ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}'"],
    ),
    (
        # Who may read each document (docs/readers.md): the list as written, and one row per reader,
        # indexed by reader, that the searches join to trim a restricted caller's candidates.
        "0005_document_readers",
        ["ALTER TABLE documents ADD COLUMN readers TEXT NOT NULL DEFAULT '[]'",
         """CREATE TABLE document_readers (reader TEXT NOT NULL,
            doc_id TEXT NOT NULL REFERENCES documents(id) ON DELETE CASCADE, PRIMARY KEY (reader, doc_id)) WITHOUT ROWID""",
         "CREATE INDEX document_readers_doc ON document_readers(doc_id)"],
    ),
]

# Lexical search serves exact and rare terms (identifiers, part numbers, error codes); dense search
# covers the rest. On a large index, common words make SQLite score most of it for little gain,
# so terms are taken rarest first within a budget of postings.
LEXICAL_PRUNE_MIN_CHUNKS = 5000
LEXICAL_POSTINGS_BUDGET = 0.10  # share of the chunks


# From this many vectors on, the scan reads an int8 copy of the matrix (a quarter of the memory
# traffic, SIMD dot products) and the best max(`RESCORE_MIN`, `RESCORE_FACTOR` * k) rows by that scan
# are scored again exactly in float32: the ranking is the exact one unless a true neighbour falls that
# far down the int8 order (bench/README.md, "Retrieval on people's questions at library scale", speed).
INT8_MIN_ROWS = 20_000
RESCORE_MIN = 128
RESCORE_FACTOR = 8


def _int8_kernel():
    try:
        import simsimd

        return simsimd
    except ImportError:  # the float32 product alone: slower, the same results
        return None


class _VectorMatrix:
    """Vectors and their filter columns as arrays, for exact search with one matrix product (through
    an int8 copy with exact rescoring on large indexes)."""

    def __init__(self, rowids, vectors, columns: dict[str, np.ndarray], version: int):
        self.rowids, self.vectors, self.columns, self.version = rowids, vectors, columns, version
        self.position = {int(r): i for i, r in enumerate(rowids)}
        self._masks: dict[SearchFilters, np.ndarray] = {}
        self.codes = self.scale = None
        self._kernel = _int8_kernel() if len(rowids) >= INT8_MIN_ROWS else None
        if self._kernel is not None:
            # one scale per dimension, so every dimension uses the whole int8 range
            peak = np.zeros(vectors.shape[1], dtype=np.float32)
            for i in range(0, len(vectors), 8192):  # in blocks: no full-size temporary
                np.maximum(peak, np.abs(vectors[i:i + 8192]).max(axis=0), out=peak)
            self.scale = np.where(peak > 0, 127.0 / np.maximum(peak, 1e-12), 0.0).astype(np.float32)
            self.codes = np.empty(vectors.shape, dtype=np.int8)
            for i in range(0, len(vectors), 8192):
                self.codes[i:i + 8192] = np.clip(np.rint(vectors[i:i + 8192] * self.scale), -127, 127)

    def similarities(self, q: np.ndarray, k: int, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the `k` rows most similar to `q` among `keep`, and their exact similarities,
        best first."""
        if self.codes is not None:
            # x = code / scale, so x . q = code . (q / scale): the query is quantised in that space
            qs = np.divide(q, self.scale, out=np.zeros_like(q), where=self.scale > 0)
            peak = float(np.abs(qs).max())
            if peak > 0:
                q8 = np.clip(np.rint(qs * (127.0 / peak)), -127, 127).astype(np.int8)
                approx = np.asarray(self._kernel.cdist(q8[None, :], self.codes, metric="dot"), dtype=np.float32).ravel()
                approx[~keep] = -np.inf
                r = min(max(RESCORE_MIN, RESCORE_FACTOR * k), int(keep.sum()))
                pool = np.argpartition(-approx, r - 1)[:r]
                pool = pool[np.isfinite(approx[pool])]
                exact = self.vectors[pool] @ q
                order = np.lexsort((pool, -exact))[:k]  # ties (copies of one text) by position
                return pool[order], exact[order]
        sims = self.vectors @ q
        sims[~keep] = -np.inf
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.lexsort((top, -sims[top]))]
        return top, sims[top]

    @classmethod
    def build(cls, rows, dim: int, version: int) -> "_VectorMatrix":
        rowids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        vectors = (np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), dim)
                   if rows else np.zeros((0, dim), np.float32))
        columns = {name: np.array([r[i] or "" for r in rows], dtype=object)
                   for i, name in ((2, "status"), (3, "source_type"), (4, "version"))}
        return cls(rowids, vectors, columns, version)

    def mask(self, f: SearchFilters) -> np.ndarray:
        # keyed by the columns it reads: the document-level filters (a caller's readers among them,
        # one rule per caller) are applied beside it, and must not grow this cache
        key = (f.exclude_status, f.status, f.source_type, f.version)
        if key not in self._masks:
            self._masks[key] = self._compute_mask(f)
        return self._masks[key]

    def _compute_mask(self, f: SearchFilters) -> np.ndarray:
        keep = np.ones(len(self.rowids), dtype=bool)
        for s in f.exclude_status:
            keep &= self.columns["status"] != s
        for name in ("status", "source_type", "version"):
            val = getattr(f, name)
            if val is not None:
                keep &= self.columns[name] == val
        return keep


class SqliteStore:
    def __init__(self, path: Path, embedder_id: str, dim: int, vector_backend: str = "auto",
                 dense_index: str = "memory", allow_embedder_mismatch: bool = False):
        """`dense_index="memory"` keeps every vector in RAM (dim * 4 bytes per chunk: about 205 MB
        for 100k 512-d chunks) and scans them with one matrix product, several times faster than
        sqlite-vec's scan; `"sqlite"` searches inside SQLite with sqlite-vec, for small machines.

        An index built with another embedder than `embedder_id` (`dim`) is refused
        (`EmbedderMismatch`), unless `allow_embedder_mismatch`: then it opens for inspection and
        re-embedding, and searches and writes are refused until it is re-embedded."""
        if dense_index not in ("memory", "sqlite"):
            raise ValueError("dense_index must be 'memory' or 'sqlite'")
        self.dense_index = dense_index
        self.path = Path(path)
        if str(path) != ":memory:":
            # 0600 (its -wal and -shm files take its mode) in a 0700 folder, when created here.
            from ..private_files import private_file

            private_file(self.path)
        self.embedder_id = embedder_id
        self.dim = dim
        self._lock = threading.RLock()
        self._conn, self.vector_backend = _connect(str(self.path), vector_backend)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._np_cache: _VectorMatrix | None = None
        self._df_cache: tuple[int, dict[str, int]] | None = None
        self._count_cache: tuple[int, int] | None = None
        self._allow_mismatch = allow_embedder_mismatch
        self._index_embedder: tuple[str, int] = (embedder_id, dim)
        self._embedder_version: int | None = None  # data_version at which the meta was last read
        self._migrate()

    # -- schema -------------------------------------------------------------------------------
    def _migrate(self) -> None:
        c = self._conn
        with self._lock:
            c.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
            c.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            done = {r[0] for r in c.execute("SELECT name FROM schema_migrations")}
            vec_sql = self._vec_table_sql(self.dim)
            migrations = MIGRATIONS + [("0002_vectors", [vec_sql])] + LATER_MIGRATIONS
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
            if "embedder" in stored:
                self._index_embedder = (stored["embedder"], int(stored["dim"]))
                self._embedder_version = self._data_version()
                if self.embedder_mismatch and not self._allow_mismatch:
                    raise self._mismatch()
            # Only what is missing: opening an index must not need the write lock, which another
            # process (an ingest) may hold for a long time.
            for k, v in (("embedder", self.embedder_id), ("dim", str(self.dim)), ("vector_backend", self.vector_backend)):
                if k not in stored:
                    c.execute("INSERT OR IGNORE INTO meta VALUES (?, ?)", (k, v))

    # -- the index's embedder ------------------------------------------------------------------
    def index_embedder(self) -> tuple[str, int]:
        """(embedder id, dimension) the index's vectors come from."""
        with self._lock:
            self._read_embedder()
            return self._index_embedder

    @property
    def embedder_mismatch(self) -> bool:
        return self._index_embedder != (self.embedder_id, self.dim)

    def _mismatch(self) -> EmbedderMismatch:
        return EmbedderMismatch(str(self.path), *self._index_embedder, self.embedder_id, self.dim)

    def _read_embedder(self) -> None:
        """The index's embedder as recorded, read again when another connection has written (a
        re-embedding by another process switches it)."""
        version = self._data_version()
        if version != self._embedder_version:
            stored = dict(self._conn.execute("SELECT key, value FROM meta WHERE key IN ('embedder', 'dim')").fetchall())
            if "embedder" in stored:
                self._index_embedder = (stored["embedder"], int(stored["dim"]))
            self._embedder_version = version

    def _check_embedder(self) -> None:
        """Refuse to search or write vectors of another embedder's space."""
        self._read_embedder()
        if self.embedder_mismatch:
            raise self._mismatch()

    # -- re-embedding (sourcegate.ingest.reembed) ---------------------------------------------
    # New vectors are staged in `reembed_vectors` (by chunk rowid, with the digest of the text they
    # were made from); `reembed_finish` swaps them in as `chunks_vec` in one transaction.

    def _reembed_digest(self, title: str | None, text: str | None) -> tuple[str, str]:
        t = reembed_text(title, text)
        return t, text_digest(t)

    def reembed_begin(self, embedder_id: str, dim: int) -> None:
        target = f"{embedder_id}|{int(dim)}"
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                row = c.execute("SELECT value FROM meta WHERE key='reembed_target'").fetchone()
                exists = c.execute("SELECT 1 FROM sqlite_master WHERE name='reembed_vectors'").fetchone()
                if row is None or row[0] != target or not exists:
                    c.execute("DROP TABLE IF EXISTS reembed_vectors")
                    c.execute("CREATE TABLE reembed_vectors (rowid INTEGER PRIMARY KEY, digest TEXT NOT NULL, "
                              "embedding BLOB NOT NULL)")
                    c.execute("INSERT OR REPLACE INTO meta VALUES ('reembed_target', ?)", (target,))
                c.execute("COMMIT")
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise
        self._reembed_target = (embedder_id, int(dim))

    def _reembed_rows(self, after: int, limit: int | None) -> list[tuple[ReembedRow, int]]:
        sql = ("SELECT c.rowid, d.title, c.text, s.digest FROM chunks c JOIN documents d ON d.id = c.doc_id "
               "LEFT JOIN reembed_vectors s ON s.rowid = c.rowid WHERE c.rowid > ? ORDER BY c.rowid")
        rows = self._conn.execute(sql + (" LIMIT ?" if limit else ""), (after, limit) if limit else (after,)).fetchall()
        out = []
        for rowid, title, text, staged in rows:
            t, digest = self._reembed_digest(title, text)
            out.append(ReembedRow(rowid, t, digest, staged == digest))
        return out

    def reembed_batches(self, size: int):
        """Every chunk, in batches of `size`, in rowid order (read batch by batch: writes of other
        processes between batches are allowed; `reembed_finish` checks again)."""
        after = 0
        while True:
            with self._lock:
                rows = self._reembed_rows(after, size)
            if not rows:
                return
            after = int(rows[-1].key)
            yield rows

    def reembed_stage(self, rows: list[ReembedRow], vectors: np.ndarray) -> None:
        dim = self._reembed_target[1]
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(rows), dim):
            raise ValueError(f"staged vectors have shape {vectors.shape}, expected ({len(rows)}, {dim})")
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                c.executemany("INSERT OR REPLACE INTO reembed_vectors (rowid, digest, embedding) VALUES (?, ?, ?)",
                              [(int(r.key), r.digest, v.tobytes()) for r, v in zip(rows, vectors)])
                c.execute("COMMIT")
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise

    def reembed_finish(self, embed_missing) -> int:
        """In one transaction: stage what is still missing (`embed_missing(rows)` gives their
        vectors), replace `chunks_vec` by a table of the new dimension holding the staged vectors,
        record the new embedder. Returns the number of chunks."""
        embedder_id, dim = self._reembed_target
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                rows = self._reembed_rows(0, None)
                missing = [r for r in rows if not r.done]
                if missing:
                    vectors = np.asarray(embed_missing(missing), dtype=np.float32)
                    if vectors.shape != (len(missing), dim):
                        raise ValueError(f"vectors of shape {vectors.shape}, expected ({len(missing)}, {dim})")
                    c.executemany("INSERT OR REPLACE INTO reembed_vectors (rowid, digest, embedding) VALUES (?, ?, ?)",
                                  [(int(r.key), r.digest, v.tobytes()) for r, v in zip(missing, vectors)])
                c.execute("DROP TABLE chunks_vec")
                c.execute(self._vec_table_sql(dim))
                c.execute("""INSERT INTO chunks_vec (rowid, embedding, status, source_type, version)
                             SELECT c.rowid, s.embedding, c.status, coalesce(d.source_type, ''), coalesce(d.version, '')
                             FROM chunks c JOIN documents d ON d.id = c.doc_id JOIN reembed_vectors s ON s.rowid = c.rowid
                             ORDER BY c.rowid""")
                n = c.execute("SELECT count(*) FROM chunks_vec").fetchone()[0]
                if n != len(rows):  # cannot happen: every chunk was staged above
                    raise RuntimeError(f"re-embedding: {n} vectors for {len(rows)} chunks; nothing was changed")
                c.execute("DROP TABLE reembed_vectors")
                c.execute("DELETE FROM meta WHERE key = 'reembed_target'")
                c.execute("INSERT OR REPLACE INTO meta VALUES ('embedder', ?)", (embedder_id,))
                c.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(dim),))
                # The stored content hashes were salted with the first embedder's id (see
                # `content_hash_embedder`): kept, so unchanged files are not embedded once more.
                c.execute("INSERT OR IGNORE INTO meta VALUES ('hash_embedder', ?)", (self._index_embedder[0],))
                c.execute("COMMIT")
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise
            finally:
                self._invalidate()
            self.embedder_id, self.dim = embedder_id, dim
            self._index_embedder = (embedder_id, dim)
            self._embedder_version = self._data_version()
        return len(rows)

    def content_hash_embedder(self) -> str | None:
        """The embedder id that salts the stored documents' content hashes, when the index was
        re-embedded since (None: the index's own embedder)."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key='hash_embedder'").fetchone()
        return row[0] if row else None

    def reembed_pending(self) -> str | None:
        """The embedder ("id|dim") an interrupted re-embedding was staging vectors for, or None."""
        with self._lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key='reembed_target'").fetchone()
        return row[0] if row else None

    def _vec_table_sql(self, dim: int) -> str:
        return (f"CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{int(dim)}] distance_metric=cosine, "
                "status text, source_type text, version text)"
                if self.vector_backend == "sqlite-vec"
                else "CREATE TABLE chunks_vec (rowid INTEGER PRIMARY KEY, embedding BLOB NOT NULL, status TEXT, "
                     "source_type TEXT, version TEXT)")

    # -- writes -------------------------------------------------------------------------------
    def _delete_chunks(self, doc_id: str) -> None:
        c = self._conn
        rowids = [r[0] for r in c.execute("SELECT rowid FROM chunks WHERE doc_id=?", (doc_id,))]
        for rid in rowids:
            c.execute("DELETE FROM chunks_fts WHERE rowid=?", (rid,))
            c.execute("DELETE FROM chunks_vec WHERE rowid=?", (rid,))
        c.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        self._invalidate()

    def upsert_document(self, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
                        features: list[dict | None] | None = None, source_path: str | None = None) -> None:
        vectors, features = checked_upsert(chunks, vectors, features, self.dim)
        status = doc.status or "current"
        now = datetime.now(timezone.utc).isoformat()
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                self._check_embedder()  # under the write lock: a re-embedding cannot switch it meanwhile
                self._delete_chunks(doc.id)
                c.execute(
                    """INSERT INTO documents (id, title, url, source_type, version, status, updated_at, content_hash,
                       source_path, chunk_count, ingested_at, metadata, readers) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)
                       ON CONFLICT(id) DO UPDATE SET title=excluded.title, url=excluded.url,
                       source_type=excluded.source_type, version=excluded.version, status=excluded.status,
                       updated_at=excluded.updated_at, content_hash=excluded.content_hash,
                       source_path=excluded.source_path, chunk_count=excluded.chunk_count, ingested_at=excluded.ingested_at,
                       metadata=excluded.metadata, readers=excluded.readers""",
                    (doc.id, doc.title, doc.url, doc.source_type, doc.version, status, doc.updated_at,
                     doc.content_hash, source_path, len(chunks), now,
                     json.dumps(doc.metadata or {}, ensure_ascii=False, sort_keys=True),
                     json.dumps(sorted(set(doc.readers or ())), ensure_ascii=False)),
                )
                c.execute("DELETE FROM document_readers WHERE doc_id=?", (doc.id,))
                c.executemany("INSERT INTO document_readers (reader, doc_id) VALUES (?, ?)",
                              [(r, doc.id) for r in sorted(set(doc.readers or ()))])
                for ch, vec, feat in zip(chunks, vectors, features):
                    cur = c.execute(
                        "INSERT INTO chunks (id, doc_id, ordinal, text, page, heading, status, features) VALUES (?,?,?,?,?,?,?,?)",
                        (ch.id, doc.id, ch.ordinal, ch.text, ch.page, ch.heading, status,
                         json.dumps(feat, separators=(",", ":")) if feat is not None else None),
                    )
                    rid = cur.lastrowid
                    c.execute(
                        "INSERT INTO chunks_fts (rowid, text, title, status, source_type, version) VALUES (?,?,?,?,?,?)",
                        (rid, ch.text, " ".join(filter(None, [doc.title, ch.heading])), status,
                         doc.source_type or "", doc.version or ""),
                    )
                    c.execute(
                        "INSERT INTO chunks_vec (rowid, embedding, status, source_type, version) VALUES (?,?,?,?,?)",
                        (rid, vec.tobytes(), status, doc.source_type or "", doc.version or ""),
                    )
                c.execute("COMMIT")
            except BaseException:
                # SQLite rolls back by itself on some errors (a full disk): a second ROLLBACK
                # would fail and hide the reason.
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise
            finally:
                self._invalidate()

    def delete_document(self, doc_id: str) -> bool:
        c = self._conn
        with self._lock:
            c.execute("BEGIN IMMEDIATE")
            try:
                self._delete_chunks(doc_id)
                n = c.execute("DELETE FROM documents WHERE id=?", (doc_id,)).rowcount
                c.execute("COMMIT")
            except BaseException:
                # SQLite rolls back by itself on some errors (a full disk): a second ROLLBACK
                # would fail and hide the reason.
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise
        return n > 0

    # -- reads --------------------------------------------------------------------------------
    def _record(self, r) -> DocumentRecord:
        return DocumentRecord(id=r[0], title=r[1], url=r[2], source_type=r[3], version=r[4], status=r[5],
                              updated_at=r[6], content_hash=r[7], source_path=r[8], chunk_count=r[9],
                              metadata=json.loads(r[10] or "{}"), readers=json.loads(r[11] or "[]"))

    _DOC_COLS = ("id, title, url, source_type, version, status, updated_at, content_hash, source_path, chunk_count, "
                 "metadata, readers")

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        with self._lock:
            r = self._conn.execute(f"SELECT {self._DOC_COLS} FROM documents WHERE id=?", (doc_id,)).fetchone()
        return self._record(r) if r else None

    def list_documents(self, readers: ReadersRule | None = None) -> list[DocumentRecord]:
        where, params = self._readers_sql(readers, "id")
        with self._lock:
            rows = self._conn.execute(f"SELECT {self._DOC_COLS} FROM documents WHERE {where or '1'} ORDER BY id",
                                      params).fetchall()
        return [self._record(r) for r in rows]

    @staticmethod
    def _readers_sql(rule: ReadersRule | None, doc_id: str = "d.id") -> tuple[str, list]:
        """The readers rule over the document id `doc_id`: one of the caller's ids among its readers
        (the `document_readers` index), or no readers at all where such documents are readable."""
        if rule is None:
            return "", []
        parts, params = [], []
        ids = sorted(rule.ids)
        if ids:
            parts.append(f"{doc_id} IN (SELECT doc_id FROM document_readers WHERE reader IN ({','.join('?' * len(ids))}))")
            params += ids
        if rule.unmarked:
            parts.append(f"NOT EXISTS (SELECT 1 FROM document_readers r WHERE r.doc_id = {doc_id})")
        return "(" + (" OR ".join(parts) or "0") + ")", params

    @staticmethod
    def _filter_sql(filters: SearchFilters, rowid: str = "rowid") -> tuple[str, list]:
        clauses, params = [], []
        for s in filters.exclude_status:
            clauses.append("status != ?")
            params.append(s)
        for col in ("status", "source_type", "version"):
            val = getattr(filters, col)
            if val is not None:
                clauses.append(f"{col} = ?")
                params.append(val)
        if filters.by_document:
            where, more = SqliteStore._document_sql(filters)
            clauses.append(f"{rowid} IN (SELECT c.rowid FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE {where})")
            params += more
        return " AND ".join(clauses), params

    @staticmethod
    def _document_sql(filters: SearchFilters) -> tuple[str, list]:
        """The document-level filters (id prefix, metadata keys) over `documents d`."""
        clauses, params = [], []
        if filters.doc_id_prefix is not None:
            clauses.append("substr(d.id, 1, ?) = ?")
            params += [len(filters.doc_id_prefix), filters.doc_id_prefix]
        for key, value in filters.metadata:
            clauses.append("json_extract(d.metadata, ?) = ?")
            params += ['$."' + key + '"', value]
        readers, more = SqliteStore._readers_sql(filters.readers)
        if readers:
            clauses.append(readers)
            params += more
        return " AND ".join(clauses) or "1", params

    def _document_rowids(self, filters: SearchFilters) -> np.ndarray:
        where, params = self._document_sql(filters)
        rows = self._conn.execute(
            f"SELECT c.rowid FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE {where}", params).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def _invalidate(self) -> None:
        # PRAGMA data_version tracks other connections' commits, not this one's.
        self._np_cache = None
        self._df_cache = None
        self._count_cache = None

    def _data_version(self) -> int:
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def dense_search(self, vector: np.ndarray, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if k <= 0:
            return []
        with self._lock:
            self._check_embedder()
            # sqlite-vec's KNN filters on its own columns only: filters on the document (id, metadata)
            # take the exact scan, which applies them to every row before ranking.
            if self.dense_index == "sqlite" and self.vector_backend == "sqlite-vec" and not filters.by_document:
                where, params = self._filter_sql(filters)
                sql = "SELECT v.rowid, v.distance FROM chunks_vec v WHERE v.embedding MATCH ? AND k = ?"
                if where:
                    sql += " AND " + where
                rows = self._conn.execute(sql, [q.tobytes(), k, *params]).fetchall()
                hits = [(rid, 1.0 - float(d)) for rid, d in rows]
            else:
                hits = self._memory_search(q, k, filters)
            if not hits:
                return []
            ids = dict(self._conn.execute(
                f"SELECT rowid, id FROM chunks WHERE rowid IN ({','.join('?' * len(hits))})", [h[0] for h in hits]
            ).fetchall())
        return [(ids[rid], s) for rid, s in hits if rid in ids]

    def _matrix(self) -> "_VectorMatrix":
        """All vectors in memory, reloaded when this or another connection has written."""
        version = self._data_version()
        if self._np_cache is None or self._np_cache.version != version:
            rows = self._conn.execute("SELECT rowid, embedding, status, source_type, version FROM chunks_vec").fetchall()
            self._np_cache = _VectorMatrix.build(rows, self.dim, version)
        return self._np_cache

    def _memory_search(self, q: np.ndarray, k: int, filters: SearchFilters) -> list[tuple[int, float]]:
        m = self._matrix()
        if not len(m.rowids):
            return []
        keep = m.mask(filters)
        if filters.by_document:
            keep = keep & np.isin(m.rowids, self._document_rowids(filters))
        if not keep.any():
            return []
        k = min(k, int(keep.sum()))
        top, sims = m.similarities(q, k, keep)
        return [(int(m.rowids[i]), float(v)) for i, v in zip(top, sims)]

    def _document_frequencies(self, stems: list[str]) -> dict[str, int]:
        version = self._data_version()
        if self._df_cache is None or self._df_cache[0] != version:
            self._conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')")
            self._df_cache = (version, {})
        cache = self._df_cache[1]
        for stem in stems:
            if stem not in cache:
                row = self._conn.execute("SELECT doc FROM temp.chunks_vocab WHERE term = ?", (stem,)).fetchone()
                cache[stem] = row[0] if row else 0
        return {st: cache[st] for st in stems}

    def _lexical_match(self, query: str) -> str | None:
        terms = fts_terms(query)
        if not terms:
            return None
        n = self._chunk_count()
        if n < LEXICAL_PRUNE_MIN_CHUNKS:
            return " OR ".join(terms)
        stems = {t: [_stem(w) for w in t.strip('"').split()] for t in terms}
        df = self._document_frequencies(sorted({s for v in stems.values() for s in v}))
        # A phrase costs the postings of all its words; its rarity is that of its rarest word.
        ranked = sorted(terms, key=lambda t: (min(df[s] for s in stems[t]), t))
        budget, spent, kept = LEXICAL_POSTINGS_BUDGET * n, 0, []
        for t in ranked:
            cost = sum(df[s] for s in stems[t])
            if len(kept) >= 2 and spent + cost > budget:
                break
            kept.append(t)
            spent += cost
        return " OR ".join(kept)

    def _chunk_count(self) -> int:
        version = self._data_version()
        if self._count_cache is None or self._count_cache[0] != version:
            self._count_cache = (version, self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        return self._count_cache[1]

    def lexical_search(self, query: str, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        with self._lock:
            match = self._lexical_match(query)
            if not match:
                return []
            # Filtering inside FTS5 reads every matching row's columns; most rows pass the filter,
            # so rank without it and filter the best few, widening the window if too few remain.
            for limit in (k * 3, k * 20):
                rows = self._conn.execute(
                    "SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts) LIMIT ?",
                    (match, limit),
                ).fetchall()
                hits = self._filter_rows(rows, filters)
                if len(hits) >= k or len(rows) < limit:
                    return hits[:k]
            where, params = self._filter_sql(filters)
            rows = self._conn.execute(
                "SELECT rowid, -bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ?"
                + (" AND " + where if where else "") + " ORDER BY bm25(chunks_fts) LIMIT ?",
                [match, *params, k],
            ).fetchall()
            return self._filter_rows(rows, filters)[:k]

    def _filter_rows(self, rows: list[tuple[int, float]], filters: SearchFilters) -> list[tuple[str, float]]:
        if not rows:
            return []
        where, params = self._document_sql(filters)
        meta = {r[0]: r[1:] for r in self._conn.execute(
            f"""SELECT c.rowid, c.id, c.status, coalesce(d.source_type, ''), coalesce(d.version, '')
                FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.rowid IN ({','.join('?' * len(rows))})
                AND {where}""",
            [*(r[0] for r in rows), *params],
        ).fetchall()}
        out = []
        for rowid, score in rows:
            m = meta.get(rowid)
            if m is None:
                continue
            cid, status, source_type, version = m
            if status in filters.exclude_status:
                continue
            if (filters.status is not None and status != filters.status) or \
               (filters.source_type is not None and source_type != filters.source_type) or \
               (filters.version is not None and version != filters.version):
                continue
            out.append((cid, float(score)))
        return out

    def get_chunks(self, chunk_ids: list[str], readers: ReadersRule | None = None) -> list[Candidate]:
        if not chunk_ids:
            return []
        where, params = self._readers_sql(readers)
        with self._lock:
            rows = self._conn.execute(
                f"""SELECT c.id, c.doc_id, d.title, c.text, d.url, d.version, d.status, d.source_type, d.content_hash,
                    c.page, c.heading, c.features FROM chunks c JOIN documents d ON d.id = c.doc_id
                    WHERE c.id IN ({','.join('?' * len(chunk_ids))})""" + (f" AND {where}" if where else ""),
                [*chunk_ids, *params],
            ).fetchall()
        by_id = {
            r[0]: Candidate(id=r[0], doc_id=r[1], title=r[2], text=r[3], url=r[4], version=r[5], status=r[6],
                            source_type=r[7], content_hash=r[8], page=r[9], heading=r[10],
                            passage_features=json.loads(r[11]) if r[11] else None)
            for r in rows
        }
        return [by_id[i] for i in chunk_ids if i in by_id]

    def passage_ids(self) -> list[str]:
        """Every passage (chunk) id in the index, sorted (what `feedback.library_fingerprint` hashes)."""
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT id FROM chunks ORDER BY id")]

    def get_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        if not chunk_ids:
            return {}
        with self._lock:
            self._check_embedder()
            rows = self._conn.execute(
                f"SELECT id, rowid FROM chunks WHERE id IN ({','.join('?' * len(chunk_ids))})", chunk_ids
            ).fetchall()
            if self.dense_index == "memory" or self.vector_backend == "numpy":
                m = self._matrix()
                return {cid: m.vectors[m.position[rid]] for cid, rid in rows if rid in m.position}
            by_rowid = {rid: cid for cid, rid in rows}
            vecs = self._conn.execute(
                f"SELECT rowid, embedding FROM chunks_vec WHERE rowid IN ({','.join('?' * len(by_rowid))})",
                list(by_rowid),
            ).fetchall() if by_rowid else []
        return {by_rowid[rid]: np.frombuffer(blob, dtype=np.float32) for rid, blob in vecs}

    def export_document(self, doc_id: str) -> ExportedDocument | None:
        with self._lock:
            r = self._conn.execute(f"SELECT {self._DOC_COLS} FROM documents WHERE id=?", (doc_id,)).fetchone()
            if r is None:
                return None
            rows = self._conn.execute(
                "SELECT rowid, id, ordinal, text, page, heading, features FROM chunks WHERE doc_id=? ORDER BY ordinal",
                (doc_id,)).fetchall()
            vecs = self.get_vectors([x[1] for x in rows])
        chunks = [Chunk(id=x[1], doc_id=doc_id, ordinal=x[2], text=x[3], page=x[4], heading=x[5]) for x in rows]
        vectors = (np.vstack([vecs[c.id] for c in chunks]).astype(np.float32) if chunks
                   else np.zeros((0, self.dim), np.float32))
        return ExportedDocument(record=self._record(r), chunks=chunks, vectors=vectors,
                                features=[json.loads(x[6]) if x[6] else None for x in rows])

    def stats(self) -> StoreStats:
        with self._lock:
            docs = self._conn.execute("SELECT count(*) FROM documents").fetchone()[0]
            chunks = self._conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            by_status: dict[str, dict[str, int]] = {}
            for status, nd, nc in self._conn.execute(
                "SELECT status, count(*), coalesce(sum(chunk_count), 0) FROM documents GROUP BY status ORDER BY status"
            ):
                by_status[status] = {"documents": nd, "chunks": nc}
            self._read_embedder()
        return StoreStats(documents=docs, chunks=chunks, by_status=by_status, embedder=self._index_embedder[0],
                          location=str(self.path), dim=self._index_embedder[1])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

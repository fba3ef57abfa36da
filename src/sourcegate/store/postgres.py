"""PostgreSQL store: pgvector (HNSW, cosine) for vectors and PostgreSQL full-text search (`tsvector`,
`websearch_to_tsquery`, `ts_rank_cd`) for lexical search, in one database that several `serve`
processes and one `ingest` share.

    SOURCEGATE_STORE=postgresql://user:password@host:5432/dbname

Same contract and same results as the SQLite store (tests/test_store_contract.py runs on both):

- Text is folded (lower case, no accents) and cut at every non-alphanumeric character before
  PostgreSQL sees it, as SQLite's `unicode61` tokenizer does, so "P-200" is indexed as the
  phrase "p 200" rather than as "p" and the negative number "-200".
- The text search configuration (stemming, stop words) is the library's language
  (`SOURCEGATE_LIBRARY_LANGUAGE`: en -> english, fr -> french, ...), recorded when the store is
  created; opening it with another language is refused rather than silently mixing stemmers.
- Filters (status, source type, version) are columns of `chunks`, applied inside both searches.
  Dense search asks pgvector for an iterative, strictly ordered HNSW scan, so a filter never
  leaves it with fewer than k results while matching rows exist.
- A document and all its chunks are replaced in one transaction (`ON CONFLICT` upserts, then the
  chunks that are no longer part of it deleted): readers see the old version or the new one.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import re
import socket
import struct
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone

import numpy as np

from ..models import Candidate, Chunk, Document
from ..normalize import fold
from .base import (DocumentRecord, EmbedderMismatch, ExportedDocument, ReadersRule, ReembedRow, SearchFilters, StoreStats,
                   StoreUnavailable, checked_upsert, current_store_time, reembed_text, text_digest)
from .sqlite import fts_terms

log = logging.getLogger(__name__)

INSTALL_HINT = 'the PostgreSQL store needs psycopg 3 and psycopg-pool: pip install "sourcegate[postgres]"'

# ISO 639-1 codes (SOURCEGATE_LIBRARY_LANGUAGE) to PostgreSQL's built-in text search configurations.
TEXT_SEARCH_CONFIGS = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek", "en": "english",
    "es": "spanish", "eu": "basque", "fi": "finnish", "fr": "french", "ga": "irish", "hi": "hindi",
    "hu": "hungarian", "hy": "armenian", "id": "indonesian", "it": "italian", "lt": "lithuanian",
    "ne": "nepali", "nl": "dutch", "no": "norwegian", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sr": "serbian", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}

# Lexical search on large libraries: as in the SQLite store, common terms are left to dense search
# and rare ones (identifiers, part numbers) kept, within a budget of postings. PostgreSQL's own
# statistics (pg_stats.most_common_elems, gathered by ANALYZE) give each lexeme's frequency.
LEXICAL_PRUNE_MIN_CHUNKS = 5000
LEXICAL_POSTINGS_BUDGET = 0.10  # share of the chunks
LEXICAL_RANK_CAP = 2000  # rows ranked at most for terms estimated to match more (ranking costs ~20 µs a row)
STATS_REFRESH_S = 300.0

_ADVISORY_LOCK = 0x736F7572  # "sour": serialises migrations between processes that start together


def text_search_config(language: str) -> str:
    """'fr' -> 'french'; a configuration name is accepted as is; anything else -> 'simple'."""
    lang = (language or "").strip().lower()
    if lang in TEXT_SEARCH_CONFIGS.values() or lang == "simple":
        return lang
    return TEXT_SEARCH_CONFIGS.get(lang.split("-")[0].split("_")[0], "simple")


_SEPARATORS = re.compile(r"[\W_]+", re.UNICODE)


def tsv_text(*parts: str | None) -> str:
    """What PostgreSQL indexes: folded words separated by single spaces."""
    return " ".join(_SEPARATORS.sub(" ", fold(p)).strip() for p in parts if p).strip()


def tsquery_terms(query: str) -> list[str]:
    """The query's terms as `websearch_to_tsquery` input: single words, and identifiers as quoted
    phrases ("p 200"), in the order of the SQLite store's FTS5 query."""
    out = []
    for term in fts_terms(fold(query)):
        words = _SEPARATORS.sub(" ", term.strip('"')).split()
        if words:
            out.append('"' + " ".join(words) + '"' if len(words) > 1 else words[0])
    return list(dict.fromkeys(out))


def redact_url(url: str) -> str:
    """The URL without its password (in the user part or `?password=`), for `status` and logs."""
    from . import redact_url as redact

    return redact(url)


HNSW_INDEX = ("CREATE INDEX IF NOT EXISTS chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops) "
              "WITH (m = 16, ef_construction = 64)")


def _migrations(dim: int) -> list[tuple[str, list[str]]]:
    return [
        ("0000_pgvector", ["CREATE EXTENSION IF NOT EXISTS vector"]),
        (
            "0001_documents_and_chunks",
            [
                """CREATE TABLE documents (
                    id text PRIMARY KEY, title text NOT NULL, url text, source_type text, version text,
                    status text NOT NULL DEFAULT 'current', updated_at text, content_hash text NOT NULL,
                    source_path text, chunk_count integer NOT NULL DEFAULT 0,
                    ingested_at timestamptz NOT NULL DEFAULT now())""",
                "CREATE INDEX documents_status ON documents (status)",
                # status, source_type and version are copied from the document so both searches
                # filter without a join; a document's chunks are always rewritten with it.
                f"""CREATE TABLE chunks (
                    id text PRIMARY KEY, doc_id text NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
                    ordinal integer NOT NULL, text text NOT NULL, page integer, heading text,
                    status text NOT NULL, source_type text NOT NULL DEFAULT '', version text NOT NULL DEFAULT '',
                    features jsonb, embedding vector({int(dim)}) NOT NULL, tsv tsvector NOT NULL)""",
                "CREATE INDEX chunks_doc ON chunks (doc_id, ordinal)",
            ],
        ),
        (
            "0002_search_indexes",
            [HNSW_INDEX, "CREATE INDEX chunks_tsv ON chunks USING gin (tsv)"],
        ),
        (
            # Other front-matter and sidecar keys (`model`, `product`), for per-request filters.
            "0003_document_metadata",
            ["ALTER TABLE documents ADD COLUMN metadata jsonb NOT NULL DEFAULT '{}'::jsonb",
             "CREATE INDEX documents_metadata ON documents USING gin (metadata jsonb_path_ops)"],
        ),
        (
            # Who may read each document (docs/readers.md), copied onto its chunks so that both
            # searches trim a restricted caller's candidates inside the query (`readers && ids`, a
            # GIN index), as they filter on status. Existing rows name no readers.
            "0004_readers",
            ["ALTER TABLE documents ADD COLUMN readers text[] NOT NULL DEFAULT '{}'",
             "ALTER TABLE chunks ADD COLUMN readers text[] NOT NULL DEFAULT '{}'",
             "CREATE INDEX documents_readers ON documents USING gin (readers)",
             "CREATE INDEX chunks_readers ON chunks USING gin (readers)"],
        ),
    ]


def _vector_adapters(conn) -> None:
    """Binary adapters between numpy arrays and pgvector's `vector` (pgvector's wire format: two
    big-endian uint16, dim and 0, then dim big-endian float32)."""
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format
    from psycopg.types import TypeInfo

    info = TypeInfo.fetch(conn, "vector")
    if info is None:
        raise RuntimeError("the pgvector extension is not installed in this database")

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = info.oid

        def dump(self, obj):
            a = np.asarray(obj, dtype=">f4").reshape(-1)
            return struct.pack(">HH", a.size, 0) + a.tobytes()

    class VectorBinaryLoader(Loader):
        format = Format.BINARY

        def load(self, data):
            return np.frombuffer(bytes(data), dtype=">f4", offset=4).astype(np.float32)

    class VectorTextLoader(Loader):
        format = Format.TEXT

        def load(self, data):
            return np.array(bytes(data).decode().strip("[]").split(","), dtype=np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(info.oid, VectorBinaryLoader)
    conn.adapters.register_loader(info.oid, VectorTextLoader)


# The longest a question waits for a connection to PostgreSQL; after a failure, the pool is built
# again at most this often (in between, questions get a 503 at once).
POOL_WAIT_S = 5.0
POOL_RETRY_S = 1.0
# A question's query: PostgreSQL cancels it after QUERY_TIMEOUT_S (`statement_timeout`), and the
# connection is cut CUT_GRACE_S later if no answer came at all (a server, or a network path, that
# went silent sends nothing, not even the cancellation). A pooled connection is checked as it is
# handed out, within CHECK_TIMEOUT_S. All the queries of one question share a budget
# (`store_time_budget`, set by the service), so it ends within seconds whatever the database does.
QUERY_TIMEOUT_S = 3.5
CUT_GRACE_S = 0.5
CHECK_TIMEOUT_S = 2.0
# TCP keepalives and a user timeout in every connection's parameters (unless the URL sets its own):
# a flow that a NAT or a load balancer dropped fails within about 20 s on an idle connection and on
# one waiting for its data to be acknowledged (an ingest's writes included), not hours later.
TCP_OPTIONS = {"keepalives": "1", "keepalives_idle": "10", "keepalives_interval": "5", "keepalives_count": "2",
               "tcp_user_timeout": "20000"}


def _tcp_options(url: str) -> dict[str, str]:
    from psycopg.conninfo import conninfo_to_dict

    try:
        given = conninfo_to_dict(url)
    except Exception:  # a malformed URL is reported by the connection itself
        return {}
    return {k: v for k, v in TCP_OPTIONS.items() if k not in given}


class _Watchdog:
    """Cuts the socket of a connection still busy past its deadline, which wakes the thread waiting
    on it with a connection error. One thread for every store in the process."""

    def __init__(self):
        self._cond = threading.Condition()
        self._deadlines: list[tuple[float, int]] = []  # a heap of (deadline, ticket)
        self._watched: dict[int, object] = {}  # ticket -> connection, while it is watched
        self._tickets = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, conn, seconds: float) -> int:
        with self._cond:
            ticket = next(self._tickets)
            self._watched[ticket] = conn
            heapq.heappush(self._deadlines, (time.monotonic() + seconds, ticket))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sourcegate-pg-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
        return ticket

    def release(self, ticket: int) -> bool:
        """Stop watching; False when the connection was cut."""
        with self._cond:
            return self._watched.pop(ticket, None) is not None

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._deadlines and self._deadlines[0][1] not in self._watched:
                    heapq.heappop(self._deadlines)
                now = time.monotonic()
                if self._deadlines and self._deadlines[0][0] <= now:
                    _, ticket = heapq.heappop(self._deadlines)
                    _cut(self._watched.pop(ticket))  # under the lock: `release` returns after the cut, never during
                    continue
                self._cond.wait(self._deadlines[0][0] - now if self._deadlines else None)


def _cut(conn) -> None:
    try:
        s = socket.socket(fileno=os.dup(conn.fileno()))
    except Exception:  # closed meanwhile
        return
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


_WATCHDOG = _Watchdog()


def _connection_lost(e: BaseException) -> bool:
    """Whether `e` says the database cannot be reached (rather than a query it refused)."""
    from psycopg_pool import PoolTimeout

    if isinstance(e, PoolTimeout):
        return True
    conn_state = getattr(e, "sqlstate", None)
    # 08xxx: connection exceptions; 57P01-57P03: the server shutting down or not accepting yet.
    return conn_state is None or conn_state.startswith("08") or conn_state in ("57P01", "57P02", "57P03")


class PostgresStore:
    vector_backend = "pgvector-hnsw"

    def __init__(self, url: str, embedder_id: str, dim: int, *, language: str = "en", pool_size: int = 4,
                 ef_search: int = 100, connect_timeout: float = 10.0, maintenance_work_mem: str = "512MB",
                 durable_writes: bool = False, query_timeout: float = QUERY_TIMEOUT_S,
                 allow_embedder_mismatch: bool = False):
        """`pool_size` connections at most (a `serve` process needs one per concurrent question);
        `ef_search` is HNSW's candidate list at query time (recall against latency);
        `maintenance_work_mem` is given to an HNSW index build (the graph should fit in it: about
        2.5 KB per 512-d chunk). Document writes commit without waiting for the disk flush
        (`synchronous_commit = off`, as the SQLite store's WAL with `synchronous=NORMAL`): a crash of
        the database server may lose the last few documents written, never part of one, and the
        next ingest writes them again; `durable_writes=True` waits for the flush. A query that
        searches or reads (what a question does) ends after `query_timeout` seconds; writes, index
        builds and ANALYZE are not bounded but by TCP keepalives.

        An index built with another embedder is refused (`EmbedderMismatch`), unless
        `allow_embedder_mismatch`: then it opens for inspection and re-embedding, and searches and
        writes are refused until it is re-embedded."""
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as e:
            raise ImportError(INSTALL_HINT) from e
        self.url = url
        self.location = redact_url(url)
        self.embedder_id = embedder_id
        self.dim = dim
        self._allow_mismatch = allow_embedder_mismatch
        self._index_embedder: tuple[str, int] = (embedder_id, dim)
        self.ef_search = int(ef_search)
        if not re.fullmatch(r"\d+\s*[kMG]B", maintenance_work_mem):
            raise ValueError("maintenance_work_mem must look like '512MB'")
        self.maintenance_work_mem = maintenance_work_mem
        self.durable_writes = durable_writes
        self.read_only = False
        self.query_timeout = float(query_timeout)
        self._tcp = _tcp_options(url)
        requested = text_search_config(language)
        try:
            with psycopg.connect(url, autocommit=True, connect_timeout=int(connect_timeout), **self._tcp) as conn:
                self.text_config = self._migrate(conn, requested)
        except psycopg.ProgrammingError:  # libpq's message quotes the part of the URL it could not read
            raise RuntimeError(f"the PostgreSQL URL {self.location} cannot be read (check SOURCEGATE_STORE: "
                               "postgresql://user:password@host:5432/dbname, with '@', ':', '/' and '%' in a "
                               "password percent-encoded)") from None
        except psycopg.OperationalError as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise RuntimeError(f"cannot connect to PostgreSQL at {self.location}: {first} "
                               "(check SOURCEGATE_STORE and that the server is running)") from None
        self._pool_size = max(1, pool_size)
        # A question waits this long at most for a connection (the database down or not answering),
        # then gets a 503; so does a connection attempt.
        self._wait_s = min(float(connect_timeout), POOL_WAIT_S)
        self._pool_lock = threading.Lock()
        self._pool_failed_at: float | None = None
        self._pool = self._new_pool()
        self._lexeme_freq: tuple[float, int, dict[str, float]] | None = None

    # -- schema -------------------------------------------------------------------------------
    def _migrate(self, conn, requested_config: str) -> str:
        import psycopg

        if conn.execute("SHOW transaction_read_only").fetchone()[0] == "on":
            return self._check_read_only(conn, requested_config)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL)")
            conn.execute("CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL)")
            done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
            for name, statements in _migrations(self.dim):
                if name in done:
                    continue
                try:
                    with conn.transaction():
                        for s in statements:
                            conn.execute(s)
                        conn.execute("INSERT INTO schema_migrations VALUES (%s, %s)", (name, datetime.now(timezone.utc)))
                except psycopg.errors.InsufficientPrivilege as e:
                    if name == "0000_pgvector":
                        raise RuntimeError(
                            f"the pgvector extension is not installed in {self.location} and this user may not "
                            "install it: ask an administrator to run CREATE EXTENSION vector; in that database") from e
                    raise
            stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
            self._note_embedder(stored)
            config = stored.get("text_search_config", requested_config)
            if config != requested_config:
                raise RuntimeError(
                    f"The index {self.location} was built for text search configuration {config!r}, not "
                    f"{requested_config!r}: set SOURCEGATE_LIBRARY_LANGUAGE to the library's language, or use "
                    "another database for a library in another language.")
            if conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (config,)).fetchone() is None:
                raise RuntimeError(f"PostgreSQL has no text search configuration {config!r}")
            for k, v in (("embedder", self.embedder_id), ("dim", str(self.dim)), ("text_search_config", config)):
                conn.execute("INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO NOTHING", (k, v))
        # A bulk load cut short leaves the table without its vector index: build it again.
        if conn.execute("SELECT to_regclass('chunks_embedding_hnsw') IS NULL").fetchone()[0]:
            self._build_vector_index(conn)
        return config

    def _check_read_only(self, conn, requested_config: str) -> str:
        """A read replica (hot standby) or a read-only role: nothing to migrate here, only checks."""
        self.read_only = True
        hint = "open it once with a writable connection to the primary (sourcegate status) first"
        if conn.execute("SELECT to_regclass('schema_migrations') IS NULL OR to_regclass('meta') IS NULL").fetchone()[0]:
            raise RuntimeError(f"The read-only database {self.location} holds no sourcegate index: {hint}")
        done = {r[0] for r in conn.execute("SELECT name FROM schema_migrations")}
        missing = [name for name, _ in _migrations(self.dim) if name not in done]
        if missing:
            raise RuntimeError(f"The read-only database {self.location} lacks migrations {', '.join(missing)}: {hint}")
        stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if "embedder" not in stored:
            raise RuntimeError(f"The read-only database {self.location} records no embedder: {hint}")
        self._note_embedder(stored)
        config = stored.get("text_search_config", requested_config)
        if config != requested_config:
            raise RuntimeError(
                f"The index {self.location} was built for text search configuration {config!r}, not "
                f"{requested_config!r}: set SOURCEGATE_LIBRARY_LANGUAGE to the library's language.")
        return config

    # -- the index's embedder ------------------------------------------------------------------
    def _note_embedder(self, stored: dict) -> None:
        if "embedder" in stored:
            self._index_embedder = (stored["embedder"], int(stored["dim"]))
            if self.embedder_mismatch and not self._allow_mismatch:
                raise self._mismatch()

    @property
    def embedder_mismatch(self) -> bool:
        return self._index_embedder != (self.embedder_id, self.dim)

    def _mismatch(self) -> EmbedderMismatch:
        return EmbedderMismatch(self.location, *self._index_embedder, self.embedder_id, self.dim)

    def _meta(self, conn, *keys: str, lock: bool = False) -> dict[str, str]:
        return dict(conn.execute("SELECT key, value FROM meta WHERE key = ANY(%s)" + (" FOR SHARE" if lock else ""),
                                 (list(keys),)).fetchall())

    def index_embedder(self) -> tuple[str, int]:
        """(embedder id, dimension) the index's vectors come from, as recorded now."""
        with self._connection() as conn:
            stored = self._meta(conn, "embedder", "dim")
        if "embedder" in stored:
            self._index_embedder = (stored["embedder"], int(stored["dim"]))
        return self._index_embedder

    def _check_embedder(self, conn) -> None:
        """In a write's transaction: the recorded embedder is this store's (read with a share lock,
        so a re-embedding cannot switch it until the write commits)."""
        stored = self._meta(conn, "embedder", "dim", lock=True)
        if "embedder" in stored:
            self._index_embedder = (stored["embedder"], int(stored["dim"]))
        if self.embedder_mismatch:
            raise self._mismatch()

    def content_hash_embedder(self) -> str | None:
        """The embedder id that salts the stored content hashes, when the index was re-embedded
        since (None: the index's own embedder)."""
        with self._connection() as conn:
            return self._meta(conn, "hash_embedder").get("hash_embedder")

    def reembed_pending(self) -> str | None:
        """The embedder ("id|dim") an interrupted re-embedding was staging vectors for, or None."""
        with self._connection() as conn:
            return self._meta(conn, "reembed_target").get("reembed_target")

    # -- re-embedding (sourcegate.ingest.reembed) ---------------------------------------------
    # New vectors are staged in `reembed_vectors` (by chunk id, with the digest of the text they
    # were made from); `reembed_finish` puts them in a new `embedding` column of the new dimension
    # in one transaction, then builds the HNSW index again.

    def reembed_begin(self, embedder_id: str, dim: int) -> None:
        target = f"{embedder_id}|{int(dim)}"
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK,))
            marker = self._meta(conn, "reembed_target").get("reembed_target")
            exists = conn.execute("SELECT to_regclass('reembed_vectors') IS NOT NULL").fetchone()[0]
            if marker != target or not exists:
                conn.execute("DROP TABLE IF EXISTS reembed_vectors")
                conn.execute(f"CREATE TABLE reembed_vectors (chunk_id text PRIMARY KEY, digest text NOT NULL, "
                             f"embedding vector({int(dim)}) NOT NULL)")
                conn.execute("INSERT INTO meta VALUES ('reembed_target', %s) ON CONFLICT (key) DO UPDATE "
                             "SET value = excluded.value", (target,))
        self._reembed_target = (embedder_id, int(dim))

    @staticmethod
    def _reembed_rows(conn, after: str | None, limit: int | None) -> list[ReembedRow]:
        sql = ("SELECT c.id, d.title, c.text, s.digest FROM chunks c JOIN documents d ON d.id = c.doc_id "
               "LEFT JOIN reembed_vectors s ON s.chunk_id = c.id"
               + (" WHERE c.id > %s" if after is not None else "") + " ORDER BY c.id"
               + (" LIMIT %s" if limit else ""))
        params = [p for p in (after, limit) if p is not None]
        out = []
        for cid, title, text, staged in conn.execute(sql, params).fetchall():
            t = reembed_text(title, text)
            digest = text_digest(t)
            out.append(ReembedRow(cid, t, digest, staged == digest))
        return out

    def reembed_batches(self, size: int):
        after = None
        while True:
            with self._connection() as conn, conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 0")
                rows = self._reembed_rows(conn, after, size)
            if not rows:
                return
            after = rows[-1].key
            yield rows

    def _stage(self, conn, rows: list[ReembedRow], vectors) -> None:
        dim = self._reembed_target[1]
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(rows), dim):
            raise ValueError(f"staged vectors have shape {vectors.shape}, expected ({len(rows)}, {dim})")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO reembed_vectors (chunk_id, digest, embedding) VALUES (%s, %s, %b) "
                            "ON CONFLICT (chunk_id) DO UPDATE SET digest = excluded.digest, embedding = excluded.embedding",
                            [(r.key, r.digest, v) for r, v in zip(rows, vectors)])

    def reembed_stage(self, rows: list[ReembedRow], vectors) -> None:
        with self._connection() as conn, conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")
            self._stage(conn, rows, vectors)

    def reembed_finish(self, embed_missing) -> int:
        """In one transaction: record the new embedder (first: writes of the old one wait, then
        fail), stage what is still missing (`embed_missing(rows)` gives their vectors), replace the
        `embedding` column by one of the new dimension filled from the staged vectors. Then the
        HNSW index is built again (searches scan exactly meanwhile). Returns the number of chunks."""
        embedder_id, dim = self._reembed_target
        with self._connection() as conn:
            with conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 0")
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_ADVISORY_LOCK,))
                old = self._meta(conn, "embedder")["embedder"]
                conn.execute("UPDATE meta SET value = %s WHERE key = 'embedder'", (embedder_id,))
                conn.execute("UPDATE meta SET value = %s WHERE key = 'dim'", (str(dim),))
                rows = self._reembed_rows(conn, None, None)
                missing = [r for r in rows if not r.done]
                if missing:
                    self._stage(conn, missing, embed_missing(missing))
                conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
                conn.execute("ALTER TABLE chunks DROP COLUMN embedding")
                conn.execute(f"ALTER TABLE chunks ADD COLUMN embedding vector({int(dim)})")
                conn.execute("UPDATE chunks c SET embedding = s.embedding FROM reembed_vectors s WHERE s.chunk_id = c.id")
                # every chunk has its new vector, or nothing changes
                conn.execute("ALTER TABLE chunks ALTER COLUMN embedding SET NOT NULL")
                conn.execute("DROP TABLE reembed_vectors")
                conn.execute("DELETE FROM meta WHERE key = 'reembed_target'")
                # the stored content hashes stay salted with the first embedder's id: unchanged
                # files are not embedded once more by the next ingest
                conn.execute("INSERT INTO meta VALUES ('hash_embedder', %s) ON CONFLICT (key) DO NOTHING", (old,))
            self._build_vector_index(conn)
            with conn.transaction():
                conn.execute("SET LOCAL statement_timeout = 0")
                conn.execute("ANALYZE chunks")
        self.embedder_id, self.dim = embedder_id, dim
        self._index_embedder = (embedder_id, dim)
        return len(rows)

    def _build_vector_index(self, conn) -> None:
        with conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute(f"SET LOCAL maintenance_work_mem = '{self.maintenance_work_mem}'")
            conn.execute(HNSW_INDEX)

    @contextmanager
    def bulk_load(self):
        """Loading an empty store (a first ingest or `store copy` of a large library): the HNSW index
        is built once at the end, several times faster than inserting into it row by row. Searches
        during the load scan exactly. On a store that already holds chunks it changes nothing."""
        with self._connection() as conn:
            empty = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]
            if empty:
                conn.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
        try:
            yield
        finally:
            if empty:
                with self._connection() as conn:
                    self._build_vector_index(conn)
                with self._connection() as conn, conn.transaction():
                    conn.execute("SET LOCAL statement_timeout = 0")
                    conn.execute("ANALYZE chunks")
                self._lexeme_freq = None

    def _new_pool(self):
        from psycopg_pool import ConnectionPool

        # Each connection is checked as it is handed out: one that died with the database (a
        # restart) is replaced there, rather than failing the first question after it is back.
        return ConnectionPool(self.url, min_size=1, max_size=self._pool_size,
                              kwargs={"autocommit": True, "connect_timeout": max(1, int(self._wait_s)), **self._tcp},
                              configure=self._configure, open=True, name="sourcegate", timeout=self._wait_s,
                              check=self._check_connection)

    @staticmethod
    def _check_connection(conn) -> None:
        """The pool's check, within CHECK_TIMEOUT_S: a connection whose peer went silent is cut."""
        from psycopg_pool import ConnectionPool

        ticket = _WATCHDOG.watch(conn, CHECK_TIMEOUT_S)
        try:
            ConnectionPool.check_connection(conn)
        finally:
            _WATCHDOG.release(ticket)

    def _current_pool(self):
        """The pool; after the database went away, a new one once a connection can be made again
        (tried at most every POOL_RETRY_S: in between, and when it fails, StoreUnavailable at once)."""
        import psycopg

        with self._pool_lock:
            if self._pool is not None:
                return self._pool
            if self._pool_failed_at is not None and time.monotonic() - self._pool_failed_at < POOL_RETRY_S:
                raise StoreUnavailable(f"cannot reach PostgreSQL at {self.location} (tried "
                                       f"{time.monotonic() - self._pool_failed_at:.1f} s ago)")
            try:  # one plain connection first: a pool would keep retrying in the background instead
                psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self._wait_s)),
                                **self._tcp).close()
            except psycopg.OperationalError as e:
                self._pool_failed_at = time.monotonic()
                raise StoreUnavailable(f"cannot reach PostgreSQL at {self.location}: {type(e).__name__}") from None
            self._pool = self._new_pool()
            return self._pool

    def _drop_pool(self, pool) -> None:
        """Forget a pool whose database went away: its reconnection backs off (up to minutes), so
        the next question after the database is back gets a fresh pool, which connects at once."""
        with self._pool_lock:
            if self._pool is not pool:
                return
            self._pool = None
            self._pool_failed_at = time.monotonic()
        threading.Thread(target=pool.close, kwargs={"timeout": 0}, name="sourcegate-pool-close", daemon=True).start()

    @contextmanager
    def _connection(self, bounded: bool = False):
        """A pooled connection; the database down, not answering or gone mid-query is
        `StoreUnavailable` (within `POOL_WAIT_S`), never the driver's own error. `bounded`: what
        is done with it ends within the query timeout and what is left of the question's budget
        (`store_time_budget`), or the connection is cut."""
        import psycopg
        from psycopg_pool import PoolTimeout

        budget = current_store_time() if bounded else None
        limit = self.query_timeout + CUT_GRACE_S
        if budget is not None:
            if budget.left <= 0:
                raise StoreUnavailable(f"PostgreSQL at {self.location} took this question's whole time for the store")
            limit = min(limit, budget.left)
        t0 = time.monotonic()
        pool = self._current_pool()
        try:
            with pool.connection(timeout=min(self._wait_s, limit) if bounded else None) as conn:
                ticket = _WATCHDOG.watch(conn, max(0.0, limit - (time.monotonic() - t0))) if bounded else None
                try:
                    yield conn
                finally:
                    if ticket is not None:
                        _WATCHDOG.release(ticket)
        except (PoolTimeout, psycopg.OperationalError, psycopg.InterfaceError) as e:
            if _connection_lost(e):
                self._drop_pool(pool)
            raise StoreUnavailable(f"cannot use PostgreSQL at {self.location} now: {type(e).__name__}") from None
        finally:
            if budget is not None:
                budget.spend(time.monotonic() - t0)

    def _read(self):
        """A connection for a question's queries (searches, reads): bounded in time."""
        return self._connection(bounded=True)

    def _configure(self, conn) -> None:
        # What a question asks is cancelled by the server after the query timeout (writes and
        # index builds lift it for their transaction).
        conn.execute(f"SET statement_timeout = {int(self.query_timeout * 1000)}")
        _vector_adapters(conn)
        # A strictly ordered iterative scan: filtered-out rows make HNSW look further instead of
        # returning fewer than k rows (pgvector 0.8).
        conn.execute(f"SET hnsw.ef_search = {self.ef_search}")
        conn.execute("SET hnsw.iterative_scan = strict_order")

    def migrations(self) -> list[str]:
        with self._read() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    # -- writes -------------------------------------------------------------------------------
    _UPSERT_DOC = """INSERT INTO documents (id, title, url, source_type, version, status, updated_at, content_hash,
        source_path, chunk_count, ingested_at, metadata, readers)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now(), %s, %s)
        ON CONFLICT (id) DO UPDATE SET title = excluded.title, url = excluded.url, source_type = excluded.source_type,
        version = excluded.version, status = excluded.status, updated_at = excluded.updated_at,
        content_hash = excluded.content_hash, source_path = excluded.source_path, chunk_count = excluded.chunk_count,
        ingested_at = excluded.ingested_at, metadata = excluded.metadata, readers = excluded.readers"""

    _UPSERT_CHUNK = """INSERT INTO chunks (id, doc_id, ordinal, text, page, heading, status, source_type, version,
        features, embedding, tsv, readers)
        VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %b, to_tsvector(%s::regconfig, %s), %s)
        ON CONFLICT (id) DO UPDATE SET doc_id = excluded.doc_id, ordinal = excluded.ordinal, text = excluded.text,
        page = excluded.page, heading = excluded.heading, status = excluded.status,
        source_type = excluded.source_type, version = excluded.version, features = excluded.features,
        embedding = excluded.embedding, tsv = excluded.tsv, readers = excluded.readers"""

    def upsert_document(self, doc: Document, chunks: list[Chunk], vectors: np.ndarray,
                        features: list[dict | None] | None = None, source_path: str | None = None) -> None:
        from psycopg.types.json import Jsonb

        vectors, features = checked_upsert(chunks, vectors, features, self.dim)
        status = doc.status or "current"
        readers = sorted(set(doc.readers or ()))
        rows = [
            (ch.id, doc.id, ch.ordinal, ch.text, ch.page, ch.heading, status, doc.source_type or "", doc.version or "",
             Jsonb(feat) if feat is not None else None, vec, self.text_config,
             tsv_text(doc.title, ch.heading, ch.text), readers)
            for ch, vec, feat in zip(chunks, vectors, features)
        ]
        if self.embedder_mismatch:
            raise self._mismatch()
        with self._connection() as conn, conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")
            self._check_embedder(conn)
            if not self.durable_writes:
                conn.execute("SET LOCAL synchronous_commit = off")
            conn.execute(self._UPSERT_DOC, (doc.id, doc.title, doc.url, doc.source_type, doc.version, status,
                                            doc.updated_at, doc.content_hash, source_path, len(chunks),
                                            Jsonb(doc.metadata or {}), readers))
            conn.execute("DELETE FROM chunks WHERE doc_id = %s AND NOT (id = ANY(%s))", (doc.id, [c.id for c in chunks]))
            if rows:
                with conn.cursor() as cur:
                    cur.executemany(self._UPSERT_CHUNK, rows)

    def delete_document(self, doc_id: str) -> bool:
        with self._connection() as conn, conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")
            return conn.execute("DELETE FROM documents WHERE id = %s", (doc_id,)).rowcount > 0

    # -- reads --------------------------------------------------------------------------------
    _DOC_COLS = ("id, title, url, source_type, version, status, updated_at, content_hash, source_path, chunk_count, "
                 "metadata, readers")

    @staticmethod
    def _record(r) -> DocumentRecord:
        return DocumentRecord(id=r[0], title=r[1], url=r[2], source_type=r[3], version=r[4], status=r[5],
                              updated_at=r[6], content_hash=r[7], source_path=r[8], chunk_count=r[9],
                              metadata=dict(r[10] or {}), readers=list(r[11] or []))

    def get_document(self, doc_id: str) -> DocumentRecord | None:
        with self._read() as conn:
            r = conn.execute(f"SELECT {self._DOC_COLS} FROM documents WHERE id = %s", (doc_id,)).fetchone()
        return self._record(r) if r else None

    def list_documents(self, readers: ReadersRule | None = None) -> list[DocumentRecord]:
        # bounded for a question (the planner lists the library); an ingest or `status` on a large
        # library may take longer
        question = current_store_time() is not None
        where, params = self._readers_sql(readers)
        with self._connection(bounded=question) as conn, conn.transaction():
            if not question:
                conn.execute("SET LOCAL statement_timeout = 0")
            rows = conn.execute(f"SELECT {self._DOC_COLS} FROM documents"
                                + (f" WHERE {where}" if where else "") + " ORDER BY id", params).fetchall()
        return [self._record(r) for r in rows]

    @staticmethod
    def _readers_sql(rule: ReadersRule | None, column: str = "readers") -> tuple[str, list]:
        """The readers rule over a `text[]` column (GIN-indexed on documents and chunks): one of the
        caller's ids among the readers (`&&`), or none at all where such documents are readable."""
        if rule is None:
            return "", []
        parts, params = [], []
        if rule.ids:
            parts.append(f"{column} && %s::text[]")
            params.append(sorted(rule.ids))
        if rule.unmarked:
            parts.append(f"{column} = '{{}}'::text[]")
        return "(" + (" OR ".join(parts) or "false") + ")", params

    @staticmethod
    def _filter_sql(filters: SearchFilters) -> tuple[str, list]:
        clauses, params = [], []
        if filters.exclude_status:
            clauses.append("status <> ALL(%s)")
            params.append(list(filters.exclude_status))
        for col in ("status", "source_type", "version"):
            val = getattr(filters, col)
            if val is not None:
                clauses.append(f"{col} = %s")
                params.append(val)
        if filters.doc_id_prefix is not None:
            clauses.append("left(doc_id, %s) = %s")
            params += [len(filters.doc_id_prefix), filters.doc_id_prefix]
        if filters.metadata:
            from psycopg.types.json import Jsonb

            clauses.append("doc_id IN (SELECT id FROM documents WHERE metadata @> %s)")
            params.append(Jsonb(dict(filters.metadata)))
        readers, more = PostgresStore._readers_sql(filters.readers)
        if readers:
            clauses.append(readers)
            params += more
        return " AND ".join(clauses), params

    def dense_search(self, vector: np.ndarray, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        if self.embedder_mismatch:
            raise self._mismatch()
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        where, params = self._filter_sql(filters)
        # The recorded embedder is checked in the same statement (a one-time filter): an index
        # re-embedded by another process since this one opened it returns nothing, then is named.
        sql = ("SELECT id, 1 - (embedding <=> %b) FROM chunks WHERE (SELECT value FROM meta WHERE key = 'embedder') = %s"
               + (f" AND {where}" if where else "") + " ORDER BY embedding <=> %b LIMIT %s")
        import psycopg

        with self._read() as conn:
            error = None
            try:
                rows = conn.execute(sql, [q, self.embedder_id, *params, q, k]).fetchall()
            except psycopg.errors.DataException as e:  # another dimension now
                rows, error = [], e
            if not rows:
                stored = self._meta(conn, "embedder", "dim")
                if "embedder" in stored:
                    self._index_embedder = (stored["embedder"], int(stored["dim"]))
                if self.embedder_mismatch:
                    raise self._mismatch()
                if error is not None:
                    raise error
        return [(cid, float(s)) for cid, s in rows]

    def lexical_search(self, query: str, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        terms = tsquery_terms(query)
        if not terms:
            return []
        where, params = self._filter_sql(filters)
        with self._read() as conn:
            rare, common = self._plan(conn, terms)
            hits = self._ranked(conn, rare, where, params, k) if rare else []
            if len(hits) < k and common:
                # Terms that match many rows: rank a bounded number of them, to fill the pool.
                seen = [h[0] for h in hits]
                more = self._ranked(conn, common, where, params, k + len(seen), cap=LEXICAL_RANK_CAP)
                hits += [h for h in more if h[0] not in seen][: k - len(hits)]
        return hits

    def _ranked(self, conn, terms: list[str], where: str, params: list, k: int,
                cap: int | None = None) -> list[tuple[str, float]]:
        # Normalisation 1 divides the rank by 1 + log(length), as BM25 favours shorter passages.
        match = "SELECT id, tsv FROM chunks WHERE tsv @@ q" + (f" AND {where}" if where else "")
        if cap is not None:
            match += f" LIMIT {int(cap)}"
        sql = (f"SELECT m.id, ts_rank_cd(m.tsv, q, 1) AS score FROM websearch_to_tsquery(%s::regconfig, %s) q, "
               f"LATERAL ({match}) m ORDER BY score DESC, m.id LIMIT %s")
        rows = conn.execute(sql, [self.text_config, " or ".join(terms), *params, k]).fetchall()
        return [(cid, float(sc)) for cid, sc in rows]

    def _costed(self, conn, terms: list[str]) -> list[tuple[float, str]] | None:
        """(estimated matching rows, term), rarest first; None on small libraries (no pruning)."""
        n, freq = self._lexeme_frequencies(conn)
        if n < LEXICAL_PRUNE_MIN_CHUNKS or not freq:
            return None
        rows = conn.execute(
            "SELECT t, array(SELECT lexeme FROM unnest(to_tsvector(%s::regconfig, t))) FROM unnest(%s::text[]) t",
            (self.text_config, [t.strip('"') for t in terms]),
        ).fetchall()
        lexemes = {t: lx for t, lx in zip(terms, (r[1] for r in rows))}
        floor = min(freq.values())  # lexemes outside the most common list are rarer than the rarest in it
        # A phrase matches no more rows than its rarest word.
        return sorted((min(freq.get(x, floor / 2) * n for x in lexemes[t]), t) for t in terms if lexemes[t])

    def _prune(self, conn, terms: list[str]) -> list[str]:
        """Rarest terms first within a budget of matching rows, on large libraries (as in the SQLite
        store). PostgreSQL ranks every row that matches (`ts_rank_cd` reads each row's tsvector), so
        the budget is strict once the rarest term is in."""
        costed = self._costed(conn, terms)
        if costed is None:
            return terms
        n = self._lexeme_frequencies(conn)[0]
        budget, spent, kept = LEXICAL_POSTINGS_BUDGET * n, 0.0, []
        for cost, t in costed:
            if kept and spent + cost > budget:
                break
            kept.append(t)
            spent += cost
        return kept or terms

    def _plan(self, conn, terms: list[str]) -> tuple[list[str], list[str]]:
        """(rare terms, ranked exactly; common terms, ranked on at most LEXICAL_RANK_CAP rows)."""
        costed = self._costed(conn, terms)
        if costed is None:
            return terms, []
        cost = dict((t, c) for c, t in costed)
        kept = self._prune(conn, terms)
        return [t for t in kept if cost.get(t, 0) <= LEXICAL_RANK_CAP], [t for t in kept if cost.get(t, 0) > LEXICAL_RANK_CAP]

    def _lexeme_frequencies(self, conn) -> tuple[int, dict[str, float]]:
        """(estimated chunk count, lexeme -> share of chunks) from the planner's statistics."""
        import time

        now = time.monotonic()
        if self._lexeme_freq is None or now - self._lexeme_freq[0] > STATS_REFRESH_S:
            n_row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass").fetchone()
            n = int(max(n_row[0], 0)) if n_row else 0
            freq: dict[str, float] = {}
            row = conn.execute(
                "SELECT most_common_elems::text::text[], most_common_elem_freqs FROM pg_stats "
                "WHERE tablename = 'chunks' AND attname = 'tsv' AND schemaname = current_schema()").fetchone()
            if row and row[0]:
                freq = {lx: float(f) for lx, f in zip(row[0], row[1])}
            self._lexeme_freq = (now, n, freq)
        return self._lexeme_freq[1], self._lexeme_freq[2]

    def get_chunks(self, chunk_ids: list[str], readers: ReadersRule | None = None) -> list[Candidate]:
        if not chunk_ids:
            return []
        where, params = self._readers_sql(readers, "d.readers")
        with self._read() as conn:
            rows = conn.execute(
                """SELECT c.id, c.doc_id, d.title, c.text, d.url, d.version, d.status, d.source_type, d.content_hash,
                   c.page, c.heading, c.features FROM chunks c JOIN documents d ON d.id = c.doc_id
                   WHERE c.id = ANY(%s)""" + (f" AND {where}" if where else ""), [list(chunk_ids), *params]).fetchall()
        by_id = {
            r[0]: Candidate(id=r[0], doc_id=r[1], title=r[2], text=r[3], url=r[4], version=r[5], status=r[6],
                            source_type=r[7], content_hash=r[8], page=r[9], heading=r[10], passage_features=r[11])
            for r in rows
        }
        return [by_id[i] for i in chunk_ids if i in by_id]

    def passage_ids(self) -> list[str]:
        """Every passage (chunk) id in the index, sorted (what `feedback.library_fingerprint` hashes)."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")  # a large library's ids take more than a question's time
            return sorted(r[0] for r in conn.execute("SELECT id FROM chunks").fetchall())

    def get_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        if not chunk_ids:
            return {}
        if self.embedder_mismatch:
            raise self._mismatch()
        with self._read() as conn, conn.cursor(binary=True) as cur:
            rows = cur.execute("SELECT id, embedding FROM chunks WHERE id = ANY(%s)", (list(chunk_ids),)).fetchall()
        return {cid: vec for cid, vec in rows}

    def export_document(self, doc_id: str) -> ExportedDocument | None:
        with self._connection() as conn, conn.cursor(binary=True) as cur:
            r = cur.execute(f"SELECT {self._DOC_COLS} FROM documents WHERE id = %s", (doc_id,)).fetchone()
            if r is None:
                return None
            rows = cur.execute("SELECT id, ordinal, text, page, heading, features, embedding FROM chunks "
                               "WHERE doc_id = %s ORDER BY ordinal", (doc_id,)).fetchall()
        chunks = [Chunk(id=x[0], doc_id=doc_id, ordinal=x[1], text=x[2], page=x[3], heading=x[4]) for x in rows]
        vectors = np.vstack([x[6] for x in rows]) if rows else np.zeros((0, self.dim), np.float32)
        return ExportedDocument(record=self._record(r), chunks=chunks, vectors=vectors, features=[x[5] for x in rows])

    def stats(self) -> StoreStats:
        with self._read() as conn:
            docs = conn.execute("SELECT count(*) FROM documents").fetchone()[0]
            chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            by_status = {
                status: {"documents": nd, "chunks": int(nc)}
                for status, nd, nc in conn.execute(
                    "SELECT status, count(*), coalesce(sum(chunk_count), 0) FROM documents GROUP BY status ORDER BY status")
            }
        return StoreStats(documents=docs, chunks=chunks, by_status=by_status, embedder=self._index_embedder[0],
                          location=self.location, dim=self._index_embedder[1])

    def analyze(self) -> None:
        """Refresh the planner's statistics (autovacuum does it too; worth doing after a bulk load)."""
        with self._connection() as conn, conn.transaction():
            conn.execute("SET LOCAL statement_timeout = 0")
            conn.execute("ANALYZE documents")
            conn.execute("ANALYZE chunks")
        self._lexeme_freq = None

    def close(self) -> None:
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

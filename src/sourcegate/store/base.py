"""The index store contract. SQLite is the default; other stores implement the same methods and
run the same contract test suite (tests/test_store_contract.py)."""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..models import Candidate, Chunk, Document


class StoreUnavailable(RuntimeError):
    """The store cannot be reached now (a database server down or not answering). The server
    answers 503 with Retry-After (the MCP tool: a tool error) and tries again; the message names
    the store, never a password."""


class EmbedderMismatch(RuntimeError):
    """The index holds vectors of another embedder (or another dimension) than the one configured.
    Its vectors cannot be compared with the configured embedder's: searching is refused. The
    index can still be opened for inspection (`allow_embedder_mismatch=True`), and `sourcegate
    ingest` re-embeds it (`sourcegate.ingest.reembed`)."""

    def __init__(self, location: str, index_embedder: str, index_dim: int, embedder: str, dim: int,
                 hint: str | None = None):
        self.location, self.index_embedder, self.index_dim = location, index_embedder, int(index_dim)
        self.embedder, self.dim = embedder, int(dim)
        self.hint = hint
        super().__init__(self._message())

    def _message(self) -> str:
        hint = self.hint or ("run `sourcegate ingest` to re-embed it with the configured embedder, or set "
                             "SOURCEGATE_EMBEDDER back to the index's")
        return (f"The index {self.location} was built with embedder {self.index_embedder} ({self.index_dim}-d), "
                f"not the configured {self.embedder} ({self.dim}-d): its vectors cannot answer questions; {hint}")

    def with_hint(self, hint: str) -> "EmbedderMismatch":
        return EmbedderMismatch(self.location, self.index_embedder, self.index_dim, self.embedder, self.dim, hint)


class StoreTime:
    """The time one question may spend waiting on the store, all its queries together: a database
    that answers each query slowly, or stops answering, ends the question with `StoreUnavailable`
    rather than holding its slot. Set for the current context by `budget()`; stores that can bound
    a query read it through `current_store_time()`."""

    def __init__(self, seconds: float):
        self.left = float(seconds)

    def spend(self, seconds: float) -> None:
        self.left -= seconds


_STORE_TIME: ContextVar[StoreTime | None] = ContextVar("sourcegate_store_time", default=None)


@contextmanager
def store_time_budget(seconds: float | None):
    """Within this block, the store's queries together may take `seconds` (None: no budget)."""
    token = _STORE_TIME.set(StoreTime(seconds) if seconds else None)
    try:
        yield
    finally:
        _STORE_TIME.reset(token)


def current_store_time() -> StoreTime | None:
    return _STORE_TIME.get()


@dataclass(frozen=True)
class ReadersRule:
    """Which documents a restricted caller may read (docs/readers.md): those whose readers name one
    of `ids` (the caller's user id and groups), and, when `unmarked` (DOCUMENTS_WITHOUT_READERS=
    everyone), those that name no readers. An unrestricted caller has no rule (None): every
    document. Every store applies it inside its queries, as it applies the other filters."""

    ids: frozenset[str] = frozenset()
    unmarked: bool = False

    def admits(self, readers) -> bool:
        """Whether a document with these readers (a list of ids, empty for none) may be read."""
        return bool(self.ids.intersection(readers)) if readers else self.unmarked

    @property
    def admits_nothing(self) -> bool:
        return not self.ids and not self.unmarked

    def describe(self) -> dict[str, object]:
        """What the audit record keeps of the rule: how many ids it reads with (the ids are the
        caller's groups, kept as a count and a hash with the caller) and what a document without
        readers means."""
        return {"trimmed": True, "ids": len(self.ids),
                "documents_without_readers": "everyone" if self.unmarked else "nobody"}


def readable(readers: "ReadersRule | None", doc: "DocumentRecord") -> bool:
    """Whether `doc` passes the rule (None: an unrestricted caller, every document)."""
    return readers is None or readers.admits(doc.readers)


@dataclass(frozen=True)
class SearchFilters:
    """Metadata filters applied inside the store. Archived revisions are excluded by default:
    the first layer against stale evidence (the gate's `is_superseded` is the second)."""

    exclude_status: tuple[str, ...] = ("archived",)
    status: str | None = None
    source_type: str | None = None
    version: str | None = None
    # Per-request filters (sourcegate.filters): documents whose id starts with this, and whose
    # metadata (front matter, sidecar) holds each (key, value).
    doc_id_prefix: str | None = None
    metadata: tuple[tuple[str, str], ...] = ()
    # The caller's readers rule (None: an unrestricted caller reads every document).
    readers: ReadersRule | None = None

    @property
    def by_document(self) -> bool:
        """Whether a filter needs the document's id, metadata or readers (not copied onto each
        chunk in every store)."""
        return self.doc_id_prefix is not None or bool(self.metadata) or self.readers is not None

    def matches(self, doc: "DocumentRecord") -> bool:
        """Whether a document passes these filters (the stores apply the same in their queries)."""
        if doc.status in self.exclude_status:
            return False
        for name in ("status", "source_type", "version"):
            want = getattr(self, name)
            if want is not None and (getattr(doc, name) or "") != want:
                return False
        if self.doc_id_prefix is not None and not doc.id.startswith(self.doc_id_prefix):
            return False
        if not readable(self.readers, doc):
            return False
        return all(doc.metadata.get(k) == v for k, v in self.metadata)


@dataclass
class DocumentRecord:
    id: str
    title: str
    content_hash: str
    status: str
    version: str | None = None
    url: str | None = None
    source_type: str | None = None
    updated_at: str | None = None
    source_path: str | None = None
    chunk_count: int = 0
    metadata: dict[str, str] = field(default_factory=dict)
    # The user and group ids that may read it (docs/readers.md); empty: it names none.
    readers: list[str] = field(default_factory=list)


@dataclass
class ExportedDocument:
    """A document as stored, with everything needed to write it into another store."""

    record: DocumentRecord
    chunks: list[Chunk]
    vectors: np.ndarray
    features: list[dict | None]


@dataclass
class StoreStats:
    documents: int
    chunks: int
    by_status: dict[str, dict[str, int]] = field(default_factory=dict)
    embedder: str | None = None
    location: str = ""
    dim: int | None = None


@dataclass
class ReembedRow:
    """A stored chunk to embed again: `key` is the store's own handle on it, `text` what the
    ingest pipeline embedded (`reembed_text`), `digest` what a staged vector is checked against
    (the text, for the target embedder), `done` whether a vector of the target embedder for
    exactly this text is already staged (by a re-embedding that was interrupted)."""

    key: object
    text: str
    digest: str
    done: bool = False


def reembed_text(title: str | None, text: str | None) -> str:
    """What the ingest pipeline embeds for a chunk (`_embed_and_features`): the document title,
    a newline, the chunk text."""
    return f"{title or ''}\n{text or ''}"


def text_digest(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode("utf-8")).hexdigest()


def checked_upsert(chunks: list[Chunk], vectors, features: list[dict | None] | None,
                   dim: int) -> tuple[np.ndarray, list[dict | None]]:
    """A store's `upsert_document` arguments checked: one vector per chunk, of the index's dimension;
    float32 vectors and one features entry per chunk (None where absent)."""
    if len(chunks) != len(vectors):
        raise ValueError("one vector per chunk is required")
    vectors = np.asarray(vectors, dtype=np.float32)
    if len(chunks) and vectors.shape[1] != dim:
        raise ValueError(f"vectors have dimension {vectors.shape[1]}, the index expects {dim}")
    return vectors, features or [None] * len(chunks)


@runtime_checkable
class Store(Protocol):
    def upsert_document(
        self, doc: Document, chunks: list[Chunk], vectors: np.ndarray, features: list[dict | None] | None = None,
        source_path: str | None = None,
    ) -> None:
        """Replace the document and all its chunks in one transaction."""

    def delete_document(self, doc_id: str) -> bool: ...

    def get_document(self, doc_id: str) -> DocumentRecord | None: ...

    def list_documents(self, readers: ReadersRule | None = None) -> list[DocumentRecord]:
        """Every document, or with `readers` only those the rule admits (in the store's query)."""

    def dense_search(self, vector: np.ndarray, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        """(chunk id, cosine similarity), best first."""

    def lexical_search(self, query: str, k: int, filters: SearchFilters = SearchFilters()) -> list[tuple[str, float]]:
        """(chunk id, BM25 score, higher is better), best first."""

    def get_chunks(self, chunk_ids: list[str], readers: ReadersRule | None = None) -> list[Candidate]:
        """The chunks of these ids, in that order; with `readers`, only those of documents the rule admits."""

    def get_vectors(self, chunk_ids: list[str]) -> dict[str, np.ndarray]:
        """Stored (normalised) vectors of the given chunks."""

    def export_document(self, doc_id: str) -> ExportedDocument | None:
        """The document's record, chunks in order, their vectors and stored features (for copying)."""

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...

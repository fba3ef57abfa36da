"""Hybrid retrieval: a dense pool plus BM25 candidates (so exact identifiers such as "P-200" or
"E-47" are found), a minimum score, then a light rerank mixing dense similarity, the BM25 score
(relative to the best lexical hit) and lexical overlap.

A question that names a version of the library held only by archived documents ("in version 1.0",
"Vitam 2.1") also searches the documents of that version: archived revisions stay out of every
other question (the first layer against stale evidence), but a question about that revision reads it.

`fuse()` and `named_versions()` are pure; `Retriever` does the I/O.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from .embed import Embedder
from .models import Candidate
from .normalize import fold
from .store import ReadersRule, SearchFilters, Store
from .text import lexical_overlap, query_terms  # noqa: F401 (part of this module's interface)


@dataclass(frozen=True)
class RetrievalSettings:
    dense_pool: int = 15
    lexical_pool: int = 15
    min_score: float = 0.1
    dense_weight: float = 0.85
    lexical_weight: float = 0.15  # share of the query's terms the passage holds
    bm25_weight: float = 0.08  # the passage's BM25 score over the best lexical hit's
    candidates: int = 12
    include_archived: bool = False
    named_versions: bool = True  # a question naming an archived version reads that version

    @classmethod
    def from_settings(cls, s) -> "RetrievalSettings":
        return cls(dense_pool=s.retrieve_dense_pool, lexical_pool=s.retrieve_lexical_pool,
                   min_score=s.retrieve_min_score, dense_weight=s.retrieve_dense_weight,
                   lexical_weight=s.retrieve_lexical_weight, bm25_weight=s.retrieve_bm25_weight,
                   candidates=s.gate_candidates, include_archived=s.retrieve_include_archived,
                   named_versions=s.retrieve_named_versions)


def fuse(dense: dict[str, float], overlap: dict[str, float], lexical: dict[str, float],
         s: RetrievalSettings) -> list[tuple[str, float]]:
    """Rerank candidates: weights on dense similarity, lexical overlap and the BM25 score relative to
    the best lexical hit (`lexical`: the BM25 hits and their scores, higher is better).
    A candidate under the minimum dense score survives only if BM25 found it and it
    shares at least half the terms."""
    top = max((v for v in lexical.values() if v > 0), default=0.0)
    scored = []
    for cid, d in dense.items():
        o = overlap.get(cid, 0.0)
        if d < s.min_score and not (cid in lexical and o >= 0.5):
            continue
        b = max(0.0, lexical.get(cid, 0.0)) / top if top > 0 else 0.0
        scored.append((cid, s.dense_weight * d + s.lexical_weight * o + s.bm25_weight * b))
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored


_VERSION_WORD = re.compile(r"(?i)\b(?:version|versions|release|releases|révision|revision|revisions|rev\.?|v)\s*$")
_VERSION_TOKEN = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)*)(?![\w]|\.\d)")


def named_versions(query: str, versions: set[str]) -> list[str]:
    """The library's versions that the question names: "1.0", "v1.0", "version 13", "Vitam 2.1". A
    dotted number is a version wherever it stands; a whole number only after "v" or a version word
    (so "keep 30 days" or "Python 3" names no version)."""
    if not versions:
        return []
    out = []
    for m in _VERSION_TOKEN.finditer(query):
        v = m.group(1)
        if v not in versions:
            continue
        if "." in v or m.group(0).lower().startswith("v") or _VERSION_WORD.search(query[: m.start()]):
            out.append(v)
    return list(dict.fromkeys(out))


_MULTI = re.compile(
    r"\b(and|both|compare|comparison|versus|vs|difference|between|each|all|et|les deux|comparer|entre|chacun)\b",
    re.IGNORECASE,
)
_IDENT = re.compile(r"\b[A-Z]{1,4}-?\d{2,5}\b")


def is_multi_document(query: str) -> bool:
    """Questions that likely need several sources: a conjunction, a comparison, or several identifiers."""
    return bool(_MULTI.search(query)) or len(set(_IDENT.findall(query))) > 1


VERSIONS_TTL_S = 60.0


class Retriever:
    def __init__(self, store: Store, embedder: Embedder, settings: RetrievalSettings = RetrievalSettings()):
        self.store = store
        self.embedder = embedder
        self.settings = settings
        self._versions: tuple[float, list[tuple[str, list[str]]]] | None = None
        self._versions_lock = threading.Lock()

    def archived_versions(self, readers: ReadersRule | None = None) -> set[str]:
        """Versions that archived documents of the library carry (read again after a minute): a question
        that names one reads that version too ("version 1 of the seal procedure", though other documents
        are at their version 1 and current). With `readers`, those of the documents the rule admits."""
        now = time.monotonic()
        with self._versions_lock:
            if self._versions is None or now - self._versions[0] > VERSIONS_TTL_S:
                docs = self.store.list_documents()
                self._versions = (now, [(d.version, d.readers) for d in docs if d.version and d.status == "archived"])
            return {v for v, r in self._versions[1] if readers is None or readers.admits(r)}

    def _version_filters(self, query: str, filters: SearchFilters) -> list[SearchFilters]:
        """Extra searches for the archived versions the question names, under the request's default
        filters only (a request that filters on its own says what it wants to read); the caller's
        readers rule stays on each."""
        s = self.settings
        if not s.named_versions or s.include_archived or replace(filters, readers=None) != SearchFilters() \
                or not _VERSION_TOKEN.search(query):
            return []  # (a question with no number lists no documents)
        return [replace(filters, exclude_status=(), version=v)
                for v in named_versions(query, self.archived_versions(filters.readers))]

    def retrieve(self, query: str, filters: SearchFilters | None = None,
                 bridged: str | None = None) -> tuple[list[Candidate], dict[str, float]]:
        """`bridged` is the query with the library language's terms added (see crosslingual.py):
        lexical search uses it, and dense search takes the better of both vectors."""
        s = self.settings
        if filters is None:
            filters = SearchFilters(exclude_status=() if s.include_archived else ("archived",))
        extra = self._version_filters(query, filters)
        t0 = time.perf_counter()
        texts = [query] + ([bridged] if bridged and bridged != query else [])
        vecs = self.embedder.embed(texts)
        qv = vecs[0]
        t1 = time.perf_counter()
        lexical_text = bridged or query
        reranker: dict[str, float] = {}
        hybrid = getattr(self.store, "hybrid_search", None)
        if hybrid is not None:
            # A search service that fuses text and vectors itself (Azure AI Search, with its
            # semantic ranker where enabled) returns one pool in one request; it then goes through
            # the same rerank, with similarities from the stored vectors.
            dense = {}
            lexical = []
            for f in (filters, *extra):
                hits = hybrid(lexical_text, list(vecs), s.dense_pool + s.lexical_pool, s.dense_pool, f)
                lexical.extend((h.id, h.score) for h in hits)
                reranker.update({h.id: h.reranker_score for h in hits if h.reranker_score is not None})
        else:
            dense = {}
            lexical = []
            for f in (filters, *extra):
                for v in vecs:
                    for cid, sim in self.store.dense_search(v, s.dense_pool, f):
                        dense[cid] = max(sim, dense.get(cid, -1.0))
                lexical.extend(self.store.lexical_search(lexical_text, s.lexical_pool, f))
        t2 = time.perf_counter()
        ids = list(dict.fromkeys([*dense.keys(), *(cid for cid, _ in lexical)]))
        # One fetch serves both: the similarity of BM25-only hits and the vectors handed to the judge.
        vectors = self.store.get_vectors(ids)
        for cid in ids:
            if cid not in dense and cid in vectors:
                dense[cid] = float(max(np.dot(vectors[cid], v) for v in vecs))
        # the caller's readers rule again: the searches applied it, and a chunk fetched by id is held to it too
        candidates = {c.id: c for c in self.store.get_chunks(ids, filters.readers)}
        terms = query_terms(lexical_text)
        overlap = {cid: lexical_overlap(terms, f"{c.title}\n{c.text}") for cid, c in candidates.items()}
        lex_scores: dict[str, float] = {}
        for cid, sc in lexical:
            lex_scores[cid] = max(sc, lex_scores.get(cid, sc))
        ranked = fuse({k: v for k, v in dense.items() if k in candidates}, overlap, lex_scores, s)[: s.candidates]
        out = []
        for cid, score in ranked:
            c = candidates[cid]
            c.dense_score = round(dense.get(cid, 0.0), 4)
            c.lexical_score = round(lex_scores.get(cid, 0.0), 4)
            c.score = round(score, 4)
            c.reranker_score = reranker.get(cid)
            c.embedding = vectors.get(cid)
            out.append(c)
        t3 = time.perf_counter()
        timings = {"embed_query": (t1 - t0) * 1000, "search": (t2 - t1) * 1000, "rerank": (t3 - t2) * 1000}
        return out, timings

"""Hybrid retrieval: a dense pool plus BM25 candidates (so exact identifiers such as "P-200" or
"E-47" are found), a minimum score, then a light rerank mixing dense similarity and lexical overlap.

`fuse()` and `diversify()` are pure; `Retriever` does the I/O.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np

from .embed import Embedder
from .models import Candidate
from .normalize import fold
from .store import SearchFilters, Store
from .store.sqlite import _STOP, _TOKEN


@dataclass(frozen=True)
class RetrievalSettings:
    dense_pool: int = 15
    lexical_pool: int = 15
    min_score: float = 0.1
    dense_weight: float = 0.85
    lexical_weight: float = 0.15
    candidates: int = 12
    include_archived: bool = False

    @classmethod
    def from_settings(cls, s) -> "RetrievalSettings":
        return cls(dense_pool=s.retrieve_dense_pool, lexical_pool=s.retrieve_lexical_pool,
                   min_score=s.retrieve_min_score, dense_weight=s.retrieve_dense_weight,
                   lexical_weight=s.retrieve_lexical_weight, candidates=s.gate_candidates,
                   include_archived=s.retrieve_include_archived)


def query_terms(text: str) -> list[str]:
    """Meaningful terms of a query: identifiers kept whole ("p-200"), stop words dropped."""
    out = []
    for tok in _TOKEN.findall(fold(text)):
        if any(ch.isdigit() for ch in tok) and re.search(r"[-/.]", tok):
            out.append(tok)
        else:
            out.extend(p for p in re.split(r"[-/.]", tok) if p and p not in _STOP and len(p) > 1)
    return list(dict.fromkeys(out))


def lexical_overlap(terms: list[str], text: str) -> float:
    """Share of query terms found in the text (prefix match, so "grease" finds "greasing")."""
    if not terms:
        return 0.0
    folded = fold(text)
    words = set(_TOKEN.findall(folded))
    hits = 0
    for t in terms:
        if t in words or (len(t) >= 5 and re.search(r"\b" + re.escape(t[: max(4, len(t) - 2)]), folded)):
            hits += 1
    return hits / len(terms)


def fuse(dense: dict[str, float], overlap: dict[str, float], lexical_ranked: set[str], s: RetrievalSettings) -> list[tuple[str, float]]:
    """Rerank candidates: weights on dense similarity and lexical overlap. A candidate under the
    minimum dense score survives only if BM25 found it and it shares at least half the terms."""
    scored = []
    for cid, d in dense.items():
        o = overlap.get(cid, 0.0)
        if d < s.min_score and not (cid in lexical_ranked and o >= 0.5):
            continue
        scored.append((cid, s.dense_weight * d + s.lexical_weight * o))
    scored.sort(key=lambda x: (-x[1], x[0]))
    return scored


_MULTI = re.compile(
    r"\b(and|both|compare|comparison|versus|vs|difference|between|each|all|et|les deux|comparer|entre|chacun)\b",
    re.IGNORECASE,
)
_IDENT = re.compile(r"\b[A-Z]{1,4}-?\d{2,5}\b")


def is_multi_document(query: str) -> bool:
    """Questions that likely need several sources: a conjunction, a comparison, or several identifiers."""
    return bool(_MULTI.search(query)) or len(set(_IDENT.findall(query))) > 1


class Retriever:
    def __init__(self, store: Store, embedder: Embedder, settings: RetrievalSettings = RetrievalSettings()):
        self.store = store
        self.embedder = embedder
        self.settings = settings

    def retrieve(self, query: str, filters: SearchFilters | None = None,
                 bridged: str | None = None) -> tuple[list[Candidate], dict[str, float]]:
        """`bridged` is the query with the library language's terms added (see crosslingual.py):
        lexical search uses it, and dense search takes the better of both vectors."""
        s = self.settings
        if filters is None:
            filters = SearchFilters(exclude_status=() if s.include_archived else ("archived",))
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
            hits = hybrid(lexical_text, list(vecs), s.dense_pool + s.lexical_pool, s.dense_pool, filters)
            dense = {}
            lexical = [(h.id, h.score) for h in hits]
            reranker = {h.id: h.reranker_score for h in hits if h.reranker_score is not None}
        else:
            dense = dict(self.store.dense_search(qv, s.dense_pool, filters))
            if len(vecs) > 1:
                for cid, sim in self.store.dense_search(vecs[1], s.dense_pool, filters):
                    dense[cid] = max(sim, dense.get(cid, -1.0))
            lexical = self.store.lexical_search(lexical_text, s.lexical_pool, filters)
        t2 = time.perf_counter()
        ids = list(dict.fromkeys([*dense.keys(), *(cid for cid, _ in lexical)]))
        # One fetch serves both: the similarity of BM25-only hits and the vectors handed to the judge.
        vectors = self.store.get_vectors(ids)
        for cid in ids:
            if cid not in dense and cid in vectors:
                dense[cid] = float(max(np.dot(vectors[cid], v) for v in vecs))
        candidates = {c.id: c for c in self.store.get_chunks(ids)}
        terms = query_terms(lexical_text)
        overlap = {cid: lexical_overlap(terms, f"{c.title}\n{c.text}") for cid, c in candidates.items()}
        lex_scores = dict(lexical)
        ranked = fuse({k: v for k, v in dense.items() if k in candidates}, overlap, set(lex_scores), s)[: s.candidates]
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

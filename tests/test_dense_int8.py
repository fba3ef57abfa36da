"""The SQLite store's in-memory dense search on a large index: the int8 scan with exact float32
rescoring returns what the exact float32 product returns."""

from __future__ import annotations

import numpy as np
import pytest

import sourcegate.store.sqlite as sq
from sourcegate.models import Chunk, Document
from sourcegate.store import SearchFilters

pytest.importorskip("simsimd")


def _index(tmp_path, n: int, dim: int = 64):
    rng = np.random.default_rng(11)
    # clustered vectors, with exact copies (ties), as real libraries hold copies of one text
    centres = rng.standard_normal((20, dim)).astype(np.float32)
    vecs = centres[rng.integers(0, 20, n)] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    vecs[n // 2: n // 2 + 40] = vecs[:40]
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    store = sq.SqliteStore(tmp_path / "index.db", "test-embedder", dim)
    per_doc = 50
    for d in range(n // per_doc):
        status = "archived" if d % 7 == 0 else "current"
        doc = Document(id=f"D{d}", title=f"doc {d}", text="x", status=status, version=str(d % 3), content_hash=f"h{d}")
        chunks = [Chunk(id=f"D{d}#{i}", doc_id=doc.id, ordinal=i, text=f"chunk {d} {i}")
                  for i in range(per_doc)]
        store.upsert_document(doc, chunks, vecs[d * per_doc:(d + 1) * per_doc])
    return store, vecs, rng


def test_int8_scan_with_rescoring_matches_the_exact_search(tmp_path, monkeypatch):
    store, vecs, rng = _index(tmp_path, 3000)
    queries = vecs[rng.integers(0, len(vecs), 30)] + 0.2 * rng.standard_normal((30, vecs.shape[1])).astype(np.float32)
    filters = [SearchFilters(), SearchFilters(exclude_status=()), SearchFilters(version="1")]
    exact = {}
    monkeypatch.setattr(sq, "INT8_MIN_ROWS", 10**9)
    store._np_cache = None
    for i, q in enumerate(queries):
        for j, f in enumerate(filters):
            exact[i, j] = store.dense_search(q, 15, f)
    assert store._matrix().codes is None
    monkeypatch.setattr(sq, "INT8_MIN_ROWS", 1000)
    store._np_cache = None
    assert store._matrix().codes is not None
    for i, q in enumerate(queries):
        for j, f in enumerate(filters):
            got = store.dense_search(q, 15, f)
            # the same similarities rank by rank (copies of one vector may swap places)
            assert np.allclose([s for _, s in got], [s for _, s in exact[i, j]], atol=1e-6)
            assert {c for c, _ in got} - {c for c, _ in exact[i, j]} <= _tied(exact[i, j], got)
    # an archived chunk never comes back under the default filters
    hits = store.dense_search(queries[0], 200, SearchFilters())
    assert all(not c.startswith(("D0#", "D7#", "D14#")) for c, _ in hits)
    store.close()


def _tied(exact, got) -> set[str]:
    """Ids of `got` whose similarity equals the last kept one of `exact` (a tie at the cut)."""
    last = exact[-1][1]
    return {c for c, s in got if abs(s - last) < 1e-6}

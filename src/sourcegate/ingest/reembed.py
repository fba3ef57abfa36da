"""Re-embedding an index for another embedder, from the text it already holds.

An index records the embedder its vectors come from. When `SOURCEGATE_EMBEDDER` names another one,
questions are refused (the two vector spaces cannot be compared) and `sourcegate ingest` first
re-embeds every stored chunk: the text the ingest pipeline embedded (the document title, a newline,
the chunk text) is read back from the index, so the source files need not exist any more.

The new vectors are staged beside the old ones (a staging table, a new column or a new vector
field), chunk by chunk; the index keeps answering with the old embedder's vectors meanwhile. Only
once every chunk has its new vector does the store switch to them and record the new embedder, in
one step (one transaction on SQLite and PostgreSQL, one metadata write on Azure AI Search). Stopped
or failed midway, the index is as it was; the next run skips the chunks already staged for exactly
their current text and goes on from there.

Passage features (injection readings, twins' terms) are kept: they are read from the text with the
judge's own embedder, not the index's. Twins (near-copies between documents) are found by vector
similarity, so they are recomputed once the new vectors are in.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..embed import Embedder
from ..store.base import ReembedRow

BATCH = 64


@dataclass
class ReembedReport:
    index_embedder: str
    index_dim: int
    embedder: str
    dim: int
    chunks: int = 0  # chunks in the index
    embedded: int = 0  # chunks embedded by this run (the others were staged by an earlier run)
    done: bool = False  # the store switched to the new vectors
    interrupted_by: int | None = None
    twins_rewritten: int = 0

    def summary(self) -> str:
        if not self.done:
            why = (f"interrupted by {signal.Signals(self.interrupted_by).name}" if self.interrupted_by is not None
                   else "stopped")
            return (f"re-embedding {why} after {self.embedded} of {self.chunks} chunks: the index still holds "
                    f"{self.index_embedder} ({self.index_dim}-d) vectors; run ingest again to go on")
        reused = self.chunks - self.embedded
        return (f"re-embedded {self.chunks} chunks with {self.embedder} ({self.dim}-d), was {self.index_embedder} "
                f"({self.index_dim}-d)" + (f"; {reused} were staged by an earlier run" if reused > 0 else ""))


class Reembedder:
    """Re-embeds a store opened with `allow_embedder_mismatch=True` for `embedder`. Stoppable like
    the `Ingestor` (`stop`, `stop_on_signals`): a stop lands between batches."""

    def __init__(self, store, embedder: Embedder, batch: int = BATCH):
        self.store = store
        self.embedder = embedder
        self.batch = max(1, batch)
        self._stop = threading.Event()
        self._stop_signal: int | None = None

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def stop(self, signum: int = signal.SIGTERM) -> None:
        self._stop_signal = signum
        self._stop.set()

    def _embed(self, texts: list[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dim):
            raise RuntimeError(f"the embedder {self.embedder.id} returned vectors of shape {vectors.shape}, "
                               f"expected ({len(texts)}, {self.embedder.dim})")
        return vectors

    def run(self, progress: Callable[[int, int], None] | None = None) -> ReembedReport:
        store, emb = self.store, self.embedder
        old_id, old_dim = store.index_embedder()
        report = ReembedReport(old_id, old_dim, emb.id, emb.dim)
        if (old_id, old_dim) == (emb.id, emb.dim):
            report.done = True
            return report
        store.reembed_begin(emb.id, emb.dim)
        report.chunks = total = store.stats().chunks
        seen = 0
        if progress:
            progress(0, total)
        for rows in store.reembed_batches(self.batch):
            if self._stop.is_set():
                report.interrupted_by = self._stop_signal
                return report
            todo = [r for r in rows if not r.done]
            if todo:
                store.reembed_stage(todo, self._embed([r.text for r in todo]))
                report.embedded += len(todo)
            seen += len(rows)
            if progress:
                progress(min(seen, total), total)
        if self._stop.is_set():
            report.interrupted_by = self._stop_signal
            return report

        def embed_rows(rows: list[ReembedRow]) -> np.ndarray:
            # chunks written or changed since they were staged (by another process): embedded in
            # the switch itself
            report.embedded += len(rows)
            return self._embed([r.text for r in rows]) if rows else np.zeros((0, emb.dim), np.float32)

        report.chunks = store.reembed_finish(embed_rows)
        report.done = True
        from ..twins import refresh_twins

        report.twins_rewritten = refresh_twins(store)
        return report

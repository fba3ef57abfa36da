"""Copy an index from one store to another (the embedded SQLite file to PostgreSQL or Azure AI
Search, or back), vectors and stored passage features included: nothing is embedded again.

Each document is written with the destination's own one-document replacement, so an interrupted
copy leaves whole documents, and running it again skips those already there (same content hash).
After the copy the destination is checked document by document: same content hash, same number
of chunks.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable

from ..models import Document
from .base import Store


@dataclass
class CopyReport:
    copied: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    source_documents: int = 0
    source_chunks: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def summary(self) -> str:
        return (f"{self.copied} copied, {self.unchanged} unchanged, {self.removed} removed ({self.chunks} chunks "
                f"written); source {self.source_documents} documents, {self.source_chunks} chunks")


def copy_store(src: Store, dst: Store, *, prune: bool = False,
               progress: Callable[[int, int, str], None] | None = None) -> CopyReport:
    """Write every document of `src` into `dst`; with `prune`, remove from `dst` the documents
    `src` does not hold. Returns the counts and any document whose check failed."""
    report = CopyReport()
    records = src.list_documents()
    # An empty PostgreSQL destination builds its vector index once, after the load.
    with getattr(dst, "bulk_load", contextlib.nullcontext)():
        _copy_documents(src, dst, records, report, progress)
    source_ids = set()
    for rec in src.list_documents():
        source_ids.add(rec.id)
        report.source_documents += 1
        report.source_chunks += rec.chunk_count
        got = dst.get_document(rec.id)
        if got is None:
            report.mismatches.append(f"{rec.id}: missing from the destination")
        elif got.content_hash != rec.content_hash:
            report.mismatches.append(f"{rec.id}: content hash differs")
        elif got.chunk_count != rec.chunk_count:
            report.mismatches.append(f"{rec.id}: {got.chunk_count} chunks in the destination, {rec.chunk_count} in the source")
    others = [rec for rec in dst.list_documents() if rec.id not in source_ids]
    if prune:
        for rec in others:
            if dst.delete_document(rec.id):
                report.removed += 1
        others = []
    # The chunks actually stored, against the documents' own counts.
    st = dst.stats()
    expected = report.source_chunks + sum(rec.chunk_count for rec in others)
    if st.chunks != expected or st.documents != report.source_documents + len(others):
        report.mismatches.append(f"the destination holds {st.documents} documents and {st.chunks} chunks, expected "
                                 f"{report.source_documents + len(others)} and {expected}")
    return report


def _copy_documents(src: Store, dst: Store, records, report: CopyReport, progress) -> None:
    total = len(records)
    for n, rec in enumerate(records, start=1):
        if progress:
            progress(n, total, rec.id)
        existing = dst.get_document(rec.id)
        if existing is not None and existing.content_hash == rec.content_hash and existing.chunk_count == rec.chunk_count:
            report.unchanged += 1
            continue
        exp = src.export_document(rec.id)
        if exp is None:  # deleted from the source while copying
            continue
        r = exp.record
        doc = Document(id=r.id, title=r.title, text="", url=r.url, source_type=r.source_type, version=r.version,
                       status=r.status, updated_at=r.updated_at, content_hash=r.content_hash,
                       metadata=dict(r.metadata), readers=list(r.readers))
        dst.upsert_document(doc, exp.chunks, exp.vectors, exp.features, source_path=r.source_path)
        report.copied += 1
        report.chunks += len(exp.chunks)

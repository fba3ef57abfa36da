"""Ingestion: walk files, parse, chunk, embed, and write each document in one transaction."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..embed import Embedder
from ..models import Chunk, Document
from ..store import Store
from .chunker import chunk_document
from .parsers import SUPPORTED, IngestError, parse_file

log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
                f"{self.removed} removed, {len(self.failed)} failed ({self.chunks} chunks written)")


def content_hash(doc: Document, salt: str = "") -> str:
    payload = json.dumps(
        [doc.title, doc.text, doc.url, doc.source_type, doc.version, doc.status, doc.updated_at, doc.pages,
         doc.headings, salt],
        ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def iter_files(root: Path) -> Iterable[Path]:
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and Path(name).suffix.lower() in SUPPORTED:
                yield Path(dirpath) / name


def _passage_features_fn() -> Callable[[str, str], dict] | None:
    try:
        from ..judges.local import passage_features
    except Exception:  # the local judge is optional for ingestion
        return None
    return passage_features


class Ingestor:
    def __init__(self, store: Store, embedder: Embedder, *, chunk_size: int = 800, chunk_overlap: int = 120,
                 max_file_bytes: int = 50 * 1024 * 1024, batch_chunks: int = 64):
        self.store = store
        self.embedder = embedder
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.max_file_bytes = max_file_bytes
        self.batch_chunks = batch_chunks
        self._features = _passage_features_fn()
        self._salt = f"{embedder.id}|{chunk_size}|{chunk_overlap}"

    def ingest(self, roots: list[Path], prune: bool = False, progress: Callable[[int, int, str], None] | None = None) -> IngestReport:
        report = IngestReport()
        files: list[tuple[Path, Path]] = []
        for root in roots:
            root = Path(root)
            if not root.exists():
                report.failed.append((str(root), "no such file or directory"))
                continue
            base = root.parent if root.is_file() else root
            files.extend((f, base) for f in iter_files(root))
        seen_ids: set[str] = set()
        failed_paths: set[str] = set()
        pending: list[tuple[Document, list[Chunk], str]] = []
        total = len(files)
        for n, (path, base) in enumerate(files, start=1):
            if progress:
                progress(n, total, str(path))
            doc_id = path.relative_to(base).as_posix() if path != base else path.name
            try:
                size = path.stat().st_size
                if size > self.max_file_bytes:
                    raise IngestError(
                        f"file is {size / 1e6:.1f} MB, over the {self.max_file_bytes / 1e6:.0f} MB cap "
                        "(raise SOURCEGATE_MAX_FILE_MB to accept it)"
                    )
                if size == 0:
                    raise IngestError("empty file")
                docs = parse_file(path, doc_id)
            except IngestError as e:
                report.failed.append((str(path), str(e)))
                failed_paths.add(str(path.resolve()))
                continue
            except Exception as e:  # a parser bug must not stop the other files
                log.debug("parser crash on %s", path, exc_info=True)
                report.failed.append((str(path), f"could not be parsed ({type(e).__name__}: {e})"))
                failed_paths.add(str(path.resolve()))
                continue
            for doc in docs:
                seen_ids.add(doc.id)
                doc.path = str(path.resolve())
                doc.content_hash = content_hash(doc, self._salt)
                existing = self.store.get_document(doc.id)
                if existing is not None and existing.content_hash == doc.content_hash:
                    report.unchanged += 1
                    continue
                chunks = chunk_document(doc, self.chunk_size, self.chunk_overlap)
                if not chunks:
                    report.failed.append((str(path), f"document {doc.id!r} has no text to index"))
                    continue
                pending.append((doc, chunks, "updated" if existing is not None else "added"))
                if sum(len(c) for _, c, _ in pending) >= self.batch_chunks:
                    self._flush(pending, report)
            if sum(len(c) for _, c, _ in pending) >= self.batch_chunks:
                self._flush(pending, report)
        self._flush(pending, report)
        if prune:
            report.removed = self._prune(roots, seen_ids, failed_paths)
        return report

    def _flush(self, pending: list[tuple[Document, list[Chunk], str]], report: IngestReport) -> None:
        if not pending:
            return
        texts = [self._embed_text(d, c) for d, chunks, _ in pending for c in chunks]
        vectors = self.embedder.embed(texts)
        offset = 0
        for doc, chunks, kind in pending:
            vecs = vectors[offset : offset + len(chunks)]
            offset += len(chunks)
            feats = None
            if self._features is not None:
                try:
                    feats = [self._features(c.text, doc.title) for c in chunks]
                except Exception:
                    log.debug("passage features failed for %s", doc.id, exc_info=True)
            try:
                self.store.upsert_document(doc, chunks, vecs, feats, source_path=doc.path)
            except Exception as e:
                report.failed.append((doc.path or doc.id, f"could not be written to the index ({e})"))
                continue
            report.chunks += len(chunks)
            if kind == "added":
                report.added += 1
            else:
                report.updated += 1
        pending.clear()

    @staticmethod
    def _embed_text(doc: Document, chunk: Chunk) -> str:
        # The title carries the equipment and the subject, often absent from the chunk itself.
        return f"{doc.title}\n{chunk.text}"

    def _prune(self, roots: list[Path], seen_ids: set[str], failed_paths: set[str]) -> int:
        resolved = [Path(r).resolve() for r in roots]
        removed = 0
        for rec in self.store.list_documents():
            if rec.id in seen_ids or not rec.source_path:
                continue
            src = Path(rec.source_path)
            if str(src) in failed_paths:  # a file that failed to parse this time is not gone
                continue
            if any(src == r or r in src.parents for r in resolved):
                if self.store.delete_document(rec.id):
                    removed += 1
        return removed

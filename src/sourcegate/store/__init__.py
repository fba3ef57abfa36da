"""Index stores, chosen by a URL: `sqlite:///path` (default), `postgresql://...`, `azure://...`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .base import DocumentRecord, ExportedDocument, SearchFilters, Store, StoreStats

__all__ = ["DocumentRecord", "ExportedDocument", "SearchFilters", "Store", "StoreStats", "open_store", "store_kind"]


def store_kind(url_or_path: str | Path) -> str:
    """'sqlite', 'postgresql' or 'azure'."""
    url = str(url_or_path)
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    if url.startswith("azure://"):
        return "azure"
    return "sqlite"


def open_store(url_or_path: str | Path, embedder_id: str, dim: int, *, language: str = "en",
               azure_api_key: str | None = None, **options: Any) -> Store:
    """`language` is the library's (full-text stemming and stop words on PostgreSQL and Azure AI
    Search); `azure_api_key` authenticates to Azure AI Search (otherwise Entra ID through
    azure-identity, when installed)."""
    url = str(url_or_path)
    kind = store_kind(url)
    if kind == "postgresql":
        from .postgres import PostgresStore

        return PostgresStore(url, embedder_id=embedder_id, dim=dim, language=language, **options)
    if kind == "azure":
        from .azure import AzureSearchStore

        return AzureSearchStore.from_url(url, embedder_id=embedder_id, dim=dim, language=language,
                                         api_key=azure_api_key, **options)
    if url.startswith("sqlite:///"):
        url = url[len("sqlite:///"):]
    from .sqlite import SqliteStore

    return SqliteStore(Path(url), embedder_id=embedder_id, dim=dim, **options)
